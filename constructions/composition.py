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

Codes: entry k of code(v) is +1 if bit k of v is set, else -1, so <code(u), code(v)> = width - 2 * hamming(u, v).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from constructions.residual import code_width, pm1_codes
from witness.errors import ParameterError
from witness.ir import MLP, Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention
from witness.storage import narrowest_dtype, seal
from witness.tasks import Composition

NAME = "composition"


def attention_scale(prompt_length: int) -> int:
    """beta: the smallest integer with (n - 1) * exp(-2 beta) <= 1/4.

    Every key the last position sees other than the target scores at least 2 beta below it (see `build`), so
    the attention mass off the target is at most (n - 1) e^{-2 beta} <= 1/4. A fetched ±1 coordinate is then
    target_weight * (±1) + (mass elsewhere) * [-1, 1], which keeps the target's sign with magnitude at least
    1 - 2/4 = 1/2 -- the threshold the MLP below needs. An integer keeps the scale exact in every format.
    """
    return max(1, math.ceil(math.log(4 * (prompt_length - 1)) / 2))


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
    """A weight array as diagonal runs: for a matrix, (row, column, length, value) sets entries (row + i,
    column + i) = value for i < length; for a vector, (index, length, value). Every weight of the construction is
    a union of such runs (group to group), so the description never needs a dense matrix, at any size."""

    shape: tuple[int, ...]
    runs: tuple[tuple, ...]

    def dense(self) -> np.ndarray:
        """The array, built once in the narrowest dtype that holds its values (witness.storage) and sealed."""
        out = np.zeros(self.shape, narrowest_dtype(np.array([0.0] + [run[-1] for run in self.runs])))
        for run in self.runs:
            if len(self.shape) == 2:
                row, column, length, value = run
                out[np.arange(row, row + length), np.arange(column, column + length)] = value
            else:
                index, length, value = run
                out[index:index + length] = value
        return seal(out)


#: The arrays of one layer of the description: one causal softmax head (no head axis; biases zero) and its MLP.
ATTENTION_ARRAYS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
MLP_ARRAYS = ("W_in", "b_in", "W_out", "b_out")


@dataclass(frozen=True)
class Description:
    """The network without its big tables: the per-layer weights as sparse runs, and the embedding and unembedding
    as rules per class of positions and tokens. `build` materialises it (`layers`, `materialise`), so a description
    and the network built from it cannot disagree; the checker's parametric proof (verify/checker/parametric.py)
    reasons about the rules and runs instead, at sizes no table (nor any d_model x d_head matrix) could be built
    for. `groups` maps each group of residual directions to (first direction, width)."""

    task: Composition
    groups: dict[str, tuple[int, int]]
    d_model: int
    d_head: int
    weights: tuple[dict[str, Sparse], ...]  # per layer: ATTENTION_ARRAYS and MLP_ARRAYS
    beta: int
    C: int
    positions: tuple[EmbeddingClass, ...]
    tokens: tuple[EmbeddingClass, ...]
    readout_group: str  # logit_v = <code(v), readout_group>

    def params(self) -> dict:
        return self.task.params()

    def basis(self) -> Basis:
        labels = [""] * self.d_model
        for name, (start, width) in self.groups.items():
            if name in SCALARS or name.startswith("type:"):
                labels[start] = name
            else:
                for k in range(width):
                    labels[start + k] = f"{name}[{k}]"
        return Basis(tuple(labels))

    def layers(self) -> tuple[Layer, ...]:
        """The dense IR layers (small sizes)."""
        out = []
        for arrays in self.weights:
            dense = {name: arrays[name].dense() for name in ATTENTION_ARRAYS + MLP_ARRAYS}
            attention = Attention(**{name: dense[name][None] for name in ATTENTION_ARRAYS if name != "b_O"},
                                  b_O=dense["b_O"], causal=True)
            out.append(Layer(attention, MLP(*(dense[name] for name in MLP_ARRAYS))))
        return tuple(out)


