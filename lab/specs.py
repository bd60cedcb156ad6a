"""What `lab.train` trains: `LayerSpec` (one layer: a mixer of any registered kind and an optional MLP) and
`Architecture` (heads, widths, the layer list, the read mode), with its parameter count, memory estimate and seeded
random initialisation (`Architecture.initial_network`). Free of torch: an architecture is checked and sized before
anything trains."""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from typing import Any

import numpy as np

from witness.errors import ParameterError
from witness.ir import MLP, READ_MODES, Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import MIXERS, RECURRENT_MIXERS
from witness.resources import require_memory
from witness.tasks.base import check_int


@dataclass(frozen=True)
class LayerSpec:
    """One layer: a mixer, then a ReLU MLP of width `d_mlp` (None: no MLP). The mixer is causal (or bidirectional)
    softmax attention by default, or any kind in `witness.mixers.MIXERS` named by `mixer` (e.g. "deltanet"), with its
    form's non-array `options` (e.g. {"feature_map": "relu", "normalize": True} for "linear"; kept as sorted
    (name, value) pairs so that a LayerSpec stays hashable)."""

    causal: bool = True
    d_mlp: int | None = None
    mixer: str = "attention"
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.causal, bool):
            raise ParameterError(f"LayerSpec.causal must be a bool, got {self.causal!r}")
        if self.d_mlp is not None:
            check_int("d_mlp", self.d_mlp, 1)
        if self.mixer not in MIXERS:
            raise ParameterError(f"LayerSpec.mixer must be one of {sorted(MIXERS)}, got {self.mixer!r}")
        allowed = set(MIXERS[self.mixer].block.option_names) - {"causal"}
        try:
            options = dict(self.options)
        except (TypeError, ValueError):
            options = None
        if options is None or set(options) - allowed:
            raise ParameterError(f"LayerSpec.options for {self.mixer!r} may set {sorted(allowed)}, got {self.options!r}")
        required = {f.name for f in fields(MIXERS[self.mixer].block) if f.name in allowed
                    and f.default is MISSING and f.default_factory is MISSING}
        if required - set(options):
            raise ParameterError(f"LayerSpec.options for {self.mixer!r} must set {sorted(required)}, "
                                 f"got {self.options!r}")
        object.__setattr__(self, "options", tuple(sorted(options.items())))


@dataclass(frozen=True)
class Architecture:
    """What to train: H heads of size d_head per layer, residual width d_model, the layer list, the read mode."""

    H: int
    d_head: int
    d_model: int
    layers: tuple[LayerSpec, ...]
    read: str = "last"

    def __post_init__(self) -> None:
        for name in ("H", "d_head", "d_model"):
            check_int(name, getattr(self, name), 1)
        layers = tuple(self.layers)
        if not layers or not all(isinstance(layer, LayerSpec) for layer in layers):
            raise ParameterError("Architecture.layers must be a non-empty list of LayerSpec")
        object.__setattr__(self, "layers", layers)
        if self.read not in READ_MODES:
            raise ParameterError(f"Architecture.read must be one of {READ_MODES}, got {self.read!r}")

    def parameter_count(self, task) -> int:
        """How many numbers the network for `task` holds (embedding, every layer's arrays, readout)."""
        d, H, k = self.d_model, self.H, self.d_head
        count = (2 * task.vocab_size + context_length(task)) * d + task.vocab_size
        for spec in self.layers:
            cls = MIXERS[spec.mixer].block
            if cls in RECURRENT_MIXERS:
                count += sum(math.prod(shape) for shape in cls.array_shapes(H, d, k).values())
            else:
                count += 4 * H * d * k + 3 * H * k + d
            if spec.d_mlp is not None:
                count += 2 * d * spec.d_mlp + spec.d_mlp + d
        return count

    def memory_bytes(self, task) -> int:
        """What building and training the network holds at once: float64 arrays and their frozen copy (16 bytes a
        number), the torch module's parameters, gradients and Adam's two moments (32 bytes)."""
        return 48 * self.parameter_count(task)

    def initial_network(self, task, seed: int) -> Network:
        """Random weights (normal, std 1/sqrt(fan-in)) for `task`'s vocabulary and context (`context_length`: the
        prompt, and for a task answered by generated tokens the longest transcript a generation step runs), from
        `seed`. The output vocabulary is the task's token vocabulary, as in TransformerLens (d_vocab_out = d_vocab).
        Refused (`TooLarge`) before allocating when `memory_bytes` exceeds what the machine has."""
        require_memory(self.memory_bytes(task), f"a network of d_model {self.d_model}, H {self.H}, d_head "
                                                f"{self.d_head} and {len(self.layers)} layers")
        rng = np.random.default_rng(seed)
        d, H, k = self.d_model, self.H, self.d_head
        vocab, n_ctx = task.vocab_size, context_length(task)

        def normal(fan_in: int, *shape: int) -> np.ndarray:
            return rng.normal(scale=1 / math.sqrt(fan_in), size=shape)

        layers = []
        for depth, spec in enumerate(self.layers):
            mixer = MIXERS[spec.mixer]
            block = mixer.initial(mixer.block, dict(spec.options), causal=spec.causal, H=H, d_model=d, d_head=k,
                                  n_ctx=n_ctx, resid_scale=EMBED_RESID_SCALE * RESID_GROWTH ** depth, normal=normal)
            mlp = None
            if spec.d_mlp is not None:
                mlp = MLP(normal(d, d, spec.d_mlp), np.zeros(spec.d_mlp), normal(spec.d_mlp, spec.d_mlp, d), np.zeros(d))
            layers.append(Layer(block, mlp))
        embedding = Embedding(rng.normal(size=(vocab, d)), rng.normal(size=(n_ctx, d)))
        readout = Readout(normal(d, d, vocab), np.zeros(vocab), self.read)
        meta = Meta(task=task.name, params=task.params(), claimed_format="fp64")
        return Network(embedding, tuple(layers), readout, Basis(tuple(f"x[{i}]" for i in range(d))), meta)


def context_length(task) -> int:
    """The positions (W_pos rows) a network for `task` needs: its prompt, or where the task is answered by generated
    tokens, its `context_length` (the prompt and every generated token fed back, `witness.generate`)."""
    return task.context_length if getattr(task, "generated_tokens", 0) else task.prompt_length


#: The residual's entry scale (rms) a recurrent layer's initialisation plans for
#: (`witness.mixers.matrix_state.initial_matrix_state`): the embedding's entries are the sum of two unit normals
#: (W_E, W_pos), and every layer of a random stack grows it by a factor of about 1.3 (measured on the search's
#: hybrids, d_model 8), planned as 1.5.
EMBED_RESID_SCALE = math.sqrt(2)
RESID_GROWTH = 1.5


__all__ = ["LayerSpec", "Architecture", "context_length", "EMBED_RESID_SCALE", "RESID_GROWTH"]
