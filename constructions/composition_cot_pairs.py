"""One layer of causal softmax attention (two heads) and an MLP that solve L-sequential function composition with a
chain of thought whose tokens carry pairs (CPW, Cor. 1.4, the one-layer form): prompted with the composition prompt
(`paper` layout, docs/conventions.md §1.1), the network generates a_1, ..., a_L, i_L, one token per step, where
a_l is the address of table z_l the chain reads (a_1 = z_0, a_l = w_{l-1} N_{l-2} + i_{l-1}: the pair
(w_{l-1}, i_{l-1})) and i_L, the last, is the answer. The task it claims is `composition_cot_pairs`
(witness.tasks.composition_cot_pairs: the answer convention, and why the pair tokens need no new ids).

What one layer can do, and why the tokens must carry w. With one layer, the query of the only lookup a step makes
is linear in the last position's residual before the layer: its token's embedding and its position, nothing any
attention has fetched. So the last token must already hold the whole address of the entry the step reads. For z_l
(l >= 2) that address is the pair (w_{l-1}, i_{l-1}): a token naming (l - 1, i_{l-1}) would leave w_{l-1} in the
query token, where only an attention could fetch it, and that fetch would land after the lookup that needs it (it
takes a second layer, as in `composition_cot`). The step index needs no room in the token: the position holds it.
Two consequences: each generated token names (w_l, i_l), which takes the step's w_l from the query token, fetched
by a second head in parallel with the lookup (it is not needed until the MLP and the readout); and the first step
cannot make a hop at all, since the query token does not hold z_0, so it copies the seed, z_0 = a_1, and the chain
takes L + 1 generated tokens, one more than `composition_cot`'s.

Positions: the prompt has n = prompt_length tokens, the query w last (position n - 1); step s (1 <= s <= L + 1)
runs the prompt and the s - 1 tokens generated before it, so its last position n - 2 + s holds w (s = 1) or a_l
with l = s - 1 (s >= 2). The context is n + L positions.

* Step 1 (the query position): head `lookup` attends to the seed and fetches code(z_0); the readout names a_1 = z_0.
* Step l + 1 (token a_l, 1 <= l <= L): head `lookup` fetches table z_l's entry at address a_l, i_l; head `query`
  fetches the query token's digit codes; the MLP writes code(i_l) exactly and, at this step only, the bits of w_l
  (the gate shut{l} is 0 at this position alone); the readout names the number whose digits are i_l's with digit l
  replaced by w_l, which is a_{l+1} = w_l N_{l-1} + i_l (l < L), or i_L itself (l = L: no w_L, no gate).

Mixed-radix codes (why every map above is linear): a value v in [V] (V = N_{L-1}) has the digits v = c_0 +
m (c_1 + n_1 (c_2 + ...)), c_0 in [m], c_d in [n_d], and its code is the concatenation of the ±1 codes of its digits
(widths b_0 = max(1, code_width(m)) and b_d = code_width(n_d); B = sum of them). An address and the value it
names share this code, so a lookup compares codes; i_l < N_{l-1} has digits l .. L-1 equal to 0, and a_{l+1} differs
from it only in digit l, which is w_l: code(a_{l+1}) = code(i_l) + 2 bits(w_l) on digit l's directions (-1 + 2 bit
is the ±1 code bit). Distinct values differ in some digit, so in some code bit.

Residual directions (b_T = code width of L):

    type:z0, type:w, type:gen   1 on the seed, on the query position, on the generated positions n .. n+L-1
    table                       1 on every table position
    table_code[k]               ±1 code of t - 1 on table z_t's positions
    step[k]                     ±1 code of l - 1 at the position holding a_l (n - 1 + l), 0 elsewhere
    shut{d}                     1 at every position but n - 1 + d, the one where the step writes w_d (n_d >= 2)
    idx[k]                      mixed-radix code of a table entry's address
    val[k]                      mixed-radix code of a value token (every table, seed and generated token)
    w{d}[k]                     ±1 code of w_d, on the query token only (n_d >= 2)
    fetch[k], fetch_w{d}[k]     the heads' outputs (nothing reads them but the MLP)
    Rnext[k], Rw{d}[k]          written by the MLP: code(i_l) (code(z_0) at step 1) exactly; the bits of w_d
                                exactly, at the position holding a_d only, 0 elsewhere

Head directions (one head space for both heads, so they have the same d_head): `lookup`'s queries meet keys in
`seed`, `table`, `step[k]` and `address[k]`, its values travel in `value[k]`; `query`'s meet in `query`, its
values travel in `w{d}[k]`.

Budget: 1 layer, H = 2, d_head = max(3 + b_T + B, B + sum_d b_d), d_mlp = 4B + 2 sum_d b_d, d_model = 4 + 2b_T + g
+ 4B + 3 sum_d b_d (g <= sum_d b_d: the digits with n_d >= 2), all O(log n): B <= 2 log2 N_{L-1} + 1 (each
n_d >= 2 has b_d <= 2 log2 n_d) and L <= n. Vocabulary: composition's, V + prod n_d ids in, V out (the pair tokens are value
ids, witness.tasks.composition_cot_pairs); context n + L.
"""

