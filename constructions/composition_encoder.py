"""ceil(log2 L) + 2 layers of bidirectional attention for L-sequential composition (conventions §1.1), after CPW
Cor. 1.3: where a decoder needs L + 1 layers (constructions/composition.py), an encoder composes by pointer doubling.

Paper layout, answer read at the last position (the query token w). Per table l and the query, the hop the chain
takes through table l is the function f_l of a low index x (i_l = f_l(i_{l-1})):

    f_1(x) = z_1(x),   f_l(x) = z_l(w_{l-1} N_{l-2} + x)  (l >= 2).

An entry (l, a) of table l is *selected* when the query can reach it: every entry of z_1, and for l >= 2 those with
a div N_{l-2} = w_{l-1}. Its reach after s doublings is where min(2^s, L - l + 1) hops starting with it land:

    reach_0(l, a) = z_l(a);   reach_{s+1}(l, a) = reach_s(l + 2^s, w_{l+2^s-1} N_{l+2^s-2} + reach_s(l, a))
                                                  if l + 2^s <= L, else reach_s(l, a)          (clamped at table L)

(the first case is 2^s hops to a value that indexes table l + 2^s, then min(2^s, L - l - 2^s + 1) more: min(2^{s+1},
L - l + 1) in all; in the second, reach_s(l, a) already made all L - l + 1 hops). After S = ceil(log2 L) doublings
the entry (1, z_0) holds reach_S(1, z_0) = f_L(...f_1(z_0)...) = i_L, since 2^S >= L.

Layers. Layer 0: two heads copy the seed's code and the query's digit codes to every position, and the MLP cleans
them to exact ±1 codes. Layer 1 + s (s < S): every position of table l with l + 2^s <= L looks up the entry of table
l + 2^s at address (w_{l+2^s-1}, its own reach_s) and its MLP writes that entry's reach_s as exact ±1 into the fresh
slot reach{s+1}; every other position (a clamped table, the seed, the query) copies reach_s there instead. Layer
S + 1: the query position looks up the entry (1, z_0) and cleans its reach_S into `answer`, which the readout
decodes. So a selected entry holds the exact code of its reach after every doubling (induction on s, the lookup
argument below); entries no query selects hold values in [-1, 1] and lose every lookup that matters.

The lookup argument (`table_weight`). A lookup aiming at table t (aim = code(t)) with an exact pointer code x scores
key j as

    C_T <aim, table(j)> + beta <x, low(j)> + beta <digits, high(j)>,

where high(j) holds the code of the high part of j's address in table t's digit block (the block of w_{t-1}), so
that the query's full digit vector meets only the digit of j's own table. The target (t, (w_{t-1}, x)) scores
C_T b_T + beta b_V + beta b_{t-1}. A key of table t with another address differs from it in a low or a high bit:
CODE_GAP beta lower. A key of another table (or the seed or the query, table id 0) loses CODE_GAP C_T on the table
code and gains at most beta b_hi on its digit block: at least CODE_GAP beta lower once C_T >= beta (CODE_GAP +
b_hi) / 2. So every key other than the target scores at least CODE_GAP beta lower, beta = attention_scale(n) puts
at most 1/4 of the mass off the target (constructions/composition.py), and each fetched coordinate keeps the
target's sign with magnitude in [1/2, 1]: what the cleaning MLP is built for. Values are always in [-1, 1].

Residual directions (b_V = code width of V = N_{L-1}, b_T = code width of L + 1, b_D = sum of the code widths b_l
of n_l, each digit l in its own block of b_l directions):

    one                   1 at every position
    type:z0, type:w       1 at the seed's and at the query's position
    table[k]              ±1 code of the position's table id: l on table z_l, 0 on the seed and the query
    low[k]                ±1 code of a table entry's low address: a for z_1, a mod N_{l-2} for z_l
    high[k]               on table z_l (l >= 2): ±1 code of a div N_{l-2} in digit block l - 1; 0 elsewhere
    val[k], query[k]      ±1 code of a value token's id; the query token's digit codes (w_l in block l)
    aim{s}[k]             ±1 code of l + 2^s on the positions of table z_l that advance in doubling s; 0 elsewhere
    keep{s}               1 on every other position (clamped tables, the seed, the query)
    aim:read[k]           ±1 code of table id 1 on the query position
    fetch:*, fetch{s}     each layer's attention output (fresh slots: no MLP has to clear one)
    seed[k], digits[k]    z_0's code and the query's digit codes, at every position after layer 0
    reach{s}[k]           reach_s (reach_0 is `val`); answer[k]: i_L's code at the read position

Budget: S + 2 layers; H = 2 (layer 0), 1 elsewhere; d_head = b_T + b_V + b_D; d_model = 3 + 2 b_T + 6 b_V + 4 b_D +
S (b_T + 2 b_V + 1): O(1) heads, O(log n) head width, O(log L log n) residual width.
"""

