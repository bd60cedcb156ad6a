"""Budget accounting (SPEC §2, the project's convention, matching CPW where the residual width is d*H).

H = the largest head count of any layer; d = max(d_head, ceil(d_model / H)); p = the total bits of the number
format; Hdp = H * d * p.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from witness.ir import Network


@dataclass(frozen=True)
class Budget:
    H: int
    d_head: int
    d_model: int
    p: int
    n_layers: int

    @property
    def d(self) -> int:
        return max(self.d_head, -(-self.d_model // self.H))

    @property
    def Hdp(self) -> int:
        return self.H * self.d * self.p

    def as_dict(self) -> dict[str, int]:
        return asdict(self) | {"d": self.d, "Hdp": self.Hdp}

    def table(self) -> str:
        rows = [("layers", self.n_layers), ("H", self.H), ("d_head", self.d_head), ("d_model", self.d_model),
                ("d", self.d), ("p", self.p), ("Hdp", self.Hdp)]
        return "\n".join(f"{name:>8}  {value}" for name, value in rows)


def budget(network: Network, bits: int) -> Budget:
    """The budget of `network` run at a `bits`-bit number format."""
    H = max((layer.mixer.n_heads for layer in network.layers), default=1)
    d_head = max((layer.mixer.d_head for layer in network.layers), default=0)
    return Budget(H=H, d_head=d_head, d_model=network.d_model, p=bits, n_layers=len(network.layers))
