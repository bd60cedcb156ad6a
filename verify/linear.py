"""certify's reasoning about `linear` attention layers (`witness.ir.LinearAttention`): when the read-out at the
read position is an exact copy of one position's value.

A linear layer's state at the read position is S = sum_j phi(k_j) v_j^T over every position j, and its output
o = S^T phi(q). Two facts, both read off the weights, make o a function of one position's token:

1. **Keys owned by one position each.** The keys read only position-only directions (`verify.dataflow`), so
   phi(k_j) is one exact vector per position. If every key coordinate i is nonzero at no more than one position
   (its *owner*), then each state entry S[i, :] is a sum whose terms are exact zeros but one, round(phi(k)_i v):
   the recurrence S_t = store(S_{t-1} + round(k_i v)) adds exact zeros before and after its owner's step.
2. **Queries that read one owner.** For each query the read position can form (a *case*), the nonzero coordinates
   of phi(q) must be owned by one position j* (the case's *target*) or by none (that row of S is exactly zero).
   Then o = sum_i phi(q)_i S[i, :] depends on the token at j* alone -- the other rows meet an exact zero in the
   query -- and is enclosed, per token, with the format's rounding (`verify.enclosure`) in the executor's order
   (`witness.execute`): the outer product rounded, the state stored, the read-out summed over i in index order.

Anything else -- a normaliser, keys that depend on tokens or earlier layers, a key coordinate shared by two
positions, a query reading two owners -- makes certify answer `unknown` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from verify.enclosure import Rounding, Unknown, up
from witness.ir import LinearAttention


def check_supported(mixer: LinearAttention, prefix: str) -> None:
    if mixer.normalize:
        raise Unknown(f"{prefix} divides by a normaliser; certify handles linear attention without one")


def feature(mixer: LinearAttention, values: np.ndarray) -> np.ndarray:
    """phi of exact values: the identity, or relu (exact on format values)."""
    return np.maximum(values, 0.0) if mixer.feature_map == "relu" else values


def position_keys(rounding: Rounding, weights: dict, prefix: str, head: int, mixer: LinearAttention,
                  positions: np.ndarray, key_dirs: list[int]) -> np.ndarray:
    """phi(k_j) [n, d_k] at every position, from the position embedding on the key directions (which must be
    position-only); Unknown when a key is not exact in the format."""
    W_K, b_K = weights[f"{prefix}.W_K"][head], weights[f"{prefix}.b_K"][head]
    lo, hi = rounding.point_dot(positions[:, key_dirs], W_K[key_dirs], rounded=rounding.strict)
    lo, hi = rounding.add_bias(lo, hi, b_K, "a key")
    if not np.array_equal(lo, hi):
        raise Unknown(f"{prefix}'s keys are not exact in the format")
    return feature(mixer, lo)


def key_owners(keys: np.ndarray, prefix: str) -> np.ndarray:
    """Per key coordinate, the one position where it is nonzero (-1: nowhere); Unknown when several share it."""
    nonzero = keys != 0
    shared = np.flatnonzero(nonzero.sum(axis=0) > 1)
    if shared.size:
        positions = np.flatnonzero(nonzero[:, shared[0]])
        raise Unknown(f"{prefix}: key coordinate {int(shared[0])} is nonzero at positions {positions[:4].tolist()}, "
                      "so the state mixes their values")
    return np.where(nonzero.any(axis=0), nonzero.argmax(axis=0), -1)


@dataclass(frozen=True)
class LinearRead:
    """The cases of one linear layer at the read position: per case the exact phi(q) and its target position."""

    queries: np.ndarray  # [cases, d_k], exact
    targets: np.ndarray  # [cases]
    keys: np.ndarray  # phi(k_j) [n, d_k], exact
    owners: np.ndarray  # [d_k]

    def fetch(self, rounding: Rounding, v_lo: np.ndarray, v_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Enclosure of o over every case, per token held at the target: v [tokens, d_v] -> [tokens, d_v].

        Per case: row i of the state is store(round(phi(k_{j*})_i v)) where j* owns i, else exactly zero; o is
        the index-order sum of phi(q)_i S[i, :]. The hull over cases is what the MLP after the layer sees."""
        lo = hi = None
        for query, target in zip(self.queries, self.targets):
            rows = np.flatnonzero((query != 0) & (self.owners == target))
            S_lo = np.zeros(v_lo.shape[:1] + (v_lo.shape[1], query.size))  # S^T per token [tokens, d_v, d_k]
            S_hi = S_lo.copy()
            for i in rows:
                row_lo, row_hi = rounding.scale(v_lo, v_hi, self.keys[target, i], "a state entry")
                S_lo[:, :, i], S_hi[:, :, i] = rounding.store(row_lo, row_hi, "a state entry")
            o_lo, o_hi = rounding.matmul(S_lo, S_hi, query[:, None], "a linear read-out")
            o_lo, o_hi = o_lo[..., 0], o_hi[..., 0]
            lo = o_lo if lo is None else np.minimum(lo, o_lo)
            hi = o_hi if hi is None else np.maximum(hi, o_hi)
        return lo, hi

    def record(self, cases: np.ndarray) -> dict:
        return {"key_owners": self.owners.tolist(),
                "cases": [{"query": case.tolist(), "target": int(t)} for case, t in zip(cases, self.targets)]}


