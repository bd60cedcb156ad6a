"""`linear`: linear attention (Katharopoulos et al.), S_t = S_{t-1} + phi(k_t) v_t^T, optionally normalised
(docs/conventions.md §2). The strict operation order is `witness.mixers.matrix_state`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.mixers.base import Mixer, check_choice, combine_heads, project
from witness.mixers.matrix_state import (MatrixState, ieee, initial_matrix_state, matrix_state_reference, outer, read,
                                         reference_qkv, torch_forward, trace_steps)

FEATURE_MAPS = ("identity", "relu")


@dataclass(frozen=True, eq=False)
class LinearAttention(MatrixState):
    """`linear`: S_t = S_{t-1} + phi(k_t) v_t^T and o_t = S_t^T phi(q_t); with `normalize`, also the normaliser
    z_t = z_{t-1} + phi(k_t) and o_t = S_t^T phi(q_t) / (z_t . phi(q_t)). phi (`feature_map`) is the identity or
    relu, applied to q and k alike (Katharopoulos et al.)."""

    feature_map: str = "identity"
    normalize: bool = False
    kind: ClassVar[str] = "linear"
    array_names: ClassVar = MatrixState.projection_names
    option_names: ClassVar = ("feature_map", "normalize")

    def __post_init__(self) -> None:
        self._freeze_state({})
        check_choice("LinearAttention", "feature_map", self.feature_map, FEATURE_MAPS)
        if not isinstance(self.normalize, (bool, np.bool_)):
            raise ParameterError(f"LinearAttention.normalize must be a bool, got {self.normalize!r}")
        object.__setattr__(self, "normalize", bool(self.normalize))


@ieee
def linear_attention(block: LinearAttention, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """S_t = S_{t-1} + phi(k_t) v_t^T; o_t = S_t^T phi(q_t), or / (z_t . phi(q_t)) with z_t = z_{t-1} + phi(k_t).
    Traced: hook_state [b, H, n, d_k, d_v] (S_t), hook_normalizer [b, H, n, d_k] (z_t), hook_result."""
    q, k, v = project(block, x, arith)
    if block.feature_map == "relu":
        q, k = arith.relu(q), arith.relu(k)
    batch, heads, length, d_k = k.shape
    S = np.zeros((batch, heads, d_k, v.shape[-1]))
    z = np.zeros((batch, heads, d_k))
    outputs, states, normalizers = [], [], []
    for t in range(length):
        S = arith.store(arith.add(S, outer(k[:, :, t], v[:, :, t], arith)))  # S[i,j] + (k_i v_j)
        o = read(q[:, :, t], S, arith)
        if block.normalize:
            z = arith.store(arith.add(z, k[:, :, t]))  # z_i + k_i
            o = arith.div(o, read(q[:, :, t], z[..., None], arith))  # o_j / (sum_i q_i z_i)
            normalizers.append(z)
        outputs.append(o)
        states.append(S)
    trace_steps(hooks, prefix, state=states, **({"normalizer": normalizers} if block.normalize else {}))
    return combine_heads(np.stack(outputs, axis=2), block, arith, hooks, prefix)


def _reference_head(block: LinearAttention, h, w, affine, sigmoid, ops, dot, column, zero):
    """S[i][j] <- S[i][j] + k_i v_j; with `normalize`, z_i <- z_i + k_i and o_j / (q . z)."""
    q, k, v = reference_qkv(h, w, affine)
    if block.feature_map == "relu":
        q = [[ops.relu(a) for a in row] for row in q]
        k = [[ops.relu(a) for a in row] for row in k]
    d_k, d_v = block.d_k, block.d_v
    S = [[zero] * d_v for _ in range(d_k)]
    z = [zero] * d_k
    outputs = []
    for t in range(len(q)):
        S = [[ops.add(S[i][j], ops.mul(k[t][i], v[t][j], "recurrent"), "recurrent") for j in range(d_v)]
             for i in range(d_k)]
        o = [dot(q[t], column(S, j), "recurrent") for j in range(d_v)]
        if block.normalize:
            z = [ops.add(z[i], k[t][i], "recurrent") for i in range(d_k)]
            denominator = dot(q[t], z, "recurrent")
            o = [ops.div(a, denominator, "recurrent") for a in o]
        outputs.append(o)
    return outputs


def _options():
    from hypothesis import strategies as st

    return st.fixed_dictionaries({"feature_map": st.sampled_from(FEATURE_MAPS), "normalize": st.booleans()})


KINDS = (Mixer(block=LinearAttention, kernel=linear_attention, reference=matrix_state_reference(_reference_head),
               torch_forward=torch_forward, options=_options, initial=initial_matrix_state),)

__all__ = ["LinearAttention", "FEATURE_MAPS", "linear_attention", "KINDS"]
