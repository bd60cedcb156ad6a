"""Two layers of causal softmax attention, one head each, that solve L-sequential function composition with a chain
of thought (CPW, Cor. 1.4): prompted with the composition prompt (`paper` layout, docs/conventions.md §1.1), the
network generates i_1, ..., i_L, one token per step, each the token id of its value; the last is the answer.
The task it claims is `composition_cot` (witness.tasks.composition_cot: its answer is the chain, and it says how
the network is run, by greedy generation, witness.generate). Depth is traded for generated tokens: the
(L+1)-layer `composition` network does the L hops inside one forward pass, this one does one hop per step.

Positions: the prompt has n = prompt_length tokens, the query w last (position n - 1); step l (1 <= l <= L) runs
the prompt and i_1 .. i_{l-1}, so its last position n - 2 + l holds w (l = 1) or i_{l-1} (l >= 2). The context is
n + L - 1 positions. Step l needs three things at its last position: which table to read (l, known from the
position), i_{l-1} (the seed z_0 at step 1, else the token itself) and w_{l-1} (a digit of the query token).

* Layer 0 brings what the token itself lacks: at the query position it fetches the seed's code (step 1's i_0),
  at a generated position the query token's digit codes; a threshold MLP turns each fetch into an exact ±1 code
  or an exact 0, so after it, val + R0 = code(i_{l-1}) at every step position and Rw{l} = code(w_l) at the
  generated ones.
* Layer 1 fetches table z_l's entry at address (w_{l-1}, i_{l-1}) (z_1: address i_0) and its MLP writes the
  entry's exact ±1 code in Rnext; the readout decodes it: logit_v = <code(v), Rnext> = b_V - 2 hamming(v, i_l).

The query digit a step needs depends on the step, and a query vector is linear in the residual, so it cannot
pick w_{l-1} out of the digits by the position. The keys pick instead: table z_t's entries carry their address's
high part in a group of their own, idx_w{t}, which meets only Rw{t-1} in the score, so every table is scored
against its own digit.

Residual directions (b_V = code width of V = N_{L-1}, b_l = code width of n_l, b_T = code width of L):

    type:z0, type:w, type:gen   1 on the seed, on the query position, on the generated positions n .. n+L-2
    table                       1 on every table position
    table_code[k]               ±1 code of t - 1 on table z_t's positions
    step[k]                     ±1 code of l - 1 at the position step l reads (n - 2 + l)
    idx_v[k]                    ±1 code of a table entry's address low part (z_1: the address)
    idx_w{t}[k]                 ±1 code of table z_t's address high part, w_{t-1} (t >= 2 with b_{t-1} > 0)
    val[k]                      ±1 code of a value token (every table, seed and generated token)
    w{l}[k]                     ±1 code of w_l, on the query token only
    fetch_seed[k], fetch_w{l}[k]   layer 0's attention output (nothing reads it but layer 0's MLP)
    R0[k], Rw{l}[k]             written by layer 0's MLP: code(z_0) at the query position, code(w_l) at generated
                                positions, exactly 0 at the other step positions
    fetch[k], Rnext[k]          layer 1's attention output, and the code of i_l its MLP writes

Head directions (one head space for both layers, so every layer has the same d_head): layer 0's queries meet keys
in `seed` and `query`, layer 1's in `table`, `step[k]`, `address_low[k]` and `address_high{t}[k]`; values travel
in `value[k]` (both layers) and `w{l}[k]` (layer 0).

Budget: 2 layers, H = 1, d_head = 3 + b_T + b_V + sum_l b_l and d_model = 4 + 2 b_T + 6 b_V + 4 sum_l b_l, all
O(log n): sum_l b_l <= 2 log2 N_{L-1}, since each n_l >= 2 has b_l <= 2 log2 n_l (and n_l = 1 has b_l = 0).
"""

from __future__ import annotations

import numpy as np

from constructions.composition import OFF_TARGET_MASS_BOUND, attention_scale, block_weight
from constructions.residual import Group, Head, Route, Score, Space, code_width, pm1_codes, table_bytes
from witness.ir import MLP, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention
from witness.storage import narrowest_dtype, seal
from witness.tasks import CompositionCoT

NAME = "composition_cot"

