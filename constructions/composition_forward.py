"""A recurrent network for L-sequential composition in the `forward` layout (conventions §1.1), the layout contrast.

In the `forward` layout, [w] [z_0] [z_1 table] ... [z_L table] with the answer read at the last position, every
table comes after the index that selects its entry, so a left-to-right recurrence can follow the chain: this
network has L+1 layers of the general `rnn` mixer (relu) with an MLP after each, no attention at all, and a state of
O(log n) numbers per layer -- O(L log n) bits in all. The lower bounds for causal models (CPW, Theorem 1.1) are
about the `paper` layout, where each table comes before the index that selects it.

All quantities are 0/1 bits (`bit[k]` of v is bit k of its binary expansion), so every operation is on small
integers and exact in every format that holds the integers up to b_V + 2.

Residual directions (b_V = code width of V = N_{L-1}, b_l = code width of n_l):

    type:w, type:z0 .. type:zL   1 on the query position, the seed, table z_l
    lo[k], hi[k]                 bits of a table entry's address a: lo = a (z_1) or a mod N_{l-2}, hi = a div N_{l-2}
    val[k]                       bits of a value token's id
    q{l}[k]                      bits of the query digit w_l, on the query token
    w{l}[k]                      w_l's bits carried to every later position (layer 0's state)
    R{l}[k]                      i_l's bits, from the position where layer l captures it on
    X{l}[k]                      the MLP before layer l: 1 where an address bit agrees with the one sought

Layer 0 captures the seed and the query digits; layer l >= 1 captures the entry of table z_l whose address bits all
agree with (w_{l-1}, i_{l-1}). A capture is two state units per bit: C[k] = relu(sum of the conditions + bit - #
conditions) is 1 exactly at the position where every 0/1 condition holds and the bit is 1 (the AND of 0/1
signals); A[k] = relu(A[k] + C[k]) keeps it from the next position on. The layer outputs A + C: C is nonzero at
one position only, so A + C is the captured bit from the capture onwards. Table z_l lies wholly after table
z_{l-1}, so when layer l compares addresses, R{l-1} is final. State units are named after the residual direction X
they write: `and:X` (C) and `latch:X` (A); so are the MLPs' hidden units, `both:X` and `neither:X`.
"""

from __future__ import annotations

import numpy as np

from constructions.residual import Group, Space, code_width, pm1_codes, table_bytes
from witness.ir import MLP, Embedding, Layer, Meta, Network, Readout
from witness.mixers import RNN
from witness.tasks import Composition

NAME = "composition_forward_recurrent"


def _bits(values, width: int) -> np.ndarray:
    """0/1 bits, shape values.shape + (width,)."""
    return (pm1_codes(values, width) + 1) / 2


def _capture_layer(residual: Space, captures: list[tuple[tuple[Group, ...], Group, Group]]) -> RNN:
    """An rnn layer with a pair of state units per captured bit (see the module docstring): `and:X` (C) and
    `latch:X` (A) for output direction X.

    `captures`: (condition groups, bit group, output group); bit k is captured into output k where every condition
    direction is 1."""
    state = Space.of(*(f"{role}:{label}" for _, _, outputs in captures for label in outputs.labels
                       for role in ("and", "latch")))
    d_model = residual.width
    W_x = np.zeros((1, d_model, state.width))  # [H, d_model, d_state]
    b_x = np.zeros((1, state.width))
    W_s = np.zeros((1, state.width, state.width))  # [H, d_state, d_state]
    W_O = np.zeros((1, state.width, d_model))  # [H, d_state, d_model]
    for conditions, bits, outputs in captures:
        if bits.width != outputs.width:
            raise ValueError(f"capture {bits.name!r} -> {outputs.name!r}: widths {bits.width}, {outputs.width}")
        condition = np.concatenate([group.indices for group in conditions])
        for bit, output, label in zip(bits.indices, outputs.indices, outputs.labels):
            C, A = state[f"and:{label}"].index, state[f"latch:{label}"].index
            W_x[0, condition, C] = 1.0
            W_x[0, bit, C] = 1.0
            b_x[0, C] = -float(condition.size)  # relu(sum of conditions + bit - #conditions) = AND of them all
            W_s[0, A, A] = W_s[0, C, A] = 1.0  # A_t = relu(A_{t-1} + C_{t-1})
            W_O[0, C, output] = W_O[0, A, output] = 1.0
    return RNN(W_x, b_x, W_s, W_O, np.zeros(d_model), activation="relu")


def _agreement_mlp(residual: Space, pairs: list[tuple[Group, Group]], outputs: Group) -> MLP:
    """outputs[j] = [a == b] for the j-th pair of 0/1 directions (the pairs of groups laid end to end):
    relu(a + b - 1) + relu(1 - a - b), units `both:X` and `neither:X` for output direction X."""
    left = np.concatenate([a.indices for a, _ in pairs])
    right = np.concatenate([b.indices for _, b in pairs])
    if not left.size == right.size == outputs.width:
        raise ValueError(f"agreement into {outputs.name!r}: {left.size} pairs for {outputs.width} outputs")
    hidden = Space.of(*(f"{unit}:{label}" for label in outputs.labels for unit in ("both", "neither")))
    W_in = np.zeros((residual.width, hidden.width))  # [d_model, d_mlp]
    b_in = np.zeros(hidden.width)
    W_out = np.zeros((hidden.width, residual.width))  # [d_mlp, d_model]
    for a, b, out, label in zip(left, right, outputs.indices, outputs.labels):
        both, neither = hidden[f"both:{label}"].index, hidden[f"neither:{label}"].index
        W_in[[a, b], both] = 1.0
        b_in[both] = -1.0
        W_in[[a, b], neither] = -1.0
        b_in[neither] = 1.0
        W_out[[both, neither], out] = 1.0
    return MLP(W_in, b_in, W_out, np.zeros(residual.width))


