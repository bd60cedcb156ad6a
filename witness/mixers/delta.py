"""`deltanet` and `gated_deltanet`: the delta rule S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T
(alpha_t = 1 for DeltaNet; docs/conventions.md §2). The strict operation order is `witness.mixers.matrix_state`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from witness.arith import Arithmetic
from witness.mixers.base import Mixer, combine_heads, no_options, project, record
from witness.mixers.matrix_state import (MatrixState, heads_affine, ieee, initial_matrix_state,
                                         matrix_state_reference, outer, read, reference_qkv, sigmoid, torch_forward,
                                         trace_steps)


@dataclass(frozen=True, eq=False)
class DeltaNet(MatrixState):
    """`deltanet`: S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, beta_t = sigmoid(x_t W_beta + b_beta)
    per head; o_t = S_t^T q_t. Keys are used as projected (no L2 normalisation: a network that wants unit keys
    builds them)."""

    W_beta: np.ndarray  # [H, d_model, 1]
    b_beta: np.ndarray  # [H, 1]
    kind: ClassVar[str] = "deltanet"
    array_names: ClassVar = MatrixState.projection_names + ("W_beta", "b_beta")
    option_names: ClassVar = ()
    gate_widths: ClassVar = {("W_beta", "b_beta"): 1}

    def __post_init__(self) -> None:
        self._freeze_state(self.gate_widths)


@dataclass(frozen=True, eq=False)
class GatedDeltaNet(MatrixState):
    """`gated_deltanet`: S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T with scalar gates per head
    alpha_t = sigmoid(x_t W_alpha + b_alpha) and beta_t = sigmoid(x_t W_beta + b_beta); o_t = S_t^T q_t."""

    W_alpha: np.ndarray  # [H, d_model, 1]
    b_alpha: np.ndarray  # [H, 1]
    W_beta: np.ndarray  # [H, d_model, 1]
    b_beta: np.ndarray  # [H, 1]
    kind: ClassVar[str] = "gated_deltanet"
    array_names: ClassVar = MatrixState.projection_names + ("W_alpha", "b_alpha", "W_beta", "b_beta")
    option_names: ClassVar = ()
    gate_widths: ClassVar = {("W_alpha", "b_alpha"): 1, ("W_beta", "b_beta"): 1}

    def __post_init__(self) -> None:
        self._freeze_state(self.gate_widths)


@ieee
def delta_rule(block: DeltaNet | GatedDeltaNet, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """The delta rule, S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T (alpha_t = 1 for DeltaNet),
    computed as: r = S_{t-1}^T k_t, then S[i,j] <- alpha (S[i,j] - (beta k_i) r_j) + (beta k_i) v_j; o_t = S_t^T q_t.
    Traced: hook_beta (and hook_alpha) [b, H, n, 1], hook_state [b, H, n, d_k, d_v], hook_result."""
    q, k, v = project(block, x, arith)
    beta = sigmoid(heads_affine(x, block.W_beta, block.b_beta, arith), arith)
    gated = isinstance(block, GatedDeltaNet)
    alpha = sigmoid(heads_affine(x, block.W_alpha, block.b_alpha, arith), arith) if gated else None
    batch, heads, length, d_k = k.shape
    S = np.zeros((batch, heads, d_k, v.shape[-1]))
    outputs, states = [], []
    for t in range(length):
        beta_k = arith.mul(beta[:, :, t], k[:, :, t])  # beta k_i  [b, H, d_k]
        retrieved = read(k[:, :, t], S, arith)  # r_j = sum_i k_i S[i,j]
        erased = arith.sub(S, outer(beta_k, retrieved, arith))  # S[i,j] - (beta k_i) r_j
        if gated:
            erased = arith.mul(alpha[:, :, t, :, None], erased)  # alpha (...)
        S = arith.store(arith.add(erased, outer(beta_k, v[:, :, t], arith)))  # (...) + (beta k_i) v_j
        outputs.append(read(q[:, :, t], S, arith))
        states.append(S)
    trace_steps(hooks, prefix, state=states)
    record(hooks, f"{prefix}.hook_beta", beta)
    if gated:
        record(hooks, f"{prefix}.hook_alpha", alpha)
    return combine_heads(np.stack(outputs, axis=2), block, arith, hooks, prefix)


def _reference_head(block: DeltaNet | GatedDeltaNet, h, w, affine, sigmoid, ops, dot, column, zero):
    """S[i][j] <- alpha (S[i][j] - (beta k_i) r_j) + (beta k_i) v_j with r_j = sum_i k_i S[i][j] (alpha = 1 for
    DeltaNet)."""
    q, k, v = reference_qkv(h, w, affine)
    alpha = sigmoid(affine(w["W_alpha"][h], w["b_alpha"][h])) if isinstance(block, GatedDeltaNet) else None
    beta = sigmoid(affine(w["W_beta"][h], w["b_beta"][h]))
    d_k, d_v = block.d_k, block.d_v
    S = [[zero] * d_v for _ in range(d_k)]
    outputs = []
    for t in range(len(q)):
        beta_k = [ops.mul(beta[t][0], k[t][i], "recurrent") for i in range(d_k)]
        r = [dot(k[t], column(S, j), "recurrent") for j in range(d_v)]
        erased = [[ops.sub(S[i][j], ops.mul(beta_k[i], r[j], "recurrent"), "recurrent") for j in range(d_v)]
                  for i in range(d_k)]
        if alpha is not None:
            erased = [[ops.mul(alpha[t][0], e, "recurrent") for e in row] for row in erased]
        S = [[ops.add(erased[i][j], ops.mul(beta_k[i], v[t][j], "recurrent"), "recurrent") for j in range(d_v)]
             for i in range(d_k)]
        outputs.append([dot(q[t], column(S, j), "recurrent") for j in range(d_v)])
    return outputs


KINDS = tuple(Mixer(block=block, kernel=delta_rule, reference=matrix_state_reference(_reference_head),
                    torch_forward=torch_forward, options=no_options, initial=initial_matrix_state)
              for block in (DeltaNet, GatedDeltaNet))

__all__ = ["DeltaNet", "GatedDeltaNet", "delta_rule", "KINDS"]
