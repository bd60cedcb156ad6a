"""(L+1)-layer causal full attention for L-sequential function composition (SPEC §4.1), one head per layer.

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

from constructions.residual import ResidualLayout, code_width, pm1_codes
from witness.errors import ParameterError
from witness.ir import MLP, Attention, Basis, Embedding, Layer, Meta, Network, Readout
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
class Description:
    """The network without its big tables: the small per-layer weights, plus the embedding and unembedding as
    rules per class of positions and tokens. `materialise` builds the tables from these rules, so a description
    and the network built from it cannot disagree; `verify.parametric` reasons about the rules instead, at sizes
    (tables of 2^64 entries) no table could be built for."""

    task: Composition
    basis: Basis
    layers: tuple[Layer, ...]
    beta: int
    C: int
    positions: tuple[EmbeddingClass, ...]
    tokens: tuple[EmbeddingClass, ...]
    readout_group: str  # logit_v = <code(v), readout_group>

    def params(self) -> dict:
        return self.task.params()


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

    res = ResidualLayout()
    one = res.scalar("one")
    type_dir = {l: res.scalar(f"type:z{l}") for l in range(L + 1)}
    idx_w = res.group("idx_w", b_w_max)
    idx_v = res.group("idx_v", b_V)
    val = res.group("val", b_V)
    w_dir = {l: res.group(f"w{l}", b_w[l - 1]) for l in range(1, L)}
    fetch = res.group("fetch", b_V)
    slot = {l: res.group(f"R{l}", b_V) for l in range(L + 1)}
    for group, width in extra:
        res.group(group, width)
    d_model = res.width

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
    head_type, head_w, head_v = 0, 1 + np.arange(b_w_max), 1 + b_w_max + np.arange(b_V)
    beta = attention_scale(task.prompt_length)
    # C: the block indicator's weight. The query's address part has ±beta entries on b = b_{l-1} + b_V head
    # dimensions; a key outside block l carries at most ±1 on those dimensions and 0 indicator, so it scores at
    # most beta * b, while the target scores C + beta * b. C = 2 beta gives those keys the 2 beta gap. Inside
    # block l the indicator cancels and a wrong address differs in at least one code bit: 2 beta lower.
    C = 2 * beta

    layers = []
    for l in range(L + 1):
        W_Q = np.zeros((1, d_model, d_head))  # [H, d_model, d_head]
        W_K = np.zeros((1, d_model, d_head))
        W_V = np.zeros((1, d_model, d_head))
        W_O = np.zeros((1, d_head, d_model))  # [H, d_head, d_model]
        W_Q[0, one, head_type] = C
        W_K[0, type_dir[l], head_type] = 1.0
        if l >= 1:
            W_Q[0, slot[l - 1], head_v] = beta
            W_K[0, idx_v, head_v] = 1.0
        if l >= 2 and b_w[l - 2]:
            width = b_w[l - 2]
            W_Q[0, w_dir[l - 1], head_w[:width]] = beta
            W_K[0, idx_w[:width], head_w[:width]] = 1.0
        W_V[0, val, np.arange(b_V)] = 1.0
        W_O[0, np.arange(b_V), fetch] = 1.0
        attention = Attention.zeros_bias(W_Q, W_K, W_V, W_O, causal=True)
        layers.append(Layer(attention, _sign_mlp(d_model, fetch, slot[l])))

    # -- readout: logit_v = <code(v), R_L> = b_V - 2 hamming(v, i_L); the answer wins by 2 ------------------
    return Description(task, res.basis(), tuple(layers), beta, C, tuple(positions), tokens, f"R{L}")


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
    V = description.task.value_vocab
    return Network(Embedding(W_E, W_pos), description.layers, Readout(W_U, np.zeros(V), read="last"),
                   description.basis, meta)


def materialise(description: Description) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W_E [d_vocab, d_model], W_pos [n_ctx, d_model] and W_U [d_model, V] from the description's rules."""
    task, basis = description.task, description.basis
    d_model = len(basis)
    sizes = task.domain_sizes
    V = task.value_vocab

    def write(table: np.ndarray, rows: np.ndarray, rule: CodeRule, codes_of) -> None:
        if rule.source == "constant":
            table[rows, basis.index(rule.group)] = rule.constant
        elif rule.source == "address_onehot":
            table[rows, np.array(basis.group(rule.group))[codes_of(rule)]] = 1.0
        else:
            table[np.ix_(rows, basis.group(rule.group)[: rule.width])] = pm1_codes(codes_of(rule), rule.width)

    W_pos = np.zeros((task.prompt_length, d_model))  # [n_ctx, d_model]
    for position_class in description.positions:
        seg = task.segment(position_class.name)
        rows = np.arange(seg.start, seg.stop)
        address = np.arange(seg.length)
        l = int(seg.name[1:]) if seg.name.startswith("z") else 0
        low = address if l <= 1 else address % sizes[max(l - 2, 0)]
        high = address // sizes[l - 2] if l >= 2 else np.zeros_like(address)
        for rule in position_class.rules:
            write(W_pos, rows, rule, lambda r: high if r.source == "address_high" else low)

    W_E = np.zeros((task.vocab_size, d_model))  # [d_vocab, d_model]
    query_digits = task.decode_query(np.arange(task.query_count))
    token_rows = {"value": np.arange(V), "query": np.arange(V, task.vocab_size)}
    for token_class in description.tokens:
        rows = token_rows[token_class.name]
        for rule in token_class.rules:
            write(W_E, rows, rule, lambda r: rows if r.source == "value" else query_digits[r.digit - 1])

    W_U = np.zeros((d_model, V))  # [d_model, d_vocab_out]
    slot = basis.group(description.readout_group)
    W_U[slot, :] = pm1_codes(np.arange(V), len(slot)).T
    return W_E, W_pos, W_U


def _sign_mlp(d_model: int, fetch: np.ndarray, target: np.ndarray) -> MLP:
    """Write sign(fetch) as exact ±1 into `target` and clear `fetch`, for |fetch| in [1/2, 1].

    Four ReLUs per bit on F = fetch[k]:  A = relu(2F), B = relu(2F - 1), C = relu(-2F), D = relu(-2F - 1).
    For F in [1/2, 1]: A = 2F, B = 2F - 1, C = D = 0, so A - B - C + D = 1; symmetrically -1 for F in [-1, -1/2].
    Rounding cannot spoil this: 2F is exact (a power-of-two scale), 2F - 1 is exact by Sterbenz's lemma
    (1 <= 2F <= 2), and (2F) - (2F - 1) = 1 is representable, so the slot receives exactly ±1 in every float
    format, and in every fixed format that holds 2. The fetch is cleared by -A/2 + C/2 = -F, also exact.
    """
    width = fetch.size
    d_mlp = 4 * width
    W_in = np.zeros((d_model, d_mlp))  # [d_model, d_mlp]
    b_in = np.zeros(d_mlp)
    W_out = np.zeros((d_mlp, d_model))  # [d_mlp, d_model]
    A, B, C, D = (np.arange(width) * 4 + offset for offset in range(4))
    W_in[fetch, A], W_in[fetch, B], W_in[fetch, C], W_in[fetch, D] = 2.0, 2.0, -2.0, -2.0
    b_in[B], b_in[D] = -1.0, -1.0
    W_out[A, target], W_out[B, target], W_out[C, target], W_out[D, target] = 1.0, -1.0, -1.0, 1.0
    W_out[A, fetch], W_out[C, fetch] = -0.5, 0.5
    return MLP(W_in, b_in, W_out, np.zeros(d_model))
