"""Budget accounting (docs/conventions.md §2, the project's convention, matching CPW where the residual width is d*H).

H = the largest head count of any layer; d = max(d_head, ceil(d_model / H)); p = the total bits of the number
format; Hdp = H * d * p. A recurrent mixer's state bits: the numbers it carries from one position to the next
(`state_numbers`: H (d_k d_v + d_k) for the matrix-state forms, H d_state for the general RNN) times p.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from witness.arith import Format, parse_format
from witness.ir import Network


@dataclass(frozen=True)
class Budget:
    H: int
    d_head: int
    d_model: int
    p: int
    n_layers: int
    state_numbers: tuple[int, ...] = ()  # per layer: numbers its mixer carries between positions (0: attention)

    @property
    def state_bits_per_layer(self) -> tuple[int, ...]:
        return tuple(numbers * self.p for numbers in self.state_numbers)

    @property
    def state_bits(self) -> int:
        return sum(self.state_bits_per_layer)

    @property
    def d(self) -> int:
        return max(self.d_head, -(-self.d_model // self.H))

    @property
    def Hdp(self) -> int:
        return self.H * self.d * self.p

    def as_dict(self) -> dict[str, int]:
        fields = {k: v for k, v in asdict(self).items() if k != "state_numbers"}
        return fields | {"d": self.d, "Hdp": self.Hdp, "state_bits": self.state_bits,
                         "state_bits_per_layer": list(self.state_bits_per_layer)}

    def table(self) -> str:
        rows = [("layers", self.n_layers), ("H", self.H), ("d_head", self.d_head), ("d_model", self.d_model),
                ("d", self.d), ("p", self.p), ("Hdp", self.Hdp), ("state bits", self.state_bits)]
        if self.state_bits:
            rows.append(("per layer", " ".join(str(bits) for bits in self.state_bits_per_layer)))
        return "\n".join(f"{name:>10}  {value}" for name, value in rows)


def budget(network: Network, bits: int) -> Budget:
    """The budget of `network` run at a `bits`-bit number format."""
    H = max((layer.mixer.n_heads for layer in network.layers), default=1)
    d_head = max((layer.mixer.d_head for layer in network.layers), default=0)
    state_numbers = tuple(getattr(layer.mixer, "state_numbers", 0) for layer in network.layers)
    return Budget(H=H, d_head=d_head, d_model=network.d_model, p=bits, n_layers=len(network.layers),
                  state_numbers=state_numbers)


def rounded_weights_report(network: Network, fmt: Format | str) -> dict[str, int]:
    """For each array that rounding to `fmt` changes: how many of its entries change (±inf counts as a change).

    An empty dict means every weight is exact in the format. A fixed-format overflow raises, naming the array.
    """
    fmt = parse_format(fmt) if isinstance(fmt, str) else fmt
    changed = {}
    for name, array in network.state_dict().items():
        count = int(np.count_nonzero(fmt.round(array, f"weights {name}") != array))
        if count:
            changed[name] = count
    return changed