def read_cases(rounding: Rounding, weights: dict, prefix: str, mixer: LinearAttention, cases: np.ndarray,
               query_dirs: list[int], positions: np.ndarray, key_dirs: list[int]) -> LinearRead:
    """The target of every case (see the module docstring); Unknown when an assumption fails."""
    check_supported(mixer, prefix)
    keys = position_keys(rounding, weights, prefix, 0, mixer, positions, key_dirs)
    owners = key_owners(keys, prefix)
    W_Q, b_Q = weights[f"{prefix}.W_Q"][0], weights[f"{prefix}.b_Q"][0]
    q_lo, q_hi = rounding.point_dot(cases, W_Q[query_dirs], rounded=rounding.strict)
    q_lo, q_hi = rounding.add_bias(q_lo, q_hi, b_Q, "a query")
    if not np.array_equal(q_lo, q_hi):
        raise Unknown(f"{prefix}'s queries are not exact in the format")
    queries = feature(mixer, q_lo)
    targets = np.empty(queries.shape[0], dtype=np.int64)
    for c, query in enumerate(queries):
        read = set(owners[query != 0].tolist()) - {-1}
        if len(read) != 1:
            raise Unknown(f"{prefix}: a query reads the keys of {len(read)} positions, not one")
        targets[c] = read.pop()
    return LinearRead(queries, targets, keys, owners)


def mixed_bounds(rounding: Rounding, prefix: str, mixer: LinearAttention, q_lo: np.ndarray, q_hi: np.ndarray,
                 v_lo: np.ndarray, v_hi: np.ndarray,
                 keys: np.ndarray | None, k_lo: np.ndarray, k_hi: np.ndarray, length: int,
                 error: Callable, inside: Callable, long_sum: Callable) -> tuple[np.ndarray, np.ndarray]:
    """A bound on one head's read-out o at every position and for every input, for `verify.certify`'s residual
    bounds: |S[i, c]| <= the rounded sum of (count_i) terms of size max_j |phi(k_j)_i| * max |v_c|, where count_i
    is the number of positions whose key coordinate i can be nonzero -- from the exact per-position keys when the
    keys are position-only (`keys`), else every position with the interval [k_lo, k_hi]; then
    |o_c| <= sum_i max|phi(q)_i| |S[i, c]| plus the rounding of a d_k-term sum."""
    check_supported(mixer, prefix)
    if keys is None:
        size = np.maximum(np.abs(feature(mixer, k_lo)), np.abs(feature(mixer, k_hi)))
        count = length if size.any() else 0
    else:
        size = np.abs(keys).max(axis=0)
        count = int((keys != 0).sum(axis=0).max(initial=0))
    value = np.maximum(np.abs(v_lo), np.abs(v_hi))
    term = rounding.round(up(np.outer(size, value) * (1 + rounding.unit) + rounding.eta), f"{prefix} state terms")
    state = long_sum(rounding, term, max(count, 1), f"{prefix} states")  # stored every step: rounding is monotone
    inside(-state, state, f"{prefix} states")
    query = np.maximum(np.abs(feature(mixer, q_lo)), np.abs(feature(mixer, q_hi)))
    magnitude = query @ state
    size_out = up(magnitude + error(magnitude, query.size))
    return -size_out, size_out
