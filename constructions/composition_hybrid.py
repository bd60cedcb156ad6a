"""Hybrid linear + full attention for L-sequential function composition (docs/conventions.md §4.2), one head per layer.

Both networks are the (L+1)-layer composition construction (`constructions.composition`) with its first layers'
softmax attention replaced by `linear` attention (S_t = S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, identity feature
map, no normaliser); the embedding, the full-attention layers, their scale argument, the sign-cleaning MLPs and the
readout are the composition construction's own, reused through its description.

* `composition_hybrid`: one linear layer, then L full-attention layers. The linear layer copies the seed z_0 from
  its position to the read position; the full layers do the L lookups exactly as in the (L+1)-layer network.
  L full plus one linear succeed, where L-1 full plus any number of linear layers fail (Theorem 1.1): the
  hierarchy is tight up to that single linear layer.
* `composition_hybrid_small_table`: two linear layers, then L-1 full layers. The first copies z_0 as above and
  its MLP turns the code of z_0 into a one-hot selector; the second holds the whole first table z_1 in its state
  (keys are one-hot table indices) and reads row z_0 of it, which is i_1 = z_1(z_0). This escapes Theorem 1.1
  only because its state grows with the table: d_k = m, d_v = b_V (the code width of N_{L-1}), so the layer
  carries H * (d_k * d_v + d_k) = m * (b_V + 1) numbers, m * (b_V + 1) * p state bits, and d >= d_k = m
  gives Hdp >= m * p. The theorem's bound H*d*p <= n^(2^(-4L-2)) excludes such budgets once m is large; where m is small, this
  network shows that L-1 full layers plus linear ones do solve the task.

The linear layers are exact, with no scale argument needed: every key is a 0/1 vector read from the position
table, zero at every position but the ones the layer copies from, and those positions' keys are distinct unit
vectors. So each state entry is a sum with at most one nonzero term, a product 1 * (±1), and the output
S^T q = sum_i q_i S[i, :] with a one-hot q picks one row: every rounded operation is exact in every format that
holds ±1, and the copied code arrives as exact ±1.

Extra residual directions (after the composition construction's, see its module docstring):

    sel0[a]   small-table only: 1 at the read position when z_0 = a, else 0 (written by layer 0's MLP)
    tab1[a]   small-table only: 1 on the position of table entry z_1(a), else 0 (position table)

Head directions of the linear layers: the seed copy's key and query meet in `seed`, the lookup's in `entry[a]`;
both move a code in `code[k]`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from constructions.composition import CodeRule, Description, describe, materialise
from constructions.composition import memory_bytes as composition_memory_bytes
from constructions.residual import Head, Route, Score, Space, pm1_codes, run, write
from witness.ir import MLP, Embedding, Layer, Meta, Network, Readout
from witness.mixers import LinearAttention

NAME = "composition_hybrid"
SMALL_TABLE = "composition_hybrid_small_table"


def _small_table_directions(m: int) -> tuple[tuple[str, int], ...]:
    """The residual directions the small-table network adds to the composition's: sel0 and tab1."""
    return ("sel0", m), ("tab1", m)


def _linear(residual: Space, head: Head, score: Score, route: Route) -> LinearAttention:
    """Linear attention with the identity feature map, no normaliser and zero biases, scoring `score` and moving
    `route` (H = 1, d_k and d_v the head's own widths)."""
    arrays = head.dense(residual, [score], [route])
    return LinearAttention(**arrays, b_Q=np.zeros((1, head.d_k)), b_K=np.zeros((1, head.d_k)),
                           b_V=np.zeros((1, head.d_v)), b_O=np.zeros(residual.width))


def _copy_seed(description: Description, target: str) -> LinearAttention:
    """Linear attention that writes the ±1 code of z_0 into group `target` at the read position.

    One key direction (d_k = 1) carries the seed's type indicator as the key and the constant 1 as the query;
    the value (d_v = b_V) is the token's code. At the last position S = sum_j k_j v_j^T with k_j = type:z0(j),
    which is 1 at the seed position and 0 elsewhere: S = code(z_0)^T (1 x b_V), and o = S^T 1 = code(z_0),
    exactly (see the module docstring). Causality costs nothing: the seed comes before the read position in the
    `paper` layout. State: 1 * b_V + 1 numbers.
    """
    residual = description.residual
    head = Head(qk=Space.of("seed"), ov=Space.of(("code", residual["val"].width)), shared=False)
    return _linear(residual, head, Score(residual["one"], residual["type:z0"], head.qk["seed"], 1.0),
                   Route(residual["val"], head.ov["code"], residual[target]))


