"""(L+1)-layer causal full attention for L-sequential function composition (conventions §4.1), one head per layer.

Our reconstruction of the paper's upper bound: the paper's own weights were not available. Layer 0 fetches the
seed z_0; layer l (1 <= l <= L) fetches z_l at address (w_{l-1}, i_{l-1}); the readout reads i_L. Everything
the last position needs is either in its own embedding (the query codes w_1..w_{L-1}) or written into a slot by
an earlier layer, so only the last position's stream matters; keys and values read embedding directions only,
which no layer writes, so whatever earlier layers write at other positions cannot disturb them.

Residual directions (b_V = code width of the value vocabulary V = N_{L-1}, b_l = code width of n_l):

    one                   1 at every position
    type:z0 .. type:zL    1 on the positions of the seed (z0) and of table z_l, else 0
    idx_w[k], idx_v[k]    ±1 code of a table entry's address a = (a div N_{l-2}, a mod N_{l-2}) (z_1: (-, a))
    val[k]                ±1 code of a table or seed token's value
    w{l}[k]               ±1 code of w_l, on the query token only
    fetch[k]              scratch: the attention output of the current layer, cleared by its MLP
    R{l}[k]               the slot holding the ±1 code of i_l, written by the MLP of layer l

Head directions (the same in every layer): queries meet keys in `block` (the block indicator), `address_high[k]`
and `address_low[k]` (the two parts of the address); values travel in `value[k]` (a token's code).

Codes: entry k of code(v) is +1 if bit k of v is set, else -1, so <code(u), code(v)> = width - 2 * hamming(u, v):
distinct codes score at least CODE_GAP = 2 below equal ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from constructions.residual import CODE_GAP, Group, Head, Route, Score, Space, code_width, fill, pm1_codes, run, write
from witness.errors import ParameterError
from witness.ir import MLP, Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention
from witness.storage import narrowest_dtype, seal
from witness.tasks import Composition

NAME = "composition"


# -- the linked constants, each derived from the one before ----------------------------------------------------
#: epsilon, the attention mass the argument lets fall off the key a layer fetches: chosen, and bought by
#: `attention_scale`.
OFF_TARGET_MASS_BOUND = Fraction(1, 4)

#: A fetched ±1 coordinate is (1 - e)(±1) + (a mix of values in [-1, 1] of mass e) for some e <= epsilon, so it
#: keeps the target's sign with magnitude at least 1 - 2 epsilon (and at most 1): what the sign MLP is built for.
FETCH_THRESHOLD = 1 - 2 * OFF_TARGET_MASS_BOUND

#: The sign MLP's input scale G: it lifts the threshold to 1, so 1 <= G|F| <= 2 for every fetched F (|F| <= 1).
#: At epsilon = 1/4, G = 2: a power of two, so G F is exact, and G F <= 2 keeps G F - 1 exact by Sterbenz's
#: lemma (`_sign_mlp`). A larger epsilon breaks the second, a smaller one the first; a test checks both.
SIGN_GAIN = 1 / FETCH_THRESHOLD


def attention_scale(prompt_length: int) -> int:
    """beta: the smallest integer with (n - 1) exp(-CODE_GAP beta) <= OFF_TARGET_MASS_BOUND.

    Every key the last position sees other than the target scores at least CODE_GAP beta below it (see
    `describe`), so the attention mass off the target is at most (n - 1) e^{-CODE_GAP beta} <= epsilon, and each
    fetched coordinate clears FETCH_THRESHOLD. An integer keeps the scale exact in every format. The ratio
    (n - 1) / epsilon is rounded up to an integer (it is one: 4 (n - 1)) before the logarithm, because math.log
    takes integers of any size and the parametric certificates have prompts far beyond the floats.
    """
    return max(1, math.ceil(math.log(math.ceil((prompt_length - 1) / OFF_TARGET_MASS_BOUND)) / CODE_GAP))


def block_weight(beta: int) -> int:
    """C, the weight of the block indicator: CODE_GAP beta.

    The query's address part has ±beta entries on b address head directions. A key outside the block being read
    carries at most ±1 there and indicator 0, so it scores at most beta b, while the target scores C + beta b:
    C = CODE_GAP beta gives those keys the same gap as a wrong address inside the block, whose code differs from
    the target's in at least one bit (CODE_GAP beta lower; the indicator cancels there).
    """
    return CODE_GAP * beta


@dataclass(frozen=True)
class CodeRule:
    """What one class of positions (or tokens) puts into one group of residual directions.

    `source` is `constant` (the value `constant` in the group's one direction), `address_low` / `address_high`
    (the ±1 code of the table entry's address a: low = a for z_1, else a mod N_{l-2}; high = a div N_{l-2}),
    `address_onehot` (1 in the group's direction number a_low, 0 elsewhere), `value` (the ±1 code of a value
    token's id) or `digit` (the ±1 code of the query digit w_`digit`). Codes fill the group's first `width`
    directions.
    """

    group: str
    source: str
    width: int = 1
    constant: float = 1.0
    digit: int = 0


@dataclass(frozen=True)
class EmbeddingClass:
    """A segment of positions (`z0` .. `zL`, `w`) or a kind of token (`value`, `query`) and what it embeds."""

    name: str
    rules: tuple[CodeRule, ...]


@dataclass(frozen=True)
class Sparse:
    """A weight array as diagonal runs (`constructions.residual.run` for a matrix, `fill` for a vector). Every
    weight of the construction is a union of such runs, group to group, so the description never needs a dense
    matrix, at any size."""

    shape: tuple[int, ...]
    runs: tuple[tuple, ...]

    def dense(self) -> np.ndarray:
        """The array, built once in the narrowest dtype that holds its values (witness.storage) and sealed."""
        dtype = narrowest_dtype(np.array([0.0] + [entry[-1] for entry in self.runs]))
        return seal(write(np.zeros(self.shape, dtype), self.runs))


#: The arrays of one layer of the description: one causal softmax head (no head axis; biases zero) and its MLP.
ATTENTION_ARRAYS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
MLP_ARRAYS = ("W_in", "b_in", "W_out", "b_out")


@dataclass(frozen=True)
class Description:
    """The network without its big tables: the per-layer weights as sparse runs, and the embedding and unembedding
    as rules per class of positions and tokens. `build` materialises it (`layers`, `materialise`), so a description
    and the network built from it cannot disagree; the checker's parametric proof (verify/checker/parametric.py)
    reasons about the rules and runs instead, at sizes no table (nor any d_model x d_head matrix) could be built
    for."""

    task: Composition
    residual: Space
    head: Head
    weights: tuple[dict[str, Sparse], ...]  # per layer: ATTENTION_ARRAYS and MLP_ARRAYS
    beta: int  # the attention scale (`attention_scale`)
    C: int  # the block indicator's weight (`block_weight`)
    positions: tuple[EmbeddingClass, ...]
    tokens: tuple[EmbeddingClass, ...]
    readout_group: str  # logit_v = <code(v), readout_group>

    @property
    def groups(self) -> dict[str, tuple[int, int]]:
        """Each group of residual directions (scalars included) as (first direction, width)."""
        return self.residual.spans()

    @property
    def d_model(self) -> int:
        return self.residual.width

    @property
    def d_head(self) -> int:
        return self.head.d_k

    def params(self) -> dict:
        return self.task.params()

    def basis(self) -> Basis:
        return self.residual.basis()

    def layers(self) -> tuple[Layer, ...]:
        """The dense IR layers (small sizes)."""
        out = []
        for arrays in self.weights:
            dense = {name: arrays[name].dense() for name in ATTENTION_ARRAYS + MLP_ARRAYS}
            attention = Attention(**{name: dense[name][None] for name in ATTENTION_ARRAYS if name != "b_O"},
                                  b_O=dense["b_O"], causal=True)
            out.append(Layer(attention, MLP(*(dense[name] for name in MLP_ARRAYS))))
        return tuple(out)


def describe(L: int, m: int, n=(), layout: str = "paper", extra: tuple[tuple[str, int], ...] = ()) -> Description:
    """The construction's parametric description (see `Description`); `build` materialises it.

    `extra` appends (group, width) directions after the construction's own, for networks that build on this one
    (constructions.composition_hybrid); the composition network's own directions and weights do not change."""
    task = Composition(L, m, tuple(n), layout)
    if task.layout != "paper":
        raise ParameterError("the composition construction reads w from the last token, which the `paper` layout "
                             f"puts there; layout {task.layout!r} is not supported")
    V = task.value_vocab
    b_V = max(1, code_width(V))
    b_w = [code_width(n_l) for n_l in task.n]  # b_w[l-1] = code width of w_l

    # The residual directions of the module docstring, in this order (the basis the network files store).
    residual = Space.of("one", *(f"type:z{l}" for l in range(L + 1)), ("idx_w", max(b_w, default=0)),
                        ("idx_v", b_V), ("val", b_V), *((f"w{l}", b_w[l - 1]) for l in range(1, L)),
                        ("fetch", b_V), *((f"R{l}", b_V) for l in range(L + 1)), *extra)

    # -- embedding rules ----------------------------------------------------------------------------------
    # z_1 is addressed by i_0 alone; z_l (l >= 2) by (w_{l-1}, i_{l-1}) = (a div N_{l-2}, a mod N_{l-2}).
    positions = [EmbeddingClass("z0", (CodeRule("one", "constant"), CodeRule("type:z0", "constant")))]
    for l in range(1, L + 1):
        rules = [CodeRule("one", "constant"), CodeRule(f"type:z{l}", "constant"),
                 CodeRule("idx_v", "address_low", b_V)]
        if l >= 2 and b_w[l - 2]:
            rules.append(CodeRule("idx_w", "address_high", b_w[l - 2]))
        positions.append(EmbeddingClass(f"z{l}", tuple(rules)))
    positions.append(EmbeddingClass("w", (CodeRule("one", "constant"),)))
    tokens = (EmbeddingClass("value", (CodeRule("val", "value", b_V),)),
              EmbeddingClass("query", tuple(CodeRule(f"w{l}", "digit", b_w[l - 1], digit=l)
                                            for l in range(1, L) if b_w[l - 1])))

    # -- attention: one head per layer -------------------------------------------------------------------
    # Scores live on the block indicator and the two parts of the address; values carry a token's code.
    head = Head(qk=Space.of("block", ("address_high", residual["idx_w"].width), ("address_low", b_V)),
                ov=Space.of(("value", b_V)))
    beta = attention_scale(task.prompt_length)
    C = block_weight(beta)

    weights = []
    for l in range(L + 1):
        # Layer l fetches the entry of table z_l at address (w_{l-1}, i_{l-1}): the last position scores key j
        #   C type:z{l}(j)  +  beta <R{l-1}, idx_v(j)>  +  beta <w{l-1}, idx_w(j)>,
        # so the target scores C + beta (b_{l-1} + b_V) and every other key at least CODE_GAP beta less
        # (`block_weight`, `attention_scale`). Layer 0 reads the seed by its indicator alone.
        scores = [Score(residual["one"], residual[f"type:z{l}"], head.qk["block"], C)]
        if l >= 1:
            scores.append(Score(residual[f"R{l - 1}"], residual["idx_v"], head.qk["address_low"], beta))
        if l >= 2 and b_w[l - 2]:
            high = b_w[l - 2]  # table z_l's address high part is w_{l-1}, the first b_{l-1} of idx_w
            scores.append(Score(residual[f"w{l - 1}"], residual["idx_w"].prefix(high),
                                head.qk["address_high"].prefix(high), beta))
        runs = head.runs(residual, scores, [Route(residual["val"], head.ov["value"], residual["fetch"])])
        arrays = {name: Sparse(shape, runs[name]) for name, shape in head.shapes(residual.width).items()}
        arrays.update({name: Sparse((head.d_k,), ()) for name in ("b_Q", "b_K", "b_V")})
        arrays["b_O"] = Sparse((residual.width,), ())
        arrays.update(_sign_mlp(residual.width, residual["fetch"], residual[f"R{l}"]))
        weights.append(arrays)

    # -- readout: logit_v = <code(v), R_L> = b_V - 2 hamming(v, i_L); the answer wins by CODE_GAP --------------
    return Description(task, residual, head, tuple(weights), beta, C, tuple(positions), tokens, f"R{L}")


def memory_bytes(L: int, m: int, n=(), layout: str = "paper") -> int:
    """What `build` allocates, from the description's widths (no table is built): the embedding, position and
    unembedding tables in their dtype (`table_dtype`), each once, the dense layers (float64 at most), and the
    index arrays and code blocks `materialise` holds while it writes them."""
    description = describe(L, m, n, layout)
    task = description.task
    layers = sum(8 * int(np.prod(array.shape)) for arrays in description.weights for array in arrays.values())
    tables = table_dtype(description).itemsize * (task.vocab_size + task.prompt_length + task.value_vocab)
    indices = 8 * 3 * max(task.prompt_length, task.vocab_size)  # rows, low and high parts of the addresses
    widest = max(group.width for group in description.residual.groups)
    codes = CODE_ROWS * 8 * (4 + widest)  # one block of values, their shifts and bytes, and its codes
    return tables * description.d_model + layers + indices + codes


def build(L: int, m: int, n=(), layout: str = "paper") -> Network:
    """The (L+1)-layer network; its readout at the last position is the answer token id i_L."""
    description = describe(L, m, n, layout)
    meta = Meta(
        task=description.task.name,
        params=description.task.params(),
        construction=NAME,
        claimed_format="fp64",
        notes={"beta": description.beta, "C": description.C, "fetch_threshold": float(FETCH_THRESHOLD),
               "off_target_mass_bound": float(OFF_TARGET_MASS_BOUND)},
    )
    W_E, W_pos, W_U = materialise(description)
    return Network(Embedding(W_E, W_pos), description.layers(), Readout(W_U, zero_bias(description), read="last"),
                   description.basis(), meta)


build.memory_bytes = memory_bytes

#: Rows of ±1 codes computed at a time while the tables are written, so that no temporary grows with the tables.
CODE_ROWS = 1 << 16


def table_dtype(description: Description) -> np.dtype:
    """The narrowest dtype (witness.storage) holding every value the rules write: 0, the ±1 codes, a one-hot 1 and
    the constants."""
    constants = [rule.constant for embedding_class in description.positions + description.tokens
                 for rule in embedding_class.rules if rule.source == "constant"]
    return narrowest_dtype(np.array([0.0, 1.0, -1.0] + constants))


def zero_bias(description: Description) -> np.ndarray:
    """The readout's bias b_U: zero for every answer."""
    return seal(np.zeros(description.task.value_vocab, table_dtype(description)))


def materialise(description: Description) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W_E [d_vocab, d_model], W_pos [n_ctx, d_model] and W_U [d_model, V] from the description's rules, each
    written once into a table of `table_dtype` and sealed, so that the IR keeps it without a copy."""
    task, residual = description.task, description.residual
    d_model = residual.width
    sizes = task.domain_sizes
    V = task.value_vocab
    dtype = table_dtype(description)

    def apply(table: np.ndarray, rows: slice, rule: CodeRule, codes_of) -> None:
        group = residual[rule.group]
        if rule.source == "constant":
            table[rows, group.start] = rule.constant
        elif rule.source == "address_onehot":
            table[np.arange(rows.start, rows.stop), group.indices[codes_of(rule)]] = 1
        else:
            write_codes(table, rows.start, group.prefix(rule.width), codes_of(rule))

    W_pos = np.zeros((task.prompt_length, d_model), dtype)  # [n_ctx, d_model]
    for position_class in description.positions:
        seg = task.segment(position_class.name)
        address = np.arange(seg.length)
        l = int(seg.name[1:]) if seg.name.startswith("z") else 0
        low = address if l <= 1 else address % sizes[max(l - 2, 0)]
        high = address // sizes[l - 2] if l >= 2 else np.zeros_like(address)
        for rule in position_class.rules:
            apply(W_pos, slice(seg.start, seg.stop), rule, lambda r: high if r.source == "address_high" else low)

    W_E = np.zeros((task.vocab_size, d_model), dtype)  # [d_vocab, d_model]
    query_digits = task.decode_query(np.arange(task.query_count))
    token_ids = {"value": np.arange(V), "query": np.arange(V, task.vocab_size)}
    for token_class in description.tokens:
        ids = token_ids[token_class.name]
        for rule in token_class.rules:
            apply(W_E, slice(ids[0], ids[-1] + 1), rule,
                  lambda r: ids if r.source == "value" else query_digits[r.digit - 1])

    W_U = np.zeros((d_model, V), dtype)  # [d_model, d_vocab_out]
    write_codes(W_U.T, 0, residual[description.readout_group], np.arange(V))
    return seal(W_E), seal(W_pos), seal(W_U)


def write_codes(table: np.ndarray, first_row: int, columns: Group, values: np.ndarray) -> None:
    """Row first_row + i of `table` gets the ±1 code of values[i] in the directions `columns`, CODE_ROWS rows at
    a time."""
    span = slice(columns.start, columns.start + columns.width)
    for offset in range(0, len(values), CODE_ROWS):
        chunk = values[offset:offset + CODE_ROWS]
        row = first_row + offset
        table[row:row + len(chunk), span] = pm1_codes(chunk, columns.width, table.dtype)


def _sign_mlp(d_model: int, fetch: Group, target: Group) -> dict[str, Sparse]:
    """Write sign(fetch) as exact ±1 into `target` and clear `fetch`, for FETCH_THRESHOLD <= |fetch| <= 1.

    Four ReLUs per bit on F = fetch[k], with G = SIGN_GAIN (= 2): A = relu(G F), B = relu(G F - 1), C = relu(-G F),
    D = relu(-G F - 1), in four blocks (A for every bit, then B, C, D; each output sums its units in that order).
    For F in [1/G, 1]: A = G F, B = G F - 1, C = D = 0, so A - B - C + D = 1; symmetrically -1 for F in [-1, -1/G].
    Rounding cannot spoil this: G F is exact (a power-of-two scale), G F - 1 is exact by Sterbenz's lemma
    (1 <= G F <= 2), and (G F) - (G F - 1) = 1 is representable, so the slot receives exactly ±1 in every float
    format, and in every fixed format that holds 2. The fetch is cleared by -A/G + C/G = -F, also exact.
    """
    hidden = Space.of(*((unit, fetch.width) for unit in "ABCD"))
    A, B, C, D = (hidden[unit] for unit in "ABCD")
    return {
        "W_in": Sparse((d_model, hidden.width), (run(fetch, A, SIGN_GAIN), run(fetch, B, SIGN_GAIN),
                                                 run(fetch, C, -SIGN_GAIN), run(fetch, D, -SIGN_GAIN))),
        "b_in": Sparse((hidden.width,), (fill(B, -1.0), fill(D, -1.0))),
        "W_out": Sparse((hidden.width, d_model), (run(A, target, 1.0), run(B, target, -1.0), run(C, target, -1.0),
                                                  run(D, target, 1.0), run(A, fetch, -1 / SIGN_GAIN),
                                                  run(C, fetch, 1 / SIGN_GAIN))),
        "b_out": Sparse((d_model,), ()),
    }