#: G, the threshold MLP's input scale (`threshold_mlp`). A fetched coordinate is either a target's ±1 diluted by
#: at most epsilon = OFF_TARGET_MASS_BOUND of other values in [-1, 1] (|F| >= 1 - 2 epsilon, the target's sign) or
#: a target's 0 plus the same dilution (|F| <= epsilon). The MLP maps G|F| <= 1 to exactly 0 and G|F| >= 2 to
#: exactly ±1, so it needs G epsilon <= 1 and G (1 - 2 epsilon) >= 2: at epsilon = 1/4 both hold only at G = 4.
THRESHOLD_GAIN = 1 / OFF_TARGET_MASS_BOUND


def table_code_weight(beta: int, widest_digit: int) -> int:
    """lambda_T, the weight of the table code in layer 1's scores: beta (b_max + 1), b_max the widest digit code.

    A key of another table t scores at least CODE_GAP lambda_T lower on the table code (distinct codes) and at most
    beta b_{t-1} <= beta b_max higher on its own address high part than the target does on its own (the target's
    part is beta b_{l-1} >= 0), so it stays 2 lambda_T - beta b_max = beta (b_max + 2) >= CODE_GAP beta below.
    """
    return beta * (widest_digit + 1)


def supported_task(L: int, m: int, n=()) -> CompositionCoT:
    """The task in the `paper` layout, the only one this network reads (the query token last)."""
    return CompositionCoT(L, m, tuple(n), "paper")


def digit_widths(task: CompositionCoT) -> dict[int, int]:
    """b_l for each query digit w_l with a code (n_l >= 2): a digit with one value carries nothing."""
    return {l: code_width(n_l) for l, n_l in enumerate(task.n, start=1) if code_width(n_l)}


def residual_space(task: CompositionCoT) -> Space:
    """The residual directions of the module docstring, in this order (the basis the network files store)."""
    b_V, b_T, digits = max(1, code_width(task.value_vocab)), code_width(task.L), digit_widths(task)
    return Space.of("type:z0", "type:w", "type:gen", "table", ("table_code", b_T), ("step", b_T), ("idx_v", b_V),
                    *((f"idx_w{l + 1}", b) for l, b in digits.items()), ("val", b_V),
                    *((f"w{l}", b) for l, b in digits.items()), ("fetch_seed", b_V),
                    *((f"fetch_w{l}", b) for l, b in digits.items()), ("R0", b_V),
                    *((f"Rw{l}", b) for l, b in digits.items()), ("fetch", b_V), ("Rnext", b_V))


def head_space(task: CompositionCoT) -> Head:
    """The head directions of the module docstring, one space for both layers."""
    b_V, b_T, digits = max(1, code_width(task.value_vocab)), code_width(task.L), digit_widths(task)
    return Head(qk=Space.of("seed", "query", "table", ("step", b_T), ("address_low", b_V),
                            *((f"address_high{l + 1}", b) for l, b in digits.items())),
                ov=Space.of(("value", b_V), *((f"w{l}", b) for l, b in digits.items())))


def stored(array: np.ndarray) -> np.ndarray:
    """`array` in the narrowest storage dtype that holds it exactly (witness.storage), sealed for the IR."""
    return seal(array.astype(narrowest_dtype(array)))


