"""The network IR: one representation for every network witness builds, trains, searches or imports.

Blocks act on a residual stream of width d_model (x <- x + block(x)); names and shapes follow TransformerLens
(`W_Q` [H, d_model, d_head], `W_O` [H, d_head, d_model], ...), with no layer norm and no hidden 1/sqrt(d_head)
score scale, so that a GPT-2-style forward pass over the same arrays reproduces the executor. This module holds
data only and imports nothing of witness above `witness.errors` and `witness.storage`: the mixer kinds' blocks live
in `witness.mixers` (one module each, beside their kernels), arithmetic in `witness.arith` and `witness.execute`,
and what is done with a network in `witness.network`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from witness.errors import ParameterError
from witness.storage import STORAGE_DTYPES, is_sealed, seal

READ_MODES = ("last", "all")


def frozen_array(value: Any, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """`value` as a read-only array in one of witness.storage's STORAGE_DTYPES: the array itself when nothing can
    write to it (`witness.storage.is_sealed`), else a read-only copy, in its own dtype when that is a storage dtype
    and in float64 otherwise. Checks the shape where one is given and that every entry is finite."""
    array = np.asarray(value)
    if array.dtype not in STORAGE_DTYPES:
        array = np.array(array, dtype=np.float64)
    elif not is_sealed(array):
        array = np.array(array)
    if shape is not None and array.shape != shape:
        raise ParameterError(f"{name} has shape {array.shape}, expected {shape}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ParameterError(f"{name} has non-finite entries")
    return seal(array)


class _Arrays:
    """Frozen dataclasses whose array fields are validated, read-only arrays (`frozen_array`); `arrays()` lists
    them by name."""

    array_names: ClassVar[tuple[str, ...]] = ()

    def _freeze(self, shapes: dict[str, tuple[int, ...]]) -> None:
        for name in self.array_names:
            object.__setattr__(self, name, frozen_array(getattr(self, name), f"{type(self).__name__}.{name}",
                                                        shapes.get(name)))

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in self.array_names}


@dataclass(frozen=True, eq=False)
class Embedding(_Arrays):
    """Token table W_E [d_vocab, d_model] plus position table W_pos [n_ctx, d_model]."""

    W_E: np.ndarray
    W_pos: np.ndarray
    array_names: ClassVar = ("W_E", "W_pos")

    def __post_init__(self) -> None:
        self._freeze({})
        if self.W_E.ndim != 2 or self.W_pos.ndim != 2 or self.W_E.shape[1] != self.W_pos.shape[1]:
            raise ParameterError(f"embedding shapes disagree: W_E {self.W_E.shape}, W_pos {self.W_pos.shape}")

    @property
    def d_model(self) -> int:
        return self.W_E.shape[1]


@dataclass(frozen=True, eq=False)
class MLP(_Arrays):
    """x -> relu(x W_in + b_in) W_out + b_out."""

    W_in: np.ndarray  # [d_model, d_mlp]
    b_in: np.ndarray  # [d_mlp]
    W_out: np.ndarray  # [d_mlp, d_model]
    b_out: np.ndarray  # [d_model]
    activation: str = "relu"
    kind: ClassVar[str] = "mlp"
    array_names: ClassVar = ("W_in", "b_in", "W_out", "b_out")

    def __post_init__(self) -> None:
        W_in = np.asarray(self.W_in)
        if W_in.ndim != 2:
            raise ParameterError(f"MLP.W_in must be [d_model, d_mlp], got shape {W_in.shape}")
        d_model, d_mlp = W_in.shape
        self._freeze({"W_in": (d_model, d_mlp), "b_in": (d_mlp,), "W_out": (d_mlp, d_model), "b_out": (d_model,)})
        if self.activation != "relu":
            raise ParameterError(f"MLP activation must be 'relu', got {self.activation!r}")

    @property
    def d_model(self) -> int:
        return self.W_in.shape[0]

    @property
    def d_mlp(self) -> int:
        return self.W_in.shape[1]


@dataclass(frozen=True, eq=False)
class Layer:
    """One TransformerLens block: a mixing layer, then an optional MLP, each with its residual connection."""

    mixer: Any  # a block of any kind in witness.mixers.MIXERS
    mlp: MLP | None = None


@dataclass(frozen=True, eq=False)
class Readout(_Arrays):
    """Unembedding W_U [d_model, d_vocab_out] + b_U; the prediction is the unique argmax (a tie is a failure).

    `read` says where the output is read: at the `last` position only, or at `all` positions.
    """

    W_U: np.ndarray
    b_U: np.ndarray
    read: str = "last"
    array_names: ClassVar = ("W_U", "b_U")

    def __post_init__(self) -> None:
        W_U = np.asarray(self.W_U)
        if W_U.ndim != 2:
            raise ParameterError(f"Readout.W_U must be [d_model, d_vocab_out], got shape {W_U.shape}")
        self._freeze({"W_U": W_U.shape, "b_U": (W_U.shape[1],)})
        if self.read not in READ_MODES:
            raise ParameterError(f"Readout.read must be one of {READ_MODES}, got {self.read!r}")


@dataclass(frozen=True)
class Basis:
    """Names of the residual directions, e.g. `one`, `type:z2`, `idx_v[3]`, `R1[0]`; one label per dimension."""

    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        labels = tuple(str(label) for label in self.labels)
        if len(set(labels)) != len(labels):
            duplicates = sorted({label for label in labels if labels.count(label) > 1})
            raise ParameterError(f"basis labels must be unique; repeated: {duplicates[:5]}")
        object.__setattr__(self, "labels", labels)

    def __len__(self) -> int:
        return len(self.labels)

    def index(self, label: str) -> int:
        try:
            return self.labels.index(label)
        except ValueError:
            raise ParameterError(f"no residual direction named {label!r}") from None

    def group(self, name: str) -> list[int]:
        """Indices of `name[0]`, `name[1]`, ... in order (empty when the group has no directions)."""
        found = []
        while f"{name}[{len(found)}]" in self.labels:
            found.append(self.labels.index(f"{name}[{len(found)}]"))
        return found


@dataclass(frozen=True)
class Meta:
    """What a network claims to be: the task and its parameters, who built it, and at what precision."""

    task: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    construction: str | None = None
    claimed_format: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            json.dumps({"params": self.params, "notes": self.notes})
        except TypeError as exc:
            raise ParameterError(f"network metadata must be JSON-serialisable: {exc}") from None


@dataclass(frozen=True, eq=False)
class Network:
    """A whole network: embedding, layers, readout, the names of the residual directions, and metadata.

    Its arrays are frozen. The four conveniences `net.task`, `net.run(tokens)`, `net.budget(bits)` and
    `net.save(path)` are methods that hand the network to the module doing the work (tasks, the executor,
    `witness.budget`, `witness.io`); those modules import this one, so each method imports its module when called."""

    embedding: Embedding
    layers: tuple[Layer, ...]
    readout: Readout
    basis: Basis
    meta: Meta = field(default_factory=Meta)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        d_model = self.embedding.d_model
        if len(self.basis) != d_model:
            raise ParameterError(f"basis has {len(self.basis)} labels but d_model is {d_model}")
        for l, layer in enumerate(self.layers):
            blocks = [("attn", layer.mixer)] + ([("mlp", layer.mlp)] if layer.mlp is not None else [])
            for name, block in blocks:
                if block.d_model != d_model:
                    raise ParameterError(f"blocks.{l}.{name} has d_model {block.d_model}, the embedding {d_model}")
        if self.readout.W_U.shape[0] != d_model:
            raise ParameterError(f"unembed.W_U has {self.readout.W_U.shape[0]} rows, d_model is {d_model}")

    # -- sizes -------------------------------------------------------------------------------------------
    @property
    def d_model(self) -> int:
        return self.embedding.d_model

    @property
    def n_ctx(self) -> int:
        return self.embedding.W_pos.shape[0]

    @property
    def d_vocab(self) -> int:
        return self.embedding.W_E.shape[0]

    @property
    def d_vocab_out(self) -> int:
        return self.readout.W_U.shape[1]

    def read_positions(self, length: int) -> tuple[int, ...]:
        return (length - 1,) if self.readout.read == "last" else tuple(range(length))

    # -- what is done with a whole network ------------------------------------------------------------------
    @property
    def task(self):
        """The task object named in the metadata, or None for a network that claims no task."""
        from witness.tasks import task_from_params

        return None if self.meta.task is None else task_from_params(self.meta.task, self.meta.params)

    def run(self, tokens: Any):
        """Float64 forward pass of one token sequence (or a batch): the predicted token id(s); -1 marks a tie.

        For a network that reads the last position this is one int per sequence; for one that reads every position,
        a list per sequence."""
        from witness.execute import run

        batch = np.asarray(tokens)
        predictions = run(self, batch).predictions
        if self.readout.read == "last":
            values = [int(row[0]) for row in predictions]
        else:
            values = [[int(v) for v in row] for row in predictions]
        return values[0] if batch.ndim == 1 else values

    def budget(self, bits: int = 64):
        """The budget (docs/conventions.md §2) of this network run at a `bits`-bit number format."""
        from witness.budget import budget

        return budget(self, bits)

    def save(self, path) -> None:
        """Write this network to a weights file (`witness.io.save`: .npz or .safetensors)."""
        from witness.io import save

        save(self, path)

    # -- the TransformerLens-named state dict --------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Every array under its TransformerLens name (`embed.W_E`, `blocks.0.attn.W_Q`, `unembed.W_U`, ...)."""
        state = {"embed.W_E": self.embedding.W_E, "pos_embed.W_pos": self.embedding.W_pos}
        for l, layer in enumerate(self.layers):
            state.update({f"blocks.{l}.attn.{k}": v for k, v in layer.mixer.arrays().items()})
            if layer.mlp is not None:
                state.update({f"blocks.{l}.mlp.{k}": v for k, v in layer.mlp.arrays().items()})
        state.update({f"unembed.{k}": v for k, v in self.readout.arrays().items()})
        return state

    def with_arrays(self, replacements: dict[str, np.ndarray]) -> Network:
        """A copy with some arrays replaced, addressed by state-dict name (for mutation tests and training). Each
        block that gets a new array is rebuilt by its own class, and so checked again."""
        unknown = set(replacements) - set(self.state_dict())
        if unknown:
            raise ParameterError(f"unknown array names: {sorted(unknown)}")

        def rebuilt(block, names: dict[str, str]):
            """`block` with the replacements for its arrays (state-dict name -> field name in `names`)."""
            new = {field_name: replacements[key] for key, field_name in names.items() if key in replacements}
            return dataclasses.replace(block, **new) if new else block

        def prefixed(prefix: str, block) -> dict[str, str]:
            return {f"{prefix}.{name}": name for name in block.array_names}

        embedding = rebuilt(self.embedding, {"embed.W_E": "W_E", "pos_embed.W_pos": "W_pos"})
        layers = tuple(Layer(rebuilt(layer.mixer, prefixed(f"blocks.{l}.attn", layer.mixer)),
                             None if layer.mlp is None else rebuilt(layer.mlp, prefixed(f"blocks.{l}.mlp", layer.mlp)))
                       for l, layer in enumerate(self.layers))
        readout = rebuilt(self.readout, prefixed("unembed", self.readout))
        return Network(embedding, layers, readout, self.basis, self.meta)

    def structure(self) -> dict[str, Any]:
        """The non-array facts needed to rebuild the network from its state dict."""
        return {
            "layers": [
                {"mixer": layer.mixer.kind, **{name: getattr(layer.mixer, name) for name in layer.mixer.option_names},
                 "mlp": layer.mlp is not None}
                for layer in self.layers
            ],
            "read": self.readout.read,
        }


def layer_blocks(network: Network) -> list[tuple[str, Any]]:
    """Every block in execution order with its TransformerLens prefix: [('blocks.0.attn', Attention), ...]."""
    blocks = []
    for l, layer in enumerate(network.layers):
        blocks.append((f"blocks.{l}.attn", layer.mixer))
        if layer.mlp is not None:
            blocks.append((f"blocks.{l}.mlp", layer.mlp))
    return blocks


__all__ = ["READ_MODES", "frozen_array", "Embedding", "MLP", "Layer", "Readout", "Basis", "Meta", "Network",
           "layer_blocks"]