def _hybrid_layers(description: Description) -> tuple[Layer, ...]:
    """The composition's layers with layer 0 (the seed fetch) done by linear attention.

    The copy writes into `fetch` and keeps the composition's layer-0 MLP, which turns the fetched vector into
    exact ±1 in R0 for FETCH_THRESHOLD <= |fetch| <= 1; the copy is exactly ±1, so it applies (and clears `fetch`
    for the full layers, whose attention writes it again)."""
    layers = description.layers()
    return (Layer(_copy_seed(description, "fetch"), layers[0].mlp),) + layers[1:]


def _selector_mlp(description: Description, m: int) -> MLP:
    """sel0[a] = relu(<code(a), R0> - (b_V - 1)): 1 when R0 = code(a), else 0.

    <code(a), code(z_0)> = b_V - 2 hamming(a, z_0), so the pre-activation is 1 on the match and at most -1
    elsewhere. Every term is an integer of magnitude <= b_V, exact in any format that holds b_V."""
    residual = description.residual
    slot = residual["R0"]
    hidden = Space.of(("match", m))  # match[a]: R0 holds code(a)
    W_in = np.zeros((residual.width, hidden.width))  # [d_model, d_mlp]
    W_in[np.ix_(slot.indices, hidden["match"].indices)] = pm1_codes(np.arange(m), slot.width).T
    b_in = np.full(hidden.width, -(slot.width - 1.0))
    W_out = write(np.zeros((hidden.width, residual.width)), [run(hidden["match"], residual["sel0"], 1.0)])
    return MLP(W_in, b_in, W_out, np.zeros(residual.width))


def _table_lookup(description: Description, m: int) -> LinearAttention:
    """Linear attention whose state holds the whole table z_1 and whose query selects row z_0 of it.

    Keys: head direction entry[a] is tab1[a], 1 on the position of table entry a only; values: the token's code.
    At the read position S = sum_a e_a code(z_1(a))^T (one nonzero term per row) and the query is sel0 = e_{z_0},
    so o = S^T e_{z_0} = code(z_1(z_0)) = code(i_1), exactly; it is written straight into R1, the slot the
    composition's layer 2 reads. The state is d_k x d_v = m x b_V (plus the d_k normaliser the budget counts):
    it grows with m."""
    residual = description.residual
    head = Head(qk=Space.of(("entry", m)), ov=Space.of(("code", residual["val"].width)), shared=False)
    return _linear(residual, head, Score(residual["sel0"], residual["tab1"], head.qk["entry"], 1.0),
                   Route(residual["val"], head.ov["code"], residual["R1"]))


def _small_table(L: int, m: int, n) -> tuple[Description, tuple[Layer, ...]]:
    """Layers 0 and 1 linear (copy z_0 into R0 and compute sel0; look up z_1(z_0) into R1), then the composition's
    full-attention layers 2..L."""
    description = describe(L, m, tuple(n), extra=_small_table_directions(m))
    positions = tuple(dataclasses.replace(c, rules=c.rules + (CodeRule("tab1", "address_onehot", m),))
                      if c.name == "z1" else c for c in description.positions)
    description = dataclasses.replace(description, positions=positions)
    linear = (Layer(_copy_seed(description, "R0"), _selector_mlp(description, m)),
              Layer(_table_lookup(description, m)))
    return description, linear + description.layers()[2:]


def _network(description: Description, layers: tuple[Layer, ...], name: str, notes: dict) -> Network:
    meta = Meta(task=description.task.name, params=description.task.params(), construction=name,
                claimed_format="fp64", notes={"beta": description.beta, "C": description.C, **notes})
    W_E, W_pos, W_U = materialise(description)
    V = description.task.value_vocab
    return Network(Embedding(W_E, W_pos), layers, Readout(W_U, np.zeros(V), read="last"), description.basis(),
                   meta)


def build(L: int, m: int, n=()) -> Network:
    """One linear layer (the seed copy) and L full-attention layers; readout i_L at the last position."""
    description = describe(L, m, tuple(n))
    return _network(description, _hybrid_layers(description), NAME,
                    {"linear_layers": [0], "full_layers": list(range(1, L + 1))})


def _memory_bytes(L: int, m: int, n=()) -> int:
    """The composition network's tables plus the small-table layers' m-wide arrays (an upper bound for both)."""
    d_model = describe(L, m, tuple(n), extra=_small_table_directions(m)).d_model
    return composition_memory_bytes(L, m, n) + 2 * 8 * 4 * d_model * m


build.memory_bytes = _memory_bytes


def build_small_table(L: int, m: int, n=()) -> Network:
    """Two linear layers (seed copy, then a lookup in z_1 held in the state) and L-1 full-attention layers."""
    description, layers = _small_table(L, m, n)
    return _network(description, layers, SMALL_TABLE,
                    {"linear_layers": [0, 1], "full_layers": list(range(2, L + 1)),
                     "state_numbers": "m * (b_V + 1) in layer 1 (H = 1, d_k = m, d_v = b_V)"})


build_small_table.memory_bytes = _memory_bytes