def embedding_tables(task: CompositionCoT, residual: Space) -> tuple[np.ndarray, np.ndarray]:
    """W_E [d_vocab, d_model]: value tokens their code in `val`, query tokens their digits' codes in `w{l}`;
    W_pos [n_ctx, d_model]: the segment indicators, table codes and addresses, and the step codes."""
    V, sizes, digits = task.value_vocab, task.domain_sizes, digit_widths(task)
    W_E = np.zeros((task.vocab_size, residual.width))
    W_E[:V, residual["val"].indices] = pm1_codes(np.arange(V), residual["val"].width)
    query_digits = task.decode_query(np.arange(task.query_count))
    for l in digits:
        W_E[V:, residual[f"w{l}"].indices] = pm1_codes(query_digits[l - 1], residual[f"w{l}"].width)

    W_pos = np.zeros((task.context_length, residual.width))
    for t in range(1, task.L + 1):
        rows = slice(task.segment(f"z{t}").start, task.segment(f"z{t}").stop)
        address = np.arange(sizes[t - 1])
        low_size = sizes[t - 2] if t >= 2 else sizes[0]  # z_t (t >= 2) is addressed by (w_{t-1}, i_{t-1})
        W_pos[rows, residual["table"].index] = 1
        W_pos[rows, residual["table_code"].indices] = pm1_codes(np.full(address.size, t - 1),
                                                                residual["table_code"].width)
        W_pos[rows, residual["idx_v"].indices] = pm1_codes(address % low_size, residual["idx_v"].width)
        if t - 1 in digits:
            W_pos[rows, residual[f"idx_w{t}"].indices] = pm1_codes(address // low_size, residual[f"idx_w{t}"].width)
    W_pos[task.segment("z0").start, residual["type:z0"].index] = 1
    query = task.segment("w").start
    W_pos[query, residual["type:w"].index] = 1
    W_pos[query + 1:, residual["type:gen"].index] = 1
    W_pos[query:, residual["step"].indices] = pm1_codes(np.arange(task.L), residual["step"].width)
    return stored(W_E), stored(W_pos)


def threshold_mlp(residual: Space, pairs: list[tuple[Group, Group]]) -> MLP:
    """For each (fetch, slot) pair, write into `slot` exactly sign(F) where |F| >= 1 - 2 epsilon and exactly 0
    where |F| <= epsilon, F the coordinate of `fetch` (|F| <= 1; THRESHOLD_GAIN = G = 4).

    Four ReLUs per coordinate: A = relu(G F - 1), B = relu(G F - 2), C = relu(-G F - 1), D = relu(-G F - 2), and
    slot += A - B - C + D. For F >= 1/2: A = G F - 1, B = G F - 2, C = D = 0, so the slot gets 1; symmetrically -1;
    for |F| <= 1/4 every unit's input is <= 0, so 0. Rounding cannot spoil this in a float format with at least 2
    fraction bits: G F is exact (a power-of-two scale), G F - 1 and G F - 2 are differences of multiples of the
    format's spacing at G F (G F <= 4 up to the softmax's rounding) that fit its significand, so exact, and their
    difference 1 is exact; an input <= 0 stays <= 0 under rounding. Fixed formats need 4 in range (I >= 3).
    """
    hidden = Space.of(*((f"{unit}:{fetch.name}", fetch.width) for unit in "ABCD" for fetch, _ in pairs))
    W_in = np.zeros((residual.width, hidden.width))  # [d_model, d_mlp]
    b_in = np.zeros(hidden.width)
    W_out = np.zeros((hidden.width, residual.width))  # [d_mlp, d_model]
    for fetch, slot in pairs:
        for unit, gain, bias, sign in (("A", 1, -1, 1), ("B", 1, -2, -1), ("C", -1, -1, -1), ("D", -1, -2, 1)):
            cells = hidden[f"{unit}:{fetch.name}"].indices
            W_in[fetch.indices, cells] = gain * THRESHOLD_GAIN
            b_in[cells] = bias
            W_out[cells, slot.indices] = sign
    return MLP(*(stored(array) for array in (W_in, b_in, W_out, np.zeros(residual.width))))


def attention(residual: Space, head: Head, scores: list[Score], routes: list[Route]) -> Attention:
    """One causal head with these scores and routes, zero biases, stored narrow."""
    arrays = head.dense(residual, scores, routes)
    return Attention.zeros_bias(**{name: stored(array) for name, array in arrays.items()}, causal=True)


def generating_tables_bytes(task, residual: Space) -> int:
    """The token, position and unembedding tables of width d_model of a network that generates: its context is
    the task's `context_length`, its readout names the value ids."""
    return table_bytes(task.vocab_size + task.context_length + task.value_vocab, residual.width)


def memory_bytes(L: int, m: int, n=()) -> int:
    """What `build` allocates (`generating_tables_bytes`)."""
    task = supported_task(L, m, n)
    return generating_tables_bytes(task, residual_space(task))


def build(L: int, m: int, n=()) -> Network:
    """The two-layer network; generating L tokens after a composition prompt gives i_1 .. i_L."""
    task = supported_task(L, m, n)
    residual, head = residual_space(task), head_space(task)
    digits = digit_widths(task)
    # Every key a step does not fetch scores at least CODE_GAP beta below the one it does (arguments below), so
    # `attention_scale` of the longest input keeps at most epsilon = 1/4 of the mass off the target, in both layers.
    beta = attention_scale(task.context_length)
    C = block_weight(beta)
    lam = table_code_weight(beta, max(digits.values(), default=0))

    # Layer 0. The query position scores the seed C, and every generated position scores the query position C;
    # every other key scores 0 (its key has no coordinate there): a gap of C = CODE_GAP beta. Values: a value
    # token's code and the query token's digits, fetched into separate groups, so each fetched coordinate is a
    # diluted ±1 (the code the target carries there) or a diluted 0 (the target carries nothing there).
    layer0 = attention(residual, head,
                       [Score(residual["type:w"], residual["type:z0"], head.qk["seed"], C),
                        Score(residual["type:gen"], residual["type:w"], head.qk["query"], C)],
                       [Route(residual["val"], head.ov["value"], residual["fetch_seed"]),
                        *(Route(residual[f"w{l}"], head.ov[f"w{l}"], residual[f"fetch_w{l}"]) for l in digits)])
    # Its MLP: R0 = code(z_0) at the query position (the query token has no `val`, so val + R0 = code(i_0) there),
    # 0 at generated positions (there val = code(i_{l-1})); Rw{l} = code(w_l) at generated positions.
    mlp0 = threshold_mlp(residual, [(residual["fetch_seed"], residual["R0"]),
                                    *((residual[f"fetch_w{l}"], residual[f"Rw{l}"]) for l in digits)])

    # Layer 1, step l at its last position, key j:
    #   C table(j) + lam <code(l-1), table_code(j)> + beta <code(i_{l-1}), idx_v(j)> + beta sum_t <Rw{t-1}, idx_w{t}(j)>
    # (the step's own query position and the generated ones both read as step positions, `type:w` and `type:gen`;
    # val and R0 both feed the low address, one of them 0 at each step position). The target, table z_l's entry
    # at (w_{l-1}, i_{l-1}), scores C + lam b_T + beta b_V + beta b_{l-1}: another entry of z_l differs in an
    # address bit (CODE_GAP beta lower), another table's entry is CODE_GAP beta lower by `table_code_weight`, and a
    # key outside the tables is 0, at least C = CODE_GAP beta lower. Rw is 0 at step 1, whose table has no high part.
    layer1 = attention(residual, head,
                       [Score(residual["type:w"], residual["table"], head.qk["table"], C),
                        Score(residual["type:gen"], residual["table"], head.qk["table"], C),
                        Score(residual["step"], residual["table_code"], head.qk["step"], lam),
                        Score(residual["val"], residual["idx_v"], head.qk["address_low"], beta),
                        Score(residual["R0"], residual["idx_v"], head.qk["address_low"], beta),
                        *(Score(residual[f"Rw{l}"], residual[f"idx_w{l + 1}"], head.qk[f"address_high{l + 1}"], beta)
                          for l in digits)],
                       [Route(residual["val"], head.ov["value"], residual["fetch"])])
    mlp1 = threshold_mlp(residual, [(residual["fetch"], residual["Rnext"])])

    # Readout: logit_v = <code(v), Rnext> = b_V - 2 hamming(v, i_l); i_l wins by CODE_GAP.
    W_U = np.zeros((residual.width, task.value_vocab))  # [d_model, d_vocab_out]
    W_U[residual["Rnext"].indices] = pm1_codes(np.arange(task.value_vocab), residual["Rnext"].width).T
    meta = Meta(task=task.name, params=task.params(), construction=NAME, claimed_format="fp64",
                notes={"beta": beta, "C": C, "table_code_weight": lam,
                       "off_target_mass_bound": float(OFF_TARGET_MASS_BOUND),
                       "threshold_gain": float(THRESHOLD_GAIN)})
    return Network(Embedding(*embedding_tables(task, residual)), (Layer(layer0, mlp0), Layer(layer1, mlp1)),
                   Readout(stored(W_U), stored(np.zeros(task.value_vocab)), read="last"), residual.basis(), meta)


build.memory_bytes = memory_bytes