def memory_bytes(L: int, m: int, n=()) -> int:
    """An upper bound on what `build` allocates: its residual is at most 8 (L + 2) (b_V + b_w + 1) wide."""
    task = Composition(L, m, tuple(n), "forward")
    width = 8 * (L + 2) * (max(1, code_width(task.value_vocab)) + max((code_width(v) for v in task.n), default=0) + 1)
    return table_bytes(task.vocab_size + task.prompt_length + task.value_vocab, width) + 2 * 8 * (L + 1) * width ** 2


def build(L: int, m: int, n=()) -> Network:
    """L+1 rnn layers (relu) with MLPs, for the `forward` layout; readout i_L at the last position."""
    task = Composition(L, m, tuple(n), "forward")
    V = task.value_vocab
    b_V = max(1, code_width(V))
    b_w = [code_width(n_l) for n_l in task.n]  # b_w[l-1] = code width of w_l

    # The residual directions of the module docstring, in this order (the basis the network files store).
    residual = Space.of("type:w", *(f"type:z{l}" for l in range(L + 1)), ("lo", b_V), ("hi", max(b_w, default=0)),
                        ("val", b_V), *((f"q{l}", b_w[l - 1]) for l in range(1, L)),
                        *((f"w{l}", b_w[l - 1]) for l in range(1, L)), *((f"R{l}", b_V) for l in range(L + 1)),
                        *((f"X{l}", b_V + (b_w[l - 2] if l >= 2 else 0)) for l in range(1, L + 1)))
    lo, hi, val = residual["lo"], residual["hi"], residual["val"]

    # -- embedding: types and address bits by position, value / digit bits by token ----------------------------
    W_pos = np.zeros((task.prompt_length, residual.width))  # [n_ctx, d_model]
    sizes = task.domain_sizes
    for segment in task.segments:
        rows = np.arange(segment.start, segment.stop)
        if segment.name == "w":
            W_pos[rows, residual["type:w"].index] = 1.0
            continue
        l = int(segment.name[1:])
        W_pos[rows, residual[f"type:z{l}"].index] = 1.0
        address = np.arange(segment.length)
        if l >= 1:
            W_pos[np.ix_(rows, lo.indices)] = _bits(address % sizes[l - 2] if l >= 2 else address, b_V)
        if l >= 2 and b_w[l - 2]:
            W_pos[np.ix_(rows, hi.prefix(b_w[l - 2]).indices)] = _bits(address // sizes[l - 2], b_w[l - 2])
    W_E = np.zeros((task.vocab_size, residual.width))  # [d_vocab, d_model]
    W_E[np.ix_(np.arange(V), val.indices)] = _bits(np.arange(V), b_V)
    digits = task.decode_query(np.arange(task.query_count))
    for l in range(1, L):
        W_E[np.ix_(np.arange(V, task.vocab_size), residual[f"q{l}"].indices)] = _bits(digits[l - 1], b_w[l - 1])

    # -- layers ------------------------------------------------------------------------------------------------
    layers = []
    for l in range(L + 1):
        if l == 0:  # the seed's bits at type:z0, each query digit's bits at type:w
            captures = [((residual["type:z0"],), val, residual["R0"])] + [
                ((residual["type:w"],), residual[f"q{k}"], residual[f"w{k}"]) for k in range(1, L)]
        else:  # the entry of z_l whose address bits all agree with (w_{l-1}, i_{l-1})
            captures = [((residual[f"type:z{l}"], residual[f"X{l}"]), val, residual[f"R{l}"])]
        mlp = None
        if l < L:  # the address agreement bits the next layer needs: lo vs i_l, and hi vs w_l
            pairs = [(lo, residual[f"R{l}"])] + ([(hi.prefix(b_w[l - 1]), residual[f"w{l}"])] if l >= 1 else [])
            mlp = _agreement_mlp(residual, pairs, residual[f"X{l + 1}"])
        layers.append(Layer(_capture_layer(residual, captures), mlp))

    # -- readout: logit_v = sum_k c_k(v) (2 R_L[k] - 1) = b_V - 2 hamming(v, i_L), c = the ±1 code ---------------
    codes = pm1_codes(np.arange(V), b_V)  # [V, b_V]
    W_U = np.zeros((residual.width, V))  # [d_model, d_vocab_out]
    W_U[residual[f"R{L}"].indices, :] = 2 * codes.T
    meta = Meta(task=task.name, params=task.params(), construction=NAME, claimed_format="fp64",
                notes={"layout": "forward", "mixer": "rnn"})
    return Network(Embedding(W_E, W_pos), tuple(layers), Readout(W_U, -codes.sum(axis=1), read="last"),
                   residual.basis(), meta)


build.memory_bytes = memory_bytes
