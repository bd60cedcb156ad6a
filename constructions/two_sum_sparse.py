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
     eps = 1 / (8 (b_n + 1)(b_M + 1)), which holds when (n - 1) e^(-lambda) <= eps: lambda = CODE_GAP x two_sum's
     `attention_scale` (its ±1 codes put non-matches CODE_GAP lambda lower, our one-hots lambda).
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
from constructions.residual import CODE_GAP, Head, Score, Space, code_width, table_bytes
from witness.errors import ParameterError
from witness.ir import Embedding, Layer, Meta, Network
from witness.mixers import BlockSparseAttention
from witness.tasks import TwoSum
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


def residual_space(task: TwoSum) -> Space:
    """two_sum's directions, at their own indices, then the one-hot val1h[u] = [x_i = u]."""
    return two_sum.residual_space(task).extend(("val1h", task.M))


def memory_bytes(n: int, M: int, t: int, block: int, k: int, causal: bool = False) -> int:
    """two_sum's tables M directions wider, and the M x M query and key maps."""
    task = two_sum.supported_task(n, M, t, causal)
    return two_sum.memory_bytes(n, M, t, causal) + table_bytes(task.M + task.n + 2 + 2 * task.M,
                                                               residual_space(task).width)


def build(n: int, M: int, t: int, block: int, k: int, causal: bool = False) -> Network:
    """The rich-summary network: two_sum's network with one-hot keys and queries under (block, k)-sparse
    attention; its readout at position i is y_i (output vocabulary {0, 1})."""
    block, k = check_int("block", block, 1), check_int("k", k, 1)
    if check_int("M", M, 2) > MAX_VALUES:
        raise ParameterError(f"two_sum_sparse has one residual direction per value: M <= {MAX_VALUES}, got {M}")
    task = two_sum.supported_task(n, M, t, causal)
    residual = residual_space(task)
    val1h = residual["val1h"]
    W_E, W_pos = two_sum.embedding_tables(task, residual)
    W_E[np.arange(task.M), val1h.indices] = 1.0

    head = Head(qk=Space.of(("value", task.M)), ov=two_sum.value_space(task))
    # Step 1: q_i = lambda e_{a_i} and k_j = e_{x_j} score lambda on matches, 0 elsewhere; lambda = CODE_GAP x
    # two_sum's scale keeps the off-match mass <= eps. Step 2: k_j is one-hot, so a block's mean key counts its
    # values and a block score is positive iff the block holds a partner. Head direction value[u] pairs the key
    # direction val1h[u] with the query direction of its partner, val1h[(t - u) mod M].
    lam = CODE_GAP * two_sum.attention_scale(task.n, code_width(task.n), code_width(task.M))
    scores = [Score(val1h.at((task.t - u) % task.M), val1h.at(u), head.qk["value"].at(u), lam) for u in range(task.M)]
    arrays = head.dense(residual, scores, two_sum.value_routes(residual, head))  # two_sum's values (step 3)
    attention = BlockSparseAttention.zeros_bias(**arrays, causal=task.causal, block=block, k=k)
    meta = Meta(task=task.name, params=task.params(), construction=NAME, claimed_format="fp64",
                notes={**two_sum.notes(task), "lambda": lam, "block": block, "k": k,
                       "B_log2_n": block * math.log2(task.n)})
    return Network(Embedding(W_E, W_pos), (Layer(attention, two_sum.verdict_mlp(task, residual)),),
                   two_sum.verdict_readout(residual), residual.basis(), meta)


build.memory_bytes = memory_bytes