from __future__ import annotations

import numpy as np

from constructions.composition import OFF_TARGET_MASS_BOUND, SIGN_GAIN, attention_scale, block_weight
from constructions.residual import (CODE_GAP, Group, Head, Route, Score, Space, code_width, pm1_codes, run, table_bytes,
                                    write)
from witness.ir import MLP, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention
from witness.storage import narrowest_dtype, seal
from witness.tasks import Composition

NAME = "composition_encoder"

#: The gate weight that silences the cleaning units of a position that keeps its reach: a unit's input is
#: +-SIGN_GAIN F or +-SIGN_GAIN F - 1, at most SIGN_GAIN = 2 in exact arithmetic (|F| <= 1), so subtracting twice
#: that leaves it negative -- also where rounding lifts a fetched |F| above 1, as long as it stays below 2.
KEEP_WEIGHT = int(2 * SIGN_GAIN)


def doubling_count(L: int) -> int:
    """S = ceil(log2 L): the doublings after which 2^S >= L hops are covered."""
    return (L - 1).bit_length()


def table_weight(beta: int, b_hi: int) -> int:
    """C_T, the weight of the table code: the least integer with CODE_GAP C_T >= CODE_GAP beta + beta b_hi.

    A key of another table loses CODE_GAP C_T on the table code (distinct codes) and gains at most beta b_hi on
    its own digit block (the target's table may have none: z_1), so it still scores CODE_GAP beta below the
    target, the gap every other non-target key has (module docstring)."""
    return -(-beta * (CODE_GAP + b_hi) // CODE_GAP)


def _sizes(task: Composition) -> dict[str, int]:
    b_w = [code_width(n_l) for n_l in task.n]  # b_w[l-1] = code width of w_l
    return {"V": max(1, code_width(task.value_vocab)), "T": code_width(task.L + 1), "D": sum(b_w),
            "hi": max(b_w, default=0), "S": doubling_count(task.L)}


def _residual(task: Composition) -> Space:
    """The residual directions of the module docstring, in this order (the basis the network files store)."""
    b = _sizes(task)
    doublings = [entry for s in range(b["S"]) for entry in
                 ((f"aim{s}", b["T"]), f"keep{s}", (f"fetch{s}", b["V"]), (f"reach{s + 1}", b["V"]))]
    return Space.of("one", "type:z0", "type:w", ("table", b["T"]), ("low", b["V"]), ("high", b["D"]),
                    ("val", b["V"]), ("query", b["D"]), ("fetch:seed", b["V"]), ("fetch:digits", b["D"]),
                    ("seed", b["V"]), ("digits", b["D"]), *doublings,
                    ("aim:read", b["T"]), ("fetch:read", b["V"]), ("answer", b["V"]))


def _digit_blocks(task: Composition) -> list[tuple[int, int]]:
    """(offset, width) of digit w_l's block, for l = 1 .. L-1 (entry l - 1)."""
    widths = [code_width(n_l) for n_l in task.n]
    return [(sum(widths[:l]), width) for l, width in enumerate(widths)]


def _sealed(array: np.ndarray) -> np.ndarray:
    """`array` in the narrowest storage dtype that holds it exactly (witness.storage), read-only."""
    return seal(array.astype(narrowest_dtype(array)))


def _embedding(task: Composition, residual: Space) -> Embedding:
    b = _sizes(task)
    W_pos = np.zeros((task.prompt_length, residual.width))  # [n_ctx, d_model]
    W_E = np.zeros((task.vocab_size, residual.width))  # [d_vocab, d_model]

    def put(rows, group: Group, values, table=W_pos) -> None:
        table[np.ix_(np.atleast_1d(rows), group.indices)] = pm1_codes(values, group.width)

    W_pos[:, residual["one"].index] = 1.0
    seed, query = task.segment("z0").start, task.segment("w").start
    W_pos[seed, residual["type:z0"].index] = W_pos[query, residual["type:w"].index] = 1.0
    put([seed, query], residual["table"], [0, 0])
    put(query, residual["aim:read"], [1])
    sizes, blocks = task.domain_sizes, _digit_blocks(task)
    for l in range(1, task.L + 1):
        segment = task.segment(f"z{l}")
        rows, address = np.arange(segment.start, segment.stop), np.arange(segment.length)
        put(rows, residual["table"], np.full(segment.length, l))
        put(rows, residual["low"], address if l == 1 else address % sizes[l - 2])
        if l >= 2 and blocks[l - 2][1]:
            offset, width = blocks[l - 2]
            put(rows, Group("high", residual["high"].start + offset, width), address // sizes[l - 2])
        for s in range(b["S"]):
            if l + 2 ** s <= task.L:
                put(rows, residual[f"aim{s}"], np.full(segment.length, l + 2 ** s))
    for s in range(b["S"]):  # every position without an aim in doubling s keeps its reach
        W_pos[~W_pos[:, residual[f"aim{s}"].indices].any(axis=1), residual[f"keep{s}"].index] = 1.0

    V = task.value_vocab
    put(np.arange(V), residual["val"], np.arange(V), W_E)
    digits = task.decode_query(np.arange(task.query_count))
    for (offset, width), digit in zip(blocks, digits):
        if width:
            put(np.arange(V, task.vocab_size), Group("query", residual["query"].start + offset, width), digit, W_E)
    return Embedding(_sealed(W_E), _sealed(W_pos))


def _attention(heads: list[dict[str, np.ndarray]]) -> Attention:
    """Bidirectional attention from Head.dense arrays (one head each, one shared d_head), zero biases."""
    stacked = {name: np.concatenate([head[name] for head in heads]) for name in ("W_Q", "W_K", "W_V", "W_O")}
    return Attention.zeros_bias(**{name: _sealed(array) for name, array in stacked.items()}, causal=False)


def _cleaning_mlp(residual: Space, cleans: list[tuple[Group, Group]],
                  keep: tuple[Group, Group, Group] | None = None) -> MLP:
    """For each (fetch, target) of `cleans`: target = sign(fetch) as exact ±1, for 1/2 <= |fetch| <= 1; with
    `keep` = (gate, source, target), target = source instead where the 0/1 gate is 1.

    Four ReLUs per bit on F = fetch[k], G = SIGN_GAIN = 2, c = the gate (0 without one): A = relu(G F - 4c),
    B = relu(G F - 1 - 4c), C = relu(-G F - 4c), D = relu(-G F - 1 - 4c), summed A - B - C + D in that order
    (the units of a block precede the next block's). At c = 0 this is composition's sign MLP: for G F in [1, 2]
    (and up to 4, should rounding lift |F| above 1) A = G F, B = G F - 1 exactly (Sterbenz), A - B = 1 exactly,
    C = D = 0; symmetrically -1; for |G F| < 1 the output is G F, in [-1, 1]. At c = 1 every input is below 0
    (KEEP_WEIGHT) and the units vanish. Two more per kept bit copy the source O in [-1, 1]: relu(O + c - 1) -
    relu(-O + c - 1) is O at c = 1 and 0 at c = 0, on small integers where O is a ±1 code: exact. Every target
    slot is fresh (0 before), so it receives exactly ±1 (or, copied, whatever the source holds)."""
    hidden = Space.of(*((f"{unit}:{fetch.name}", fetch.width) for fetch, _ in cleans for unit in "ABCD"),
                      *(((f"{unit}:{keep[1].name}", keep[1].width) for unit in ("copy+", "copy-")) if keep else ()))
    W_in = np.zeros((residual.width, hidden.width))  # [d_model, d_mlp]
    b_in = np.zeros(hidden.width)
    W_out = np.zeros((hidden.width, residual.width))  # [d_mlp, d_model]
    for fetch, target in cleans:
        A, B, C, D = (hidden[f"{unit}:{fetch.name}"] for unit in "ABCD")
        write(W_in, (run(fetch, A, SIGN_GAIN), run(fetch, B, SIGN_GAIN), run(fetch, C, -SIGN_GAIN),
                     run(fetch, D, -SIGN_GAIN)))
        b_in[B.indices] = b_in[D.indices] = -1.0
        write(W_out, (run(A, target, 1.0), run(B, target, -1.0), run(C, target, -1.0), run(D, target, 1.0)))
        if keep:
            W_in[keep[0].index, np.concatenate([A.indices, B.indices, C.indices, D.indices])] = -KEEP_WEIGHT
    if keep:
        gate, source, target = keep
        plus, minus = hidden[f"copy+:{source.name}"], hidden[f"copy-:{source.name}"]
        write(W_in, (run(source, plus, 1.0), run(source, minus, -1.0)))
        W_in[gate.index, np.concatenate([plus.indices, minus.indices])] = 1.0
        b_in[plus.indices] = b_in[minus.indices] = -1.0
        write(W_out, (run(plus, target, 1.0), run(minus, target, -1.0)))
    return MLP(_sealed(W_in), _sealed(b_in), _sealed(W_out), _sealed(np.zeros(residual.width)))


def memory_bytes(L: int, m: int, n=()) -> int:
    """An upper bound on what `build` allocates: the three tables (float64 while written, then narrowed) and, per
    layer, four d_model x d_head arrays for each of at most two heads and two d_model x d_mlp ones (d_mlp is
    4 b_V + 4 b_D in layer 0 and at most 6 b_V after it, below 6 d_model)."""
    task = Composition(L, m, tuple(n), "paper")
    width, b = _residual(task).width, _sizes(task)
    d_head = b["T"] + b["V"] + b["D"]
    per_layer = 8 * (2 * 4 * width * d_head + 2 * 6 * width * width)
    return table_bytes(task.vocab_size + task.prompt_length + task.value_vocab, width) + (b["S"] + 2) * per_layer


def build(L: int, m: int, n=()) -> Network:
    """ceil(log2 L) + 2 layers of bidirectional attention (module docstring); readout i_L at the last position."""
    task = Composition(L, m, tuple(n), "paper")
    residual, b = _residual(task), _sizes(task)
    beta = attention_scale(task.prompt_length)
    C_0, C_T = block_weight(beta), table_weight(beta, b["hi"])
    layers = []

    # Layer 0: head 1 scores key j by C_0 type:z0(j), head 2 by C_0 type:w(j): the seed's (the query's) position
    # scores C_0 = CODE_GAP beta, every other key 0, so at most 1/4 of the mass is off it (attention_scale). The
    # values: head 1 carries `val` (the seed's code there, ±1 codes or 0 elsewhere), head 2 `query` (0 off the
    # query token); the MLP cleans both into exact codes at every position.
    spread = Head(qk=Space.of("indicator"), ov=Space.of(("seed", b["V"]), ("digits", b["D"])))
    heads = [spread.dense(residual, [Score(residual["one"], residual[f"type:{kind}"], spread.qk["indicator"], C_0)],
                          [Route(residual[source], spread.ov[via], residual[f"fetch:{via}"])])
             for kind, source, via in (("z0", "val", "seed"), ("w", "query", "digits"))]
    layers.append(Layer(_attention(heads), _cleaning_mlp(
        residual, [(residual["fetch:seed"], residual["seed"]), (residual["fetch:digits"], residual["digits"])])))

    # Layers 1 .. S + 1: one lookup head each (the lookup argument of the module docstring): C_T on the table code,
    # beta on the low address against the pointer, beta on the digit blocks against `high`.
    lookup = Head(qk=Space.of(("table", b["T"]), ("low", b["V"]), ("high", b["D"])), ov=Space.of(("value", b["V"])))

    def lookup_attention(aim: str, pointer: str, value: str, fetch: str) -> Attention:
        scores = [Score(residual[aim], residual["table"], lookup.qk["table"], C_T),
                  Score(residual[pointer], residual["low"], lookup.qk["low"], beta),
                  Score(residual["digits"], residual["high"], lookup.qk["high"], beta)]
        return _attention([lookup.dense(residual, scores, [Route(residual[value], lookup.ov["value"],
                                                                 residual[fetch])])])

    # Doubling s: a selected entry (l, a) with l + 2^s <= L scores key j by
    #   C_T <code(l + 2^s), table(j)> + beta <code(reach_s(l, a)), low(j)> + beta <digits, high(j)>
    # (its pointer is reach_s: `val` for s = 0). Its target, the entry of table l + 2^s at address
    # (w_{l+2^s-1}, reach_s(l, a)), is selected, so by induction on s it holds reach_s exactly, and every other key
    # scores at least CODE_GAP beta lower (the lookup argument): the fetch has the sign of the code of
    # reach_s(l + 2^s, ...) = reach_{s+1}(l, a), which the MLP writes into reach{s+1}. A keeping position (keep{s}
    # = 1: l + 2^s > L, whose reach already made every hop left, or the seed or the query) copies its reach_s.
    for s in range(b["S"]):
        reach = "val" if s == 0 else f"reach{s}"
        attention = lookup_attention(f"aim{s}", reach, reach, f"fetch{s}")
        layers.append(Layer(attention, _cleaning_mlp(residual, [(residual[f"fetch{s}"], residual[f"reach{s + 1}"])],
                                                     (residual[f"keep{s}"], residual[reach],
                                                      residual[f"reach{s + 1}"]))))

    # The read: the query position scores key j by C_T <code(1), table(j)> + beta <code(z_0), low(j)> + beta
    # <digits, high(j)>; its target, the entry (1, z_0), holds reach_S(1, z_0) = i_L (2^S >= L), and every other
    # key scores at least CODE_GAP beta lower (the lookup argument, with no digit block on the target's side).
    final = "val" if b["S"] == 0 else f"reach{b['S']}"
    layers.append(Layer(lookup_attention("aim:read", "seed", final, "fetch:read"),
                        _cleaning_mlp(residual, [(residual["fetch:read"], residual["answer"])])))

    # Readout: logit_v = <code(v), answer> = b_V - 2 hamming(v, i_L): the answer wins by CODE_GAP.
    W_U = np.zeros((residual.width, task.value_vocab))  # [d_model, d_vocab_out]
    W_U[residual["answer"].indices, :] = pm1_codes(np.arange(task.value_vocab), b["V"]).T
    meta = Meta(task=task.name, params=task.params(), construction=NAME, claimed_format="fp64",
                notes={"beta": beta, "C": C_0, "table_weight": C_T, "keep_weight": KEEP_WEIGHT,
                       "doublings": b["S"], "off_target_mass_bound": float(OFF_TARGET_MASS_BOUND)})
    return Network(_embedding(task, residual), tuple(layers),
                   Readout(_sealed(W_U), _sealed(np.zeros(task.value_vocab)), read="last"), residual.basis(), meta)


build.memory_bytes = memory_bytes