SCALARS = ("one",)


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
    b_w_max = max(b_w, default=0)

    groups: dict[str, tuple[int, int]] = {}

    def group(name: str, width: int) -> int:
        start = sum(w for _, w in groups.values())
        groups[name] = (start, width)
        return start

    one = group("one", 1)
    type_dir = {l: group(f"type:z{l}", 1) for l in range(L + 1)}
    idx_w = group("idx_w", b_w_max)
    idx_v = group("idx_v", b_V)
    val = group("val", b_V)
    w_dir = {l: group(f"w{l}", b_w[l - 1]) for l in range(1, L)}
    fetch = group("fetch", b_V)
    slot = {l: group(f"R{l}", b_V) for l in range(L + 1)}
    for name, width in extra:
        group(name, width)
    d_model = sum(w for _, w in groups.values())

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
    # Head dimensions: 0 = block indicator, 1..b_w_max = address high part, then b_V = address low part.
    # Values use head dimensions 0..b_V-1 for the value code.
    d_head = 1 + b_w_max + b_V
    head_type, head_w, head_v = 0, 1, 1 + b_w_max
    beta = attention_scale(task.prompt_length)
    # C: the block indicator's weight. The query's address part has ±beta entries on b = b_{l-1} + b_V head
    # dimensions; a key outside block l carries at most ±1 on those dimensions and 0 indicator, so it scores at
    # most beta * b, while the target scores C + beta * b. C = 2 beta gives those keys the 2 beta gap. Inside
    # block l the indicator cancels and a wrong address differs in at least one code bit: 2 beta lower.
    C = 2 * beta

    weights = []
    for l in range(L + 1):
        W_Q = [(one, head_type, 1, float(C))]  # [d_model, d_head]
        W_K = [(type_dir[l], head_type, 1, 1.0)]
        if l >= 1:
            W_Q.append((slot[l - 1], head_v, b_V, float(beta)))
            W_K.append((idx_v, head_v, b_V, 1.0))
        if l >= 2 and b_w[l - 2]:
            W_Q.append((w_dir[l - 1], head_w, b_w[l - 2], float(beta)))
            W_K.append((idx_w, head_w, b_w[l - 2], 1.0))
        arrays = {"W_Q": Sparse((d_model, d_head), tuple(W_Q)), "W_K": Sparse((d_model, d_head), tuple(W_K)),
                  "W_V": Sparse((d_model, d_head), ((val, 0, b_V, 1.0),)),
                  "W_O": Sparse((d_head, d_model), ((0, fetch, b_V, 1.0),)),  # [d_head, d_model]
                  **{name: Sparse((d_head,), ()) for name in ("b_Q", "b_K", "b_V")}, "b_O": Sparse((d_model,), ())}
        arrays.update(_sign_mlp(d_model, fetch, slot[l], b_V))
        weights.append(arrays)

    # -- readout: logit_v = <code(v), R_L> = b_V - 2 hamming(v, i_L); the answer wins by 2 ------------------
    return Description(task, groups, d_model, d_head, tuple(weights), beta, C, tuple(positions), tokens, f"R{L}")


