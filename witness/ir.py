"""The network IR: one representation for every network witness builds, trains, searches or imports.

Blocks act on a residual stream of width d_model (x <- x + block(x)); names and shapes follow TransformerLens
(`W_Q` [H, d_model, d_head], `W_O` [H, d_head, d_model], ...), with no layer norm and no hidden 1/sqrt(d_head)
score scale, so that a GPT-2-style forward pass over the same arrays reproduces the executor. This module holds
data only; arithmetic lives in `witness.arith` and `witness.execute`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from witness.errors import FileFormatError, ParameterError

READ_MODES = ("last", "all")


def frozen_array(value: Any, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A read-only float64 copy of `value`; checks the shape where one is given and that every entry is finite."""
    array = np.array(value, dtype=np.float64)
    if shape is not None and array.shape != shape:
        raise ParameterError(f"{name} has shape {array.shape}, expected {shape}")
    if not np.isfinite(array).all():
        raise ParameterError(f"{name} has non-finite entries")
    array.setflags(write=False)
    return array


class _Arrays:
    """Frozen dataclasses whose array fields are validated, frozen float64 copies; `arrays()` lists them by name."""

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
class _Projections(_Arrays):
    """The arrays of every attention-like mixer, softmax or recurrent: per head h, query, key and value
    projections and an output projection (TransformerLens names). Softmax kinds have d_k = d_v = d_head."""

    W_Q: np.ndarray  # [H, d_model, d_k]
    W_K: np.ndarray  # [H, d_model, d_k]
    W_V: np.ndarray  # [H, d_model, d_v]
    W_O: np.ndarray  # [H, d_v, d_model]
    b_Q: np.ndarray  # [H, d_k]
    b_K: np.ndarray  # [H, d_k]
    b_V: np.ndarray  # [H, d_v]
    b_O: np.ndarray  # [d_model]

    @property
    def n_heads(self) -> int:
        return self.W_Q.shape[0]

    @property
    def d_k(self) -> int:
        return self.W_Q.shape[2]

    @property
    def d_v(self) -> int:
        return self.W_V.shape[2]

    @property
    def d_head(self) -> int:
        return max(self.d_k, self.d_v)

    @property
    def d_model(self) -> int:
        return self.W_Q.shape[1]


class SoftmaxHeads(_Projections):
    """The arrays every softmax-attention kind shares (full, block-sparse, sliding-window): H heads of W_Q, W_K,
    W_V [H, d_model, d_head], W_O [H, d_head, d_model], their biases and b_O [d_model], checked and frozen."""

    array_names: ClassVar = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")

    def _freeze_heads(self) -> None:
        W_Q = np.asarray(self.W_Q)
        if W_Q.ndim != 3:
            raise ParameterError(f"{type(self).__name__}.W_Q must be [H, d_model, d_head], got shape {W_Q.shape}")
        H, d_model, d_head = W_Q.shape
        self._freeze({
            "W_Q": (H, d_model, d_head), "W_K": (H, d_model, d_head), "W_V": (H, d_model, d_head),
            "W_O": (H, d_head, d_model), "b_Q": (H, d_head), "b_K": (H, d_head), "b_V": (H, d_head),
            "b_O": (d_model,),
        })
        object.__setattr__(self, "causal", bool(self.causal))

    @classmethod
    def zeros_bias(cls, W_Q, W_K, W_V, W_O, **options):
        """The block with these weights, zero biases and the given options (`causal`, `block`, ...)."""
        H, d_model, d_head = np.shape(W_Q)
        zero = np.zeros((H, d_head))
        return cls(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O, b_Q=zero, b_K=zero, b_V=zero, b_O=np.zeros(d_model), **options)


@dataclass(frozen=True, eq=False)
class Attention(SoftmaxHeads):
    """Softmax attention with H heads. Scores are q.k with no hidden scale; `causal` masks keys after the query."""

    causal: bool = True
    kind: ClassVar[str] = "attention"
    option_names: ClassVar = ("causal",)

    def __post_init__(self) -> None:
        self._freeze_heads()


