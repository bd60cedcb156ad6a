"""`decay` and its presets `retnet`, `gla`, `mamba2`: S_t = diag(alpha_t) S_{t-1} + k_t v_t^T with a gated or fixed
decay (docs/conventions.md §2). The strict operation order is `witness.mixers.matrix_state`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.mixers.base import Mixer, check_choice, combine_heads, no_options, project, record
from witness.mixers.matrix_state import (MatrixState, heads_affine, ieee, initial_matrix_state,
                                         matrix_state_reference, outer, read, reference_qkv, sigmoid, torch_forward,
                                         trace_steps)

GATES = ("none", "sigmoid")


@dataclass(frozen=True, eq=False)
class DecayAttention(MatrixState):
    """`decay`: S_t = diag(alpha_t) S_{t-1} + k_t v_t^T and o_t = S_t^T q_t, with the decay
    alpha_t = gate(x_t W_alpha + b_alpha) per head: one scalar (W_alpha [H, d_model, 1]) or one per state row
    (W_alpha [H, d_model, d_k]); `gate` is `none` (alpha is the affine value itself) or `sigmoid`. A fixed decay
    is W_alpha = 0. The presets `retnet`, `gla` and `mamba2` are this form with its shape pinned."""

    W_alpha: np.ndarray  # [H, d_model, 1 or d_k]
    b_alpha: np.ndarray  # [H, 1 or d_k]
    gate: str = "sigmoid"
    kind: ClassVar[str] = "decay"
    array_names: ClassVar = MatrixState.projection_names + ("W_alpha", "b_alpha")
    gate_widths: ClassVar = {("W_alpha", "b_alpha"): 1}
    option_names: ClassVar = ("gate",)
    #: What a preset pins: the gate, whether alpha has one entry per state row, whether it ignores the input.
    preset: ClassVar[tuple[str, bool, bool] | None] = None

    def __post_init__(self) -> None:
        self._freeze_state({("W_alpha", "b_alpha"): None})
        check_choice(type(self).__name__, "gate", self.gate, GATES)
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


@ieee
def decay_attention(block: DecayAttention, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """S_t = diag(alpha_t) S_{t-1} + k_t v_t^T, alpha_t = gate(x_t W_alpha + b_alpha) (one per head or per row);
    o_t = S_t^T q_t. Traced: hook_alpha [b, H, n, 1 or d_k], hook_state [b, H, n, d_k, d_v], hook_result."""
    q, k, v = project(block, x, arith)
    alpha = heads_affine(x, block.W_alpha, block.b_alpha, arith)
    if block.gate == "sigmoid":
        alpha = sigmoid(alpha, arith)
    batch, heads, length, d_k = k.shape
    S = np.zeros((batch, heads, d_k, v.shape[-1]))
    outputs, states = [], []
    for t in range(length):
        decayed = arith.mul(alpha[:, :, t, :, None], S)  # alpha_i S[i,j]; a scalar alpha broadcasts over i
        S = arith.store(arith.add(decayed, outer(k[:, :, t], v[:, :, t], arith)))  # (alpha_i S[i,j]) + (k_i v_j)
        outputs.append(read(q[:, :, t], S, arith))
        states.append(S)
    trace_steps(hooks, prefix, state=states)
    record(hooks, f"{prefix}.hook_alpha", alpha)
    return combine_heads(np.stack(outputs, axis=2), block, arith, hooks, prefix)


def _reference_head(block: DecayAttention, h, w, affine, sigmoid, ops, dot, column, zero):
    """S[i][j] <- alpha_i S[i][j] + k_i v_j (alpha_0 for a scalar decay)."""
    q, k, v = reference_qkv(h, w, affine)
    alpha = affine(w["W_alpha"][h], w["b_alpha"][h])
    if block.gate == "sigmoid":
        alpha = sigmoid(alpha)
    d_k, d_v = block.d_k, block.d_v
    S = [[zero] * d_v for _ in range(d_k)]
    outputs = []
    for t in range(len(q)):
        S = [[ops.add(ops.mul(alpha[t][i if len(alpha[t]) > 1 else 0], S[i][j], "recurrent"),
                      ops.mul(k[t][i], v[t][j], "recurrent"), "recurrent") for j in range(d_v)] for i in range(d_k)]
        outputs.append([dot(q[t], column(S, j), "recurrent") for j in range(d_v)])
    return outputs


def _options():
    from hypothesis import strategies as st

    return st.fixed_dictionaries({"gate": st.sampled_from(GATES)})


KINDS = tuple(Mixer(block=block, kernel=decay_attention, reference=matrix_state_reference(_reference_head),
                    torch_forward=torch_forward, options=options, initial=initial_matrix_state)
              for block, options in ((DecayAttention, _options), (RetNet, no_options), (GLA, no_options),
                                     (Mamba2, no_options)))

__all__ = ["DecayAttention", "RetNet", "GLA", "Mamba2", "GATES", "decay_attention", "KINDS"]