def memory_bytes(L: int, m: int, n=(), layout: str = "paper") -> int:
    """What `build` allocates, from the description's widths (no table is built): the embedding, position and
    unembedding tables in their dtype (`table_dtype`), each once, the dense layers (float64 at most), and the
    index arrays and code blocks `materialise` holds while it writes them."""
    description = describe(L, m, n, layout)
    task = description.task
    layers = sum(8 * int(np.prod(array.shape)) for arrays in description.weights for array in arrays.values())
    tables = table_dtype(description).itemsize * (task.vocab_size + task.prompt_length + task.value_vocab)
    indices = 8 * 3 * max(task.prompt_length, task.vocab_size)  # rows, low and high parts of the addresses
    widest = max(width for _, width in description.groups.values())
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
        notes={"beta": description.beta, "C": description.C, "fetch_threshold": 0.5, "off_target_mass_bound": 0.25},
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
    task, groups = description.task, description.groups
    d_model = description.d_model
    sizes = task.domain_sizes
    V = task.value_vocab
    dtype = table_dtype(description)

    def write(table: np.ndarray, rows: slice, rule: CodeRule, codes_of) -> None:
        start, _ = groups[rule.group]
        if rule.source == "constant":
            table[rows, start] = rule.constant
        elif rule.source == "address_onehot":
            table[np.arange(rows.start, rows.stop), start + codes_of(rule)] = 1
        else:
            write_codes(table, rows.start, start, codes_of(rule), rule.width)

    W_pos = np.zeros((task.prompt_length, d_model), dtype)  # [n_ctx, d_model]
    for position_class in description.positions:
        seg = task.segment(position_class.name)
        address = np.arange(seg.length)
        l = int(seg.name[1:]) if seg.name.startswith("z") else 0
        low = address if l <= 1 else address % sizes[max(l - 2, 0)]
        high = address // sizes[l - 2] if l >= 2 else np.zeros_like(address)
        for rule in position_class.rules:
            write(W_pos, slice(seg.start, seg.stop), rule, lambda r: high if r.source == "address_high" else low)

    W_E = np.zeros((task.vocab_size, d_model), dtype)  # [d_vocab, d_model]
    query_digits = task.decode_query(np.arange(task.query_count))
    token_ids = {"value": np.arange(V), "query": np.arange(V, task.vocab_size)}
    for token_class in description.tokens:
        ids = token_ids[token_class.name]
        for rule in token_class.rules:
            write(W_E, slice(ids[0], ids[-1] + 1), rule,
                  lambda r: ids if r.source == "value" else query_digits[r.digit - 1])

    W_U = np.zeros((d_model, V), dtype)  # [d_model, d_vocab_out]
    start, width = groups[description.readout_group]
    write_codes(W_U.T, 0, start, np.arange(V), width)
    return seal(W_E), seal(W_pos), seal(W_U)


def write_codes(table: np.ndarray, first_row: int, column: int, values: np.ndarray, width: int) -> None:
    """Row first_row + i of `table` gets the ±1 code of values[i] in columns column .. column + width - 1,
    CODE_ROWS rows at a time."""
    for offset in range(0, len(values), CODE_ROWS):
        chunk = values[offset:offset + CODE_ROWS]
        row = first_row + offset
        table[row:row + len(chunk), column:column + width] = pm1_codes(chunk, width, table.dtype)


def _sign_mlp(d_model: int, fetch: int, target: int, width: int) -> dict[str, Sparse]:
    """Write sign(fetch) as exact ±1 into `target` and clear `fetch`, for |fetch| in [1/2, 1] (groups of `width`).

    Four ReLUs per bit on F = fetch[k]:  A = relu(2F), B = relu(2F - 1), C = relu(-2F), D = relu(-2F - 1), in four
    blocks of `width` units (A for every bit, then B, C, D; each output sums its units in that order).
    For F in [1/2, 1]: A = 2F, B = 2F - 1, C = D = 0, so A - B - C + D = 1; symmetrically -1 for F in [-1, -1/2].
    Rounding cannot spoil this: 2F is exact (a power-of-two scale), 2F - 1 is exact by Sterbenz's lemma
    (1 <= 2F <= 2), and (2F) - (2F - 1) = 1 is representable, so the slot receives exactly ±1 in every float
    format, and in every fixed format that holds 2. The fetch is cleared by -A/2 + C/2 = -F, also exact.
    """
    A, B, C, D = (block * width for block in range(4))
    d_mlp = 4 * width
    return {
        "W_in": Sparse((d_model, d_mlp), ((fetch, A, width, 2.0), (fetch, B, width, 2.0), (fetch, C, width, -2.0),
                                          (fetch, D, width, -2.0))),  # [d_model, d_mlp]
        "b_in": Sparse((d_mlp,), ((B, width, -1.0), (D, width, -1.0))),
        "W_out": Sparse((d_mlp, d_model), ((A, target, width, 1.0), (B, target, width, -1.0),
                                           (C, target, width, -1.0), (D, target, width, 1.0),
                                           (A, fetch, width, -0.5), (C, fetch, width, 0.5))),  # [d_mlp, d_model]
        "b_out": Sparse((d_model,), ()),
    }