from __future__ import annotations

import numpy as np

from constructions.composition import OFF_TARGET_MASS_BOUND, attention_scale, block_weight
from constructions.composition_cot import THRESHOLD_GAIN, generating_tables_bytes, stored, threshold_mlp
from constructions.residual import Group, Head, Route, Score, Space, code_width, pm1_codes
from witness.ir import MLP, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention
from witness.tasks import CompositionCoTPairs

NAME = "composition_cot_pairs"


def supported_task(L: int, m: int, n=()) -> CompositionCoTPairs:
    """The task in the `paper` layout, the only one this network reads (the query token last)."""
    return CompositionCoTPairs(L, m, tuple(n), "paper")


def digit_widths(task: CompositionCoTPairs) -> list[int]:
    """b_0 .. b_{L-1}, the code width of each mixed-radix digit: max(1, code_width(m)) for digit 0 (so a code is
    never empty), code_width(n_d) for digit d (0 where n_d = 1: that digit is always 0)."""
    return [max(1, code_width(task.m)), *(code_width(n_d) for n_d in task.n)]


def coded_query_digits(task: CompositionCoTPairs) -> dict[int, int]:
    """b_d for each query digit w_d with a code (n_d >= 2): a digit with one value carries nothing."""
    return {d: b for d, b in enumerate(digit_widths(task)) if d and b}


def digit_offsets(task: CompositionCoTPairs) -> list[int]:
    """Where digit d's code starts inside a mixed-radix code."""
    return np.concatenate([[0], np.cumsum(digit_widths(task))]).astype(int).tolist()


