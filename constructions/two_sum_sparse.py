"""2-Sum under one layer of (B,k)-block-sparse attention (docs/conventions.md §2, §4.3; Theorem 1.2's two sides).

Two networks live here, both built from the full-attention construction (constructions/two_sum.py, whose module
docstring holds the readout argument, cases (a)-(c)).

* `natural(n, M, t, block, k)`: two_sum's weights with its attention swapped for (B,k)-block-sparse attention.
  Its keys are ±1 value codes, so a block summary (the mean of B codes) is a blurred average that does not say
  which values the block holds; below the B·log n line the search (verify/search/sparse.py) finds inputs it gets
  wrong. It claims nothing.

* `build(n, M, t, block, k)`, the construction `two_sum_sparse`: block summaries rich enough to find a partner,
  one summary coordinate per value class. Only the queries and keys change: the residual stream gains a one-hot
  of the token, val1h[u] = [x_i = u], and

      k_j = e_{x_j},   q_i = lambda e_{a_i}   (a_i = (t - x_i) mod M; W_Q is lambda times the permutation
                                              u -> t - u, so the modular arithmetic happens in the weights)

  1. Scores. q_i . k_j is lambda for a match (x_j = a_i) and 0 otherwise: every match scores the top, every
     non-match lambda below it. two_sum's argument needs the mass off the matches to be at most
     eps = 1 / (8 (b_n + 1)(b_M + 1)), which holds when (n - 1) e^(-lambda) <= eps: lambda = 2 x two_sum's
     `attention_scale` (its gap is 2 lambda, ours lambda).
  2. Block choice. Block b's summary coordinate a_i is (number of keys of value a_i in b) / len(b): 0 when b
     holds no partner, at least 1/B when it holds one, so query i's block score lambda c_b[a_i] is positive
     exactly for the blocks holding a partner. With k >= 1, whenever a block other than i's own holds a partner
     (an earlier block, when causal), i keeps one that does; its own block it always keeps. So whenever some
     j != i has x_j = a_i, query i attends to some match j' != i -- which is all that cases (a)-(c) use: the
     matches i attends to all score the top, and in case (c) one of them is not i.
  3. Values, MLP and readout are two_sum's: cases (a)-(c) give the margin 1/4 in exact arithmetic.
  The checker's 2-Sum proof (verify/checker/two_sum.py, step 5) proves step 2 from the weights with rounding-aware
  arithmetic, then recomputes every margin of the readout argument at the chosen format.

Budget: one layer, H = 1, d_head = max(M, b_M + b_n), d_model = M + 3 b_M + 2 b_n + 1 (two_sum's directions
plus the M one-hot ones): the rich summaries cost M coordinates, above the B·log2 n line for the sizes we
certify (the certify table lists both).
"""

from __future__ import annotations

import math

import numpy as np

from constructions import two_sum
from constructions.residual import code_width, table_bytes
from witness.errors import ParameterError
from witness.ir import MLP, Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import BlockSparseAttention
from witness.tasks.base import check_int

NAME = "two_sum_sparse"

#: The largest M accepted: the one-hot block of the residual stream has M directions.
MAX_VALUES = 4096


def natural(n: int, M: int, t: int, block: int, k: int, causal: bool = False) -> Network:
    """The two_sum construction's weights under (block, k)-block-sparse attention: the network a sparse model
    would be if it simply reused the full-attention solution. No claim is attached."""
    full = two_sum.build(n, M, t, causal)
    attention = full.layers[0].mixer
    sparse = BlockSparseAttention(**attention.arrays(), block=block, k=k, causal=attention.causal)
    meta = Meta(task=full.meta.task, params=full.meta.params, construction=f"{two_sum.NAME}_natural_sparse",
                claimed_format=None, notes={"block": block, "k": k, "from": two_sum.NAME})
    return Network(full.embedding, (Layer(sparse, full.layers[0].mlp),), full.readout, full.basis, meta)


def memory_bytes(n: int, M: int, t: int, block: int, k: int, causal: bool = False) -> int:
    """two_sum's tables M directions wider, and the M x M query and key maps."""
    d_model = 3 * code_width(M) + 2 * code_width(n) + 1 + M
    return two_sum.memory_bytes(n, M, t, causal) + table_bytes(M + n + 2 + 2 * M, d_model)


def build(n: int, M: int, t: int, block: int, k: int, causal: bool = False) -> Network:
    """The rich-summary network: two_sum's network with one-hot keys and queries under (block, k)-sparse
    attention; its readout at position i is y_i (output vocabulary {0, 1})."""
    block, k = check_int("block", block, 1), check_int("k", k, 1)
    if check_int("M", M, 2) > MAX_VALUES:
        raise ParameterError(f"two_sum_sparse has one residual direction per value: M <= {MAX_VALUES}, got {M}")
    full = two_sum.build(n, M, t, causal)
    task = full.task
    old = full.d_model
    d_model = old + task.M
    val1h = old + np.arange(task.M)  # the new one-hot directions, after two_sum's
    values = np.arange(task.M)
    b_M, b_n = code_width(task.M), code_width(task.n)

    def widen(array: np.ndarray, rows: int | None = None, columns: int | None = None) -> np.ndarray:
        """`array` zero-padded to `rows` rows and/or `columns` columns (two_sum's directions keep their index)."""
        pad = [(0, 0)] * array.ndim
        if rows is not None:
            pad[-2] = (0, rows - array.shape[-2])
        if columns is not None:
            pad[-1] = (0, columns - array.shape[-1])
        return np.pad(array, pad)

    W_E = widen(full.embedding.W_E, columns=d_model)  # [d_vocab, d_model]
    W_E[values, val1h] = 1.0
    W_pos = widen(full.embedding.W_pos, columns=d_model)  # [n_ctx, d_model]

    old_attention, mlp = full.layers[0].mixer, full.layers[0].mlp
    d_head = max(task.M, old_attention.d_head)
    # Step 1: scores lambda on matches, 0 elsewhere; lambda = 2 x two_sum's scale keeps the off-match mass <= eps.
    lam = 2 * two_sum.attention_scale(task.n, b_n, b_M)
    W_Q = np.zeros((1, d_model, d_head))  # [H, d_model, d_head]
    W_K = np.zeros((1, d_model, d_head))
    W_Q[0, val1h, (task.t - values) % task.M] = lam
    # Step 2: k_j = e_{x_j}, so a block's mean key counts its values and a block score is positive iff the block
    # holds a partner.
    W_K[0, val1h, values] = 1.0
    W_V = widen(widen(old_attention.W_V, rows=d_model), columns=d_head)  # two_sum's values (step 3)
    W_O = widen(widen(old_attention.W_O, rows=d_head), columns=d_model)
    attention = BlockSparseAttention.zeros_bias(W_Q, W_K, W_V, W_O, causal=task.causal, block=block, k=k)
    mlp = MLP(widen(mlp.W_in, rows=d_model), mlp.b_in, widen(mlp.W_out, columns=d_model), widen(mlp.b_out[None],
              columns=d_model)[0])
    readout = Readout(widen(full.readout.W_U, rows=d_model), full.readout.b_U, read=full.readout.read)
    basis = Basis(full.basis.labels + tuple(f"val1h[{u}]" for u in values))
    meta = Meta(task=task.name, params=task.params(), construction=NAME, claimed_format=full.meta.claimed_format,
                notes={**full.meta.notes, "lambda": lam, "block": block, "k": k,
                       "B_log2_n": block * math.log2(task.n)})
    return Network(Embedding(W_E, W_pos), (Layer(attention, mlp),), readout, basis, meta)


build.memory_bytes = memory_bytes