#: The largest block size and window: dividing a block's key sum by B, done in float64 and rounded once, is then
#: correctly rounded in every `strict` format (|float64 error| <= 2^(E-53) is below 2^(E-P)/B, the least distance
#: of a quotient a/B from a rounding midpoint, for P <= 25 significant bits).
MAX_SPAN = 2**24


def _check_span(owner: str, name: str, value: Any, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{owner}.{name} must be an integer, got {value!r}")
    if not low <= int(value) <= MAX_SPAN:
        raise ParameterError(f"{owner}.{name} must lie in [{low}, 2^24], got {value}")
    return int(value)


@dataclass(frozen=True, eq=False)
class BlockSparseAttention(SoftmaxHeads):
    """(B,k)-block-sparse softmax attention (docs/conventions.md §2, the project's convention, after NSA / MoBA).

    Keys are cut into contiguous blocks of `block` = B positions (the last block may be shorter). Per head, block
    b's summary c_b is the mean of its keys (sum in index order, divided by the block's length). Query i scores
    the blocks by q_i . c_b and keeps its own block plus the `k` best other candidate blocks -- highest score
    first, ties to the lower block index, NaN scores last -- then runs exact softmax attention over the tokens of
    the kept blocks. Candidates: every other block; with `causal`, only the blocks before i's own (those wholly at
    positions <= i), and inside the own block only keys j <= i. Same arrays as `Attention`.
    """

    block: int
    k: int
    causal: bool = True
    kind: ClassVar[str] = "block_sparse"
    option_names: ClassVar = ("block", "k", "causal")

    def __post_init__(self) -> None:
        self._freeze_heads()
        object.__setattr__(self, "block", _check_span("BlockSparseAttention", "block", self.block, 1))
        object.__setattr__(self, "k", _check_span("BlockSparseAttention", "k", self.k, 0))


@dataclass(frozen=True, eq=False)
class SlidingWindowAttention(SoftmaxHeads):
    """Softmax attention over a window of `window` = W positions: with `causal`, query i sees keys i-W+1 .. i (the
    last W positions); without, every key j with |i - j| < W. Same arrays as `Attention`."""

    window: int
    causal: bool = True
    kind: ClassVar[str] = "sliding_window"
    option_names: ClassVar = ("window", "causal")

    def __post_init__(self) -> None:
        self._freeze_heads()
        object.__setattr__(self, "window", _check_span("SlidingWindowAttention", "window", self.window, 1))


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

    mixer: Attention  # or any class in MIXERS
    mlp: MLP | None = None


# -- recurrent mixers (conventions §2): linear attention and its decay / delta-rule relatives, and a general RNN ---------
FEATURE_MAPS = ("identity", "relu")
GATES = ("none", "sigmoid")
RNN_ACTIVATIONS = ("identity", "relu")


class _MatrixState(_Projections):
    """The arrays every matrix-state mixer shares: per head h, q_t = x_t W_Q[h] + b_Q[h] and k_t [d_k],
    v_t = x_t W_V[h] + b_V[h] [d_v], a state S_t in R^(d_k x d_v) that starts at zero, the read-out
    o_t = S_t^T q_t, and W_O [H, d_v, d_model] with b_O [d_model] as in softmax attention. A gate pair (W, b) has
    W [H, d_model, width] and b [H, width].
    """

    projection_names: ClassVar = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
    #: Each gate pair (W, b) and its width in a fresh layer (`array_shapes`): 1 (one per head) or "d_k" (per row).
    gate_widths: ClassVar[dict[tuple[str, str], int | str]] = {}
    #: Arrays that the form pins to zero (RetNet's W_alpha: its decay ignores the input); trainers keep them so.
    zero_arrays: ClassVar[tuple[str, ...]] = ()
    #: A recurrence reads only the past: position t sees positions 0..t.
    causal: ClassVar[bool] = True

    @classmethod
    def array_shapes(cls, H: int, d_model: int, d_head: int) -> dict[str, tuple[int, ...]]:
        """The shape of every array of a fresh layer with d_k = d_v = d_head (what random and trained networks fill)."""
        shapes = _projection_shapes(H, d_model, d_head, d_head)
        for (W, b), width in cls.gate_widths.items():
            width = d_head if width == "d_k" else width
            shapes[W], shapes[b] = (H, d_model, width), (H, width)
        return shapes

    def _freeze_state(self, gates: dict[tuple[str, str], int | None]) -> None:
        """Check and freeze the projections, then each gate pair; a width None is read off the W array (1 or d_k)."""
        W_Q, W_V = np.asarray(self.W_Q), np.asarray(self.W_V)
        if W_Q.ndim != 3 or W_V.ndim != 3:
            raise ParameterError(f"{type(self).__name__}.W_Q and W_V must be [H, d_model, d_k] and [H, d_model, d_v], "
                                 f"got shapes {W_Q.shape} and {W_V.shape}")
        H, d_model, d_k = W_Q.shape
        shapes = _projection_shapes(H, d_model, d_k, W_V.shape[2])
        for (W, b), width in gates.items():
            if width is None:
                width = np.shape(getattr(self, W))[-1] if np.ndim(getattr(self, W)) == 3 else -1
                if width not in (1, d_k):
                    raise ParameterError(f"{type(self).__name__}.{W} must be [H, d_model, 1] (one gate per head) or "
                                         f"[H, d_model, d_k] (one per state row), got shape {np.shape(getattr(self, W))}")
            shapes[W], shapes[b] = (H, d_model, width), (H, width)
        self._freeze(shapes)

    @property
    def state_numbers(self) -> int:
        """Numbers the layer carries from one position to the next, conventions §2's count H (d_k d_v + d_k): the
        matrix state plus a d_k normaliser (counted for every matrix-state form, as the paper does)."""
        return self.n_heads * (self.d_k * self.d_v + self.d_k)


def _projection_shapes(H: int, d_model: int, d_k: int, d_v: int) -> dict[str, tuple[int, ...]]:
    return {"W_Q": (H, d_model, d_k), "W_K": (H, d_model, d_k), "W_V": (H, d_model, d_v), "W_O": (H, d_v, d_model),
            "b_Q": (H, d_k), "b_K": (H, d_k), "b_V": (H, d_v), "b_O": (d_model,)}


def _check_choice(owner: str, name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ParameterError(f"{owner}.{name} must be one of {choices}, got {value!r}")


@dataclass(frozen=True, eq=False)
class LinearAttention(_MatrixState):
    """`linear`: S_t = S_{t-1} + phi(k_t) v_t^T and o_t = S_t^T phi(q_t); with `normalize`, also the normaliser
    z_t = z_{t-1} + phi(k_t) and o_t = S_t^T phi(q_t) / (z_t . phi(q_t)). phi (`feature_map`) is the identity or
    relu, applied to q and k alike (Katharopoulos et al.)."""

    feature_map: str = "identity"
    normalize: bool = False
    kind: ClassVar[str] = "linear"
    array_names: ClassVar = _MatrixState.projection_names
    option_names: ClassVar = ("feature_map", "normalize")

    def __post_init__(self) -> None:
        self._freeze_state({})
        _check_choice("LinearAttention", "feature_map", self.feature_map, FEATURE_MAPS)
        if not isinstance(self.normalize, (bool, np.bool_)):
            raise ParameterError(f"LinearAttention.normalize must be a bool, got {self.normalize!r}")
        object.__setattr__(self, "normalize", bool(self.normalize))


@dataclass(frozen=True, eq=False)
class DecayAttention(_MatrixState):
    """`decay`: S_t = diag(alpha_t) S_{t-1} + k_t v_t^T and o_t = S_t^T q_t, with the decay
    alpha_t = gate(x_t W_alpha + b_alpha) per head: one scalar (W_alpha [H, d_model, 1]) or one per state row
    (W_alpha [H, d_model, d_k]); `gate` is `none` (alpha is the affine value itself) or `sigmoid`. A fixed decay
    is W_alpha = 0. The presets `retnet`, `gla` and `mamba2` are this form with its shape pinned."""

    W_alpha: np.ndarray  # [H, d_model, 1 or d_k]
    b_alpha: np.ndarray  # [H, 1 or d_k]
    gate: str = "sigmoid"
    kind: ClassVar[str] = "decay"
    array_names: ClassVar = _MatrixState.projection_names + ("W_alpha", "b_alpha")
    gate_widths: ClassVar = {("W_alpha", "b_alpha"): 1}
    option_names: ClassVar = ("gate",)
    #: What a preset pins: the gate, whether alpha has one entry per state row, whether it ignores the input.
    preset: ClassVar[tuple[str, bool, bool] | None] = None

    def __post_init__(self) -> None:
        self._freeze_state({("W_alpha", "b_alpha"): None})
        _check_choice(type(self).__name__, "gate", self.gate, GATES)
        if self.preset is not None:
            gate, per_row, fixed = self.preset
            shape = "one decay per state row" if per_row else "one decay per head"
            width = self.d_k if per_row else 1
            if self.gate != gate or self.W_alpha.shape[2] != width or (fixed and np.any(self.W_alpha != 0)):
                raise ParameterError(f"{self.kind} is the decay form with gate {gate!r}, {shape}"
                                     f"{', input-independent (W_alpha = 0)' if fixed else ''}; got gate "
                                     f"{self.gate!r} and W_alpha of shape {self.W_alpha.shape}")


@dataclass(frozen=True, eq=False)
class RetNet(DecayAttention):
    """`retnet`: a fixed scalar decay per head, alpha = b_alpha (W_alpha = 0, no gate) -- RetNet's gamma."""

    gate: str = "none"
    kind: ClassVar[str] = "retnet"
    option_names: ClassVar = ()  # the preset pins the gate
    zero_arrays: ClassVar = ("W_alpha",)
    preset: ClassVar = ("none", False, True)


@dataclass(frozen=True, eq=False)
class GLA(DecayAttention):
    """`gla`: an input-dependent decay per state row, alpha_t = sigmoid(x_t W_alpha + b_alpha) (gated linear
    attention's diagonal gate)."""

    kind: ClassVar[str] = "gla"
    option_names: ClassVar = ()
    gate_widths: ClassVar = {("W_alpha", "b_alpha"): "d_k"}
    preset: ClassVar = ("sigmoid", True, False)


@dataclass(frozen=True, eq=False)
class Mamba2(DecayAttention):
    """`mamba2`: an input-dependent scalar decay per head, alpha_t = sigmoid(x_t W_alpha + b_alpha) (Mamba-2's
    scalar-times-identity A; the project's convention writes its exp(-softplus) gate as a sigmoid)."""

    kind: ClassVar[str] = "mamba2"
    option_names: ClassVar = ()
    preset: ClassVar = ("sigmoid", False, False)


@dataclass(frozen=True, eq=False)
class DeltaNet(_MatrixState):
    """`deltanet`: S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, beta_t = sigmoid(x_t W_beta + b_beta)
    per head; o_t = S_t^T q_t. Keys are used as projected (no L2 normalisation: a network that wants unit keys
    builds them)."""

    W_beta: np.ndarray  # [H, d_model, 1]
    b_beta: np.ndarray  # [H, 1]
    kind: ClassVar[str] = "deltanet"
    array_names: ClassVar = _MatrixState.projection_names + ("W_beta", "b_beta")
    option_names: ClassVar = ()
    gate_widths: ClassVar = {("W_beta", "b_beta"): 1}

    def __post_init__(self) -> None:
        self._freeze_state(self.gate_widths)


@dataclass(frozen=True, eq=False)
class GatedDeltaNet(_MatrixState):
    """`gated_deltanet`: S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T with scalar gates per head
    alpha_t = sigmoid(x_t W_alpha + b_alpha) and beta_t = sigmoid(x_t W_beta + b_beta); o_t = S_t^T q_t."""

    W_alpha: np.ndarray  # [H, d_model, 1]
    b_alpha: np.ndarray  # [H, 1]
    W_beta: np.ndarray  # [H, d_model, 1]
    b_beta: np.ndarray  # [H, 1]
    kind: ClassVar[str] = "gated_deltanet"
    array_names: ClassVar = _MatrixState.projection_names + ("W_alpha", "b_alpha", "W_beta", "b_beta")
    option_names: ClassVar = ()
    gate_widths: ClassVar = {("W_alpha", "b_alpha"): 1, ("W_beta", "b_beta"): 1}

    def __post_init__(self) -> None:
        self._freeze_state(self.gate_widths)


@dataclass(frozen=True, eq=False)
class RNN(_Arrays):
    """`rnn`, the general recurrent form (state in, token in -> state out, output): per head a state
    s_t in R^d_state starting at zero, s_t = act(s_{t-1} W_s[h] + (x_t W_x[h] + b_x[h])) with act the identity or
    relu (an elementwise / ReLU-affine recurrence), and output s_t W_O[h]; heads summed, plus b_O."""

    W_x: np.ndarray  # [H, d_model, d_state]
    b_x: np.ndarray  # [H, d_state]
    W_s: np.ndarray  # [H, d_state, d_state]
    W_O: np.ndarray  # [H, d_state, d_model]
    b_O: np.ndarray  # [d_model]
    activation: str = "relu"
    kind: ClassVar[str] = "rnn"
    array_names: ClassVar = ("W_x", "b_x", "W_s", "W_O", "b_O")
    option_names: ClassVar = ("activation",)
    zero_arrays: ClassVar[tuple[str, ...]] = ()
    causal: ClassVar[bool] = True

    @classmethod
    def array_shapes(cls, H: int, d_model: int, d_head: int) -> dict[str, tuple[int, ...]]:
        """The shape of every array of a fresh layer with d_state = d_head."""
        return {"W_x": (H, d_model, d_head), "b_x": (H, d_head), "W_s": (H, d_head, d_head),
                "W_O": (H, d_head, d_model), "b_O": (d_model,)}

    def __post_init__(self) -> None:
        W_x = np.asarray(self.W_x)
        if W_x.ndim != 3:
            raise ParameterError(f"RNN.W_x must be [H, d_model, d_state], got shape {W_x.shape}")
        H, d_model, d_state = W_x.shape
        self._freeze({"W_x": (H, d_model, d_state), "b_x": (H, d_state), "W_s": (H, d_state, d_state),
                      "W_O": (H, d_state, d_model), "b_O": (d_model,)})
        _check_choice("RNN", "activation", self.activation, RNN_ACTIVATIONS)

    @property
    def n_heads(self) -> int:
        return self.W_x.shape[0]

    @property
    def d_state(self) -> int:
        return self.W_x.shape[2]

    @property
    def d_head(self) -> int:
        return self.d_state

    @property
    def d_model(self) -> int:
        return self.W_x.shape[1]

    @property
    def state_numbers(self) -> int:
        """Numbers carried from one position to the next: H d_state."""
        return self.n_heads * self.d_state


#: The recurrent mixer kinds: each carries a fixed-size state from position to position (`state_numbers`).
RECURRENT_MIXERS = (LinearAttention, DecayAttention, RetNet, GLA, Mamba2, DeltaNet, GatedDeltaNet, RNN)


#: Mixer kind (the `kind` stored in a file's structure) -> IR class. Every mixer class has `kind`, `array_names`
#: (its arrays under `blocks.{l}.attn.`), `option_names` (its non-array fields, stored in the structure), `n_heads`,
#: `d_head` and `d_model`. A new block kind adds its class here, its kernel in `witness.execute.MIXER_KERNELS`.
MIXERS: dict[str, type] = {cls.kind: cls for cls in (Attention, BlockSparseAttention, SlidingWindowAttention)
                           + RECURRENT_MIXERS}


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
    """A whole network: embedding, layers, readout, the names of the residual directions, and metadata."""

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

    # -- conveniences that delegate to the rest of the core ------------------------------------------------
    @property
    def task(self):
        """The task object named in the metadata, or None for a network that claims no task."""
        from witness.tasks import task_from_params

        return None if self.meta.task is None else task_from_params(self.meta.task, self.meta.params)

    def run(self, tokens: Any):
        """Float64 forward pass of one token sequence (or a batch): the predicted token id(s); -1 marks a tie.

        For a network that reads the last position this is one int per sequence; for one that reads every
        position, a list per sequence.
        """
        from witness.execute import run

        batch = np.asarray(tokens)
        predictions = run(self, batch).predictions
        single = batch.ndim == 1
        if self.readout.read == "last":
            values = [int(row[0]) for row in predictions]
        else:
            values = [[int(v) for v in row] for row in predictions]
        return values[0] if single else values

    def budget(self, bits: int = 64):
        from witness.budget import budget

        return budget(self, bits)

    def save(self, path) -> None:
        from witness.io import save

        save(self, path)

    def with_arrays(self, replacements: dict[str, np.ndarray]) -> Network:
        """A copy with some arrays replaced, addressed by state-dict name (for mutation tests and training)."""
        state = dict(self.state_dict())
        unknown = set(replacements) - set(state)
        if unknown:
            raise ParameterError(f"unknown array names: {sorted(unknown)}")
        state.update(replacements)
        return network_from_state(state, self.structure(), self.basis, self.meta)

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


def network_from_state(state: dict[str, np.ndarray], structure: dict[str, Any], basis: Basis, meta: Meta) -> Network:
    """Rebuild a Network from TransformerLens-named arrays plus `Network.structure()`; errors name what is missing."""

    def take(prefix: str, cls: type) -> dict[str, np.ndarray]:
        missing = [name for name in cls.array_names if f"{prefix}.{name}" not in state]
        if missing:
            raise FileFormatError(f"missing arrays: {', '.join(f'{prefix}.{m}' for m in missing)}")
        return {name: state[f"{prefix}.{name}"] for name in cls.array_names}

    try:
        layers_spec = list(structure["layers"])
        read = structure["read"]
    except (KeyError, TypeError):
        raise FileFormatError("structure must list 'layers' and the readout's 'read' mode") from None
    embedding = Embedding(_get(state, "embed.W_E"), _get(state, "pos_embed.W_pos"))
    layers = []
    for l, spec in enumerate(layers_spec):
        cls = MIXERS.get(spec.get("mixer"))
        if cls is None:
            raise FileFormatError(f"blocks.{l}: unknown mixer kind {spec.get('mixer')!r}; known: {sorted(MIXERS)}")
        options = {name: spec[name] for name in cls.option_names if name in spec}
        mixer = cls(**take(f"blocks.{l}.attn", cls), **options)
        mlp = MLP(**take(f"blocks.{l}.mlp", MLP)) if spec.get("mlp") else None
        layers.append(Layer(mixer, mlp))
    readout = Readout(**take("unembed", Readout), read=read)
    return Network(embedding, tuple(layers), readout, basis, meta)


def _get(state: dict[str, np.ndarray], name: str) -> np.ndarray:
    if name not in state:
        raise FileFormatError(f"missing array {name}")
    return state[name]


def layer_blocks(network: Network) -> list[tuple[str, Any]]:
    """Every block in execution order with its TransformerLens prefix: [('blocks.0.attn', Attention), ...]."""
    blocks = []
    for l, layer in enumerate(network.layers):
        blocks.append((f"blocks.{l}.attn", layer.mixer))
        if layer.mlp is not None:
            blocks.append((f"blocks.{l}.mlp", layer.mlp))
    return blocks


__all__ = ["MIXERS", "Embedding", "SoftmaxHeads", "Attention", "BlockSparseAttention", "SlidingWindowAttention",
           "LinearAttention", "DecayAttention", "RetNet", "GLA", "Mamba2", "DeltaNet", "GatedDeltaNet", "RNN",
           "RECURRENT_MIXERS", "MLP", "Layer", "Readout", "Basis", "Meta", "Network", "network_from_state",
           "layer_blocks"]