def mixed_radix_codes(task: CompositionCoTPairs, values) -> np.ndarray:
    """[len(values), B]: each value's digit codes side by side (module docstring); digit d has place N_{d-1}."""
    values = np.asarray(values, dtype=np.int64)
    places, radices = (1, *task.domain_sizes[:-1]), (task.m, *task.n)
    return np.concatenate([pm1_codes(values // place % radix, width)
                           for place, radix, width in zip(places, radices, digit_widths(task))], axis=-1)


def residual_space(task: CompositionCoTPairs) -> Space:
    """The residual directions of the module docstring, in this order (the basis the network files store)."""
    B, b_T, digits = sum(digit_widths(task)), code_width(task.L), coded_query_digits(task)
    return Space.of("type:z0", "type:w", "type:gen", "table", ("table_code", b_T), ("step", b_T),
                    *(f"shut{d}" for d in digits), ("idx", B), ("val", B), *((f"w{d}", b) for d, b in digits.items()),
                    ("fetch", B), *((f"fetch_w{d}", b) for d, b in digits.items()), ("Rnext", B),
                    *((f"Rw{d}", b) for d, b in digits.items()))


def head_space(task: CompositionCoTPairs) -> Head:
    """The head directions of the module docstring, one space for both heads."""
    B, b_T, digits = sum(digit_widths(task)), code_width(task.L), coded_query_digits(task)
    return Head(qk=Space.of("seed", "query", "table", ("step", b_T), ("address", B)),
                ov=Space.of(("value", B), *((f"w{d}", b) for d, b in digits.items())))


def embedding_tables(task: CompositionCoTPairs, residual: Space) -> tuple[np.ndarray, np.ndarray]:
    """W_E [d_vocab, d_model]: value tokens their mixed-radix code in `val`, query tokens their digits' codes in
    `w{d}`; W_pos [n_ctx, d_model]: the segment indicators, table codes and addresses, step codes and gates."""
    V, sizes = task.value_vocab, task.domain_sizes
    W_E = np.zeros((task.vocab_size, residual.width))
    W_E[:V, residual["val"].indices] = mixed_radix_codes(task, np.arange(V))
    query_digits = task.decode_query(np.arange(task.query_count))
    for d in coded_query_digits(task):
        W_E[V:, residual[f"w{d}"].indices] = pm1_codes(query_digits[d - 1], residual[f"w{d}"].width)

    W_pos = np.zeros((task.context_length, residual.width))
    for t in range(1, task.L + 1):
        rows = slice(task.segment(f"z{t}").start, task.segment(f"z{t}").stop)
        W_pos[rows, residual["table"].index] = 1
        W_pos[rows, residual["table_code"].indices] = pm1_codes(np.full(sizes[t - 1], t - 1),
                                                                residual["table_code"].width)
        W_pos[rows, residual["idx"].indices] = mixed_radix_codes(task, np.arange(sizes[t - 1]))
    W_pos[task.segment("z0").start, residual["type:z0"].index] = 1
    query = task.segment("w").start
    W_pos[query, residual["type:w"].index] = 1
    W_pos[query + 1:, residual["type:gen"].index] = 1  # positions n .. n+L-1 hold a_1 .. a_L
    W_pos[query + 1:, residual["step"].indices] = pm1_codes(np.arange(task.L), residual["step"].width)
    for d in coded_query_digits(task):
        W_pos[:, residual[f"shut{d}"].index] = 1
        W_pos[query + d, residual[f"shut{d}"].index] = 0  # the position holding a_d, whose step writes a_{d+1}
    return stored(W_E), stored(W_pos)


def gated_bits_mlp(residual: Space, gates: list[tuple[Group, Group, Group]]) -> MLP:
    """For each (fetch, shut, slot): write into `slot` exactly bit(F) = [F > 0] where `shut` is 0 and
    |F| >= 1 - 2 epsilon, and exactly 0 wherever `shut` is 1 (any |F| <= 1), F a coordinate of `fetch`.

    Two ReLUs per coordinate, G = THRESHOLD_GAIN = 4: A = relu(G F - G shut - 1), B = relu(G F - G shut - 2), and
    slot += A - B. Where shut = 0 its term is an exact 0, so both inputs are computed exactly as the units A, B of
    `threshold_mlp` and inherit its argument: F >= 1/2 gives A - B = 1 exactly, F <= -1/2 gives inputs <= -1, so 0.
    Where shut = 1 the inputs are G F - G - 1 <= -1 (G F <= G up to the softmax's rounding): 0, whatever the head
    fetched. Every slot is fresh (0 before) and receives only its own two units, so it holds exactly 0 or 1.
    """
    hidden = Space.of(*((f"{unit}:{fetch.name}", fetch.width) for unit in "AB" for fetch, _, _ in gates))
    W_in = np.zeros((residual.width, hidden.width))  # [d_model, d_mlp]
    b_in = np.zeros(hidden.width)
    W_out = np.zeros((hidden.width, residual.width))  # [d_mlp, d_model]
    for fetch, shut, slot in gates:
        for unit, bias, sign in (("A", -1, 1), ("B", -2, -1)):
            cells = hidden[f"{unit}:{fetch.name}"].indices
            W_in[fetch.indices, cells] = THRESHOLD_GAIN
            W_in[shut.index, cells] = -THRESHOLD_GAIN
            b_in[cells] = bias
            W_out[cells, slot.indices] = sign
    return MLP(W_in, b_in, W_out, np.zeros(residual.width))


def side_by_side(*mlps: MLP) -> MLP:
    """One MLP whose hidden units are those of `mlps` in turn (each reads and writes as before), stored narrow."""
    return MLP(*(stored(np.concatenate([np.asarray(getattr(mlp, name), dtype=np.float64) for mlp in mlps], axis=axis))
                 for name, axis in (("W_in", 1), ("b_in", 0), ("W_out", 0))),
               stored(np.zeros(mlps[0].W_out.shape[1])))


def memory_bytes(L: int, m: int, n=()) -> int:
    """What `build` allocates (composition_cot's `generating_tables_bytes`)."""
    task = supported_task(L, m, n)
    return generating_tables_bytes(task, residual_space(task))


def build(L: int, m: int, n=()) -> Network:
    """The one-layer network; generating L + 1 tokens after a composition prompt gives a_1 .. a_L, i_L."""
    task = supported_task(L, m, n)
    # Every key a head does not fetch scores at least CODE_GAP beta below the one it does (arguments below), so
    # `attention_scale` of the longest input (n + L positions) keeps at most epsilon = 1/4 of the mass off the
    # target: each fetched coordinate keeps its target's sign with magnitude >= 1 - 2 epsilon, as the MLP needs.
    beta = attention_scale(task.context_length)
    C = block_weight(beta)
    residual, head, digits = residual_space(task), head_space(task), coded_query_digits(task)

    # Head `lookup`, key j. At the query position (step 1) the score is C type:z0(j): the seed scores C, every other
    # key 0 (the query token has no `val`, the position no `step`), a gap of C = CODE_GAP beta. At the position
    # holding a_l (step l + 1):
    #   C table(j) + beta <code(l-1), table_code(j)> + beta <code(a_l), idx(j)>
    # The target, z_l's entry at a_l, scores C + beta b_T + beta B. Another entry of z_l differs from a_l in some
    # address bit: CODE_GAP beta lower. An entry of another table loses CODE_GAP beta on the table code and can at
    # most tie on the address (both are full-width codes, which no key exceeds): weight beta on the table code is
    # enough, unlike composition_cot's layer 1, whose tables are scored on address parts of different widths. A
    # key outside the tables scores 0, at least C = CODE_GAP beta lower. Values: the value codes, into `fetch`.
    lookup = head.dense(residual,
                        [Score(residual["type:w"], residual["type:z0"], head.qk["seed"], C),
                         Score(residual["type:gen"], residual["table"], head.qk["table"], C),
                         Score(residual["step"], residual["table_code"], head.qk["step"], beta),
                         Score(residual["val"], residual["idx"], head.qk["address"], beta)],
                        [Route(residual["val"], head.ov["value"], residual["fetch"])])
    # Head `query`: every step position scores the query position C and every other key 0, a gap of C; the query
    # token's digit codes travel into fetch_w{d}, diluted ±1 codes at every generated position (the MLP uses
    # fetch_w{d} at one position only, and ignores it at the query position, which attends to itself).
    query = head.dense(residual,
                       [Score(residual["type:w"], residual["type:w"], head.qk["query"], C),
                        Score(residual["type:gen"], residual["type:w"], head.qk["query"], C)],
                       [Route(residual[f"w{d}"], head.ov[f"w{d}"], residual[f"fetch_w{d}"]) for d in digits])
    heads = {name: stored(np.concatenate([lookup[name], query[name]])) for name in ("W_Q", "W_K", "W_V", "W_O")}
    attention = Attention.zeros_bias(**heads, causal=True)

    # The MLP: Rnext = code(i_l) exactly at the step of token a_l (code(z_0) at step 1), from the lookup's fetch;
    # Rw{d} = bits(w_d) exactly at the step of token a_d (the only position where shut{d} = 0), 0 elsewhere.
    mlp = side_by_side(threshold_mlp(residual, [(residual["fetch"], residual["Rnext"])]),
                       gated_bits_mlp(residual, [(residual[f"fetch_w{d}"], residual[f"shut{d}"], residual[f"Rw{d}"])
                                                 for d in digits]))

    # Readout: logit_v = <code(v), Rnext> + 2 sum_d <code_d(v), Rw{d}>, code_d(v) digit d's part of v's code.
    # At the step of a_l that is <code(v), code(a_{l+1})> (module docstring: code(i_l) with digit l's -1 entries
    # raised by 2 bits(w_l)), or <code(v), code(i_L)> at l = L, or <code(v), code(z_0)> at step 1: B - 2 hamming,
    # so the named token wins by CODE_GAP. Every term is a small integer: exact in every format that holds B.
    codes = mixed_radix_codes(task, np.arange(task.value_vocab))
    offsets = digit_offsets(task)
    W_U = np.zeros((residual.width, task.value_vocab))  # [d_model, d_vocab_out]
    W_U[residual["Rnext"].indices] = codes.T
    for d in digits:
        W_U[residual[f"Rw{d}"].indices] = 2 * codes[:, offsets[d]:offsets[d + 1]].T
    meta = Meta(task=task.name, params=task.params(), construction=NAME, claimed_format="fp64",
                notes={"beta": beta, "C": C, "off_target_mass_bound": float(OFF_TARGET_MASS_BOUND),
                       "threshold_gain": float(THRESHOLD_GAIN)})
    return Network(Embedding(*embedding_tables(task, residual)), (Layer(attention, mlp),),
                   Readout(stored(W_U), stored(np.zeros(task.value_vocab)), read="last"), residual.basis(), meta)


build.memory_bytes = memory_bytes
