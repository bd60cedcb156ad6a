"""A slow, scalar, obviously-correct reference for the `strict` semantics, built on MPFR (gmpy2).

`reference_run(network, tokens, fmt)` runs one token sequence through a Network with one Python scalar per
value, in exactly the operation order that `witness.execute` documents (and that its vectorised `strict`
arithmetic must reproduce bit for bit):

* every weight rounded to the format once;
* embedding: W_E[t] + W_pos[i], one rounded add;
* dot products accumulate in index order -- acc = x_0 * y_0, then acc = acc + x_k * y_k -- with a rounding after
  every multiply and every add; q, k, v, head outputs, MLP layers and the readout are such dot products plus a
  rounded bias add;
* attention computes q.k for every (query, key) pair, masked pairs included (so a masked score can overflow a
  fixed format, as in the executor), subtracts the maximum allowed score, takes a correctly rounded exp, sums
  the numerators of all keys in index order (masked keys contribute an exact 0), divides, and contracts with v
  in index order;
* heads are added in head order, then b_O; each block's output is added to the residual stream;
* (B,k)-block-sparse attention: each block summary is its keys summed in index order, then divided by the block's
  length; every query scores every block (q . summary), keeps its own block and the k best candidates (higher
  score first, ties to the lower index, NaN last), and the softmax above runs over the keys of the kept blocks
  (other keys are masked); sliding-window attention masks keys outside the window;
* recurrent mixers run position by position from a zero state, each state entry updated by its own rounded
  multiplies and adds in the order the executor's comment above its recurrent kernels gives (e.g. decay:
  S[i][j] = alpha_i S[i][j] + k_i v_j), read-outs S^T q as dot products in index order, sigmoid(u) as
  1 / (1 + exp(0 - u)); head outputs then go through W_O like attention's.

Floats use a gmpy2 context with precision mantissa + 1, the format's exponent range and `subnormalize=True`, so
each gmpy2 operation is one IEEE operation of the format, exp included (MPFR rounds exp correctly). Fixed formats
use exact rationals (`fractions.Fraction`) rounded to the grid with ties to even; a value outside the range
raises OverflowInFormat, and exp is enclosed by MPFR with directed rounding until both ends round to the same
grid point (Ziv's strategy; exp of a non-zero rational is irrational, so this ends).

This module deliberately shares no code with `witness.execute` or the vectorised kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import gmpy2
import numpy as np

from witness.arith.formats import Fixed, Float, Format
from witness.errors import InputError, OverflowInFormat, ParameterError
from witness.ir import (RECURRENT_MIXERS, RNN, BlockSparseAttention, DecayAttention, DeltaNet, GatedDeltaNet,
                        LinearAttention, Network, SlidingWindowAttention)


def float_context(fmt: Float) -> gmpy2.context:
    """The gmpy2 context whose operations are the IEEE operations of `fmt` (round to nearest even).

    MPFR writes x = m * 2^e with m in [1/2, 1), one above the IEEE exponent: emax = emax_ieee + 1, and the smallest
    subnormal 2^(emin_ieee - mantissa) = 1/2 * 2^(emin_ieee - mantissa + 1).
    """
    return gmpy2.context(precision=fmt.mantissa + 1, emax=fmt.emax + 1, emin=fmt.emin - fmt.mantissa + 1,
                         subnormalize=True, round=gmpy2.RoundToNearest)


class FloatScalars:
    """One rounded IEEE operation per call, in the format's gmpy2 context."""

    def __init__(self, fmt: Float):
        self.context = float_context(fmt)

    def value(self, x: float, operation: str = "round"):
        return self.context.plus(gmpy2.mpfr(float(x), 53))

    def add(self, a, b, operation: str = "add"):
        return self.context.add(a, b)

    def sub(self, a, b, operation: str = "sub"):
        return self.context.sub(a, b)

    def mul(self, a, b, operation: str = "mul"):
        return self.context.mul(a, b)

    def div(self, a, b, operation: str = "div"):
        return self.context.div(a, b)

    def exp(self, a, operation: str = "exp"):
        return self.context.exp(a)

    def relu(self, a):
        return a if gmpy2.is_nan(a) or a > 0 else self.context.plus(gmpy2.mpfr(0))

    def is_nan(self, a) -> bool:
        return bool(gmpy2.is_nan(a))

    def to_float(self, a) -> float:
        return float(a)


class FixedScalars:
    """Exact rationals rounded to the grid 2^-fraction (ties to even); leaving the range raises."""

    def __init__(self, fmt: Fixed):
        self.format = fmt
        self.scale = 2 ** fmt.fraction
        self.limit = 2 ** (fmt.integer + fmt.fraction)

    def _grid(self, exact: Fraction, operation: str) -> Fraction:
        steps = round(exact * self.scale)  # Fraction.__round__ rounds half to even
        if not -self.limit <= steps <= self.limit - 1:
            raise OverflowInFormat(f"{self.format.name} overflow in {operation}: {float(exact)!r} is outside "
                                   f"[{self.format.lowest!r}, {self.format.highest!r}]")
        return Fraction(steps, self.scale)

    def value(self, x: float, operation: str = "round") -> Fraction:
        if not np.isfinite(x):
            raise OverflowInFormat(f"{self.format.name} overflow in {operation}: {x!r} is not finite")
        return self._grid(Fraction(x), operation)

    def add(self, a, b, operation: str = "add"):
        return self._grid(a + b, operation)

    def sub(self, a, b, operation: str = "sub"):
        return self._grid(a - b, operation)

    def mul(self, a, b, operation: str = "mul"):
        return self._grid(a * b, operation)

    def div(self, a, b, operation: str = "div"):
        if b == 0:
            raise OverflowInFormat(f"{self.format.name} overflow in {operation}: division by zero")
        return self._grid(a / b, operation)

    def exp(self, a, operation: str = "exp"):
        rounded = exp_to_grid(float(a), self.format)
        if rounded == float("inf"):
            raise OverflowInFormat(f"{self.format.name} overflow in {operation}: exp({float(a)!r}) is too large")
        return self._grid(Fraction(rounded), operation)

    def relu(self, a):
        return max(a, Fraction(0))

    def is_nan(self, a) -> bool:
        return False

    def to_float(self, a) -> float:
        return float(a)


def exp_to_grid(x: float, fmt: Fixed) -> float:
    """exp(x) rounded to the nearest multiple of 2^-fraction (ties to even), with no range check.

    MPFR encloses exp(x) between a round-down and a round-up value; once both round to the same grid point,
    so does exp(x). Returns inf when exp(x) exceeds MPFR's own exponent range (far beyond any fixed range).
    """
    if x == 0:
        return 1.0
    argument = gmpy2.mpfr(x, 53)
    precision = 64
    while True:
        low = gmpy2.context(precision=precision, round=gmpy2.RoundDown).exp(argument)
        high = gmpy2.context(precision=precision, round=gmpy2.RoundUp).exp(argument)
        if gmpy2.is_infinite(low):
            return float("inf")
        if gmpy2.is_infinite(high):
            precision *= 2
            continue
        steps_low = round(Fraction(gmpy2.mpq(low)) * 2 ** fmt.fraction)
        steps_high = round(Fraction(gmpy2.mpq(high)) * 2 ** fmt.fraction)
        if steps_low == steps_high:
            return float(Fraction(steps_low, 2 ** fmt.fraction))
        precision *= 2


def scalars_for(fmt: Format) -> FloatScalars | FixedScalars:
    if isinstance(fmt, Float):
        return FloatScalars(fmt)
    if isinstance(fmt, Fixed):
        return FixedScalars(fmt)
    raise ParameterError(f"the MPFR reference runs Float and Fixed formats, not {fmt.name}")


@dataclass(frozen=True, eq=False)
class ReferenceOutputs:
    """`logits` [n_read, d_vocab_out] as float64 (exact: every format value is a float64); `predictions`
    [n_read], the unique argmax or -1 on a tie or a NaN logit."""

    logits: np.ndarray
    predictions: np.ndarray
    read_positions: tuple[int, ...]


def reference_run(network: Network, tokens, fmt: Format) -> ReferenceOutputs:
    """Run `network` on one token sequence under the strict semantics of `fmt`, one scalar at a time."""
    ops = scalars_for(fmt)
    sequence = [int(t) for t in np.asarray(tokens).reshape(-1)]
    if not sequence or len(sequence) > network.n_ctx or min(sequence) < 0 or max(sequence) >= network.d_vocab:
        raise InputError(f"tokens {sequence} do not fit the network (n_ctx {network.n_ctx}, "
                         f"vocabulary {network.d_vocab})")
    length = len(sequence)

    def weight(array, name):
        return _nested(np.asarray(array), lambda x: ops.value(x, f"weights {name}"))

    def dot(xs, ys, operation):
        total = ops.mul(xs[0], ys[0], operation)
        for a, b in zip(xs[1:], ys[1:]):
            total = ops.add(total, ops.mul(a, b, operation), operation)
        return total

    def column(matrix, c):
        return [row[c] for row in matrix]

    W_E, W_pos = weight(network.embedding.W_E, "W_E"), weight(network.embedding.W_pos, "W_pos")
    x = [[ops.add(W_E[t][c], W_pos[i][c], "embed") for c in range(network.d_model)]
         for i, t in enumerate(sequence)]
    for layer in network.layers:
        mixer = _reference_recurrent if isinstance(layer.mixer, RECURRENT_MIXERS) else _reference_attention
        attention = mixer(layer.mixer, x, ops, weight, dot, column)
        x = [[ops.add(x[i][c], attention[i][c], "residual") for c in range(network.d_model)] for i in range(length)]
        if layer.mlp is not None:
            W_in, b_in = weight(layer.mlp.W_in, "W_in"), weight(layer.mlp.b_in, "b_in")
            W_out, b_out = weight(layer.mlp.W_out, "W_out"), weight(layer.mlp.b_out, "b_out")
            hidden = [[ops.relu(ops.add(dot(x[i], column(W_in, u), "mlp"), b_in[u], "mlp"))
                       for u in range(layer.mlp.d_mlp)] for i in range(length)]
            out = [[ops.add(dot(hidden[i], column(W_out, c), "mlp"), b_out[c], "mlp")
                    for c in range(network.d_model)] for i in range(length)]
            x = [[ops.add(x[i][c], out[i][c], "residual") for c in range(network.d_model)] for i in range(length)]

    read = network.read_positions(length)
    W_U, b_U = weight(network.readout.W_U, "W_U"), weight(network.readout.b_U, "b_U")
    logits = [[ops.add(dot(x[i], column(W_U, v), "readout"), b_U[v], "readout")
               for v in range(network.d_vocab_out)] for i in read]
    predictions = [_unique_argmax(row, ops) for row in logits]
    return ReferenceOutputs(np.array([[ops.to_float(v) for v in row] for row in logits], dtype=np.float64),
                            np.array(predictions, dtype=np.int64), read)


def _reference_attention(block, x, ops, weight, dot, column):
    length, d_model = len(x), block.d_model
    W_Q, W_K, W_V, W_O = (weight(block.W_Q, "W_Q"), weight(block.W_K, "W_K"), weight(block.W_V, "W_V"),
                          weight(block.W_O, "W_O"))
    b_Q, b_K, b_V, b_O = (weight(block.b_Q, "b_Q"), weight(block.b_K, "b_K"), weight(block.b_V, "b_V"),
                          weight(block.b_O, "b_O"))
    heads_out = []
    for h in range(block.n_heads):
        def project(W, b):
            return [[ops.add(dot(x[i], column(W[h], e), "attention"), b[h][e], "attention")
                     for e in range(block.d_head)] for i in range(length)]

        q, k, v = project(W_Q, b_Q), project(W_K, b_K), project(W_V, b_V)
        visible = _visible_keys(block, q, k, ops, dot)
        mixed = []
        for i in range(length):
            scores = [dot(q[i], k[j], "scores") for j in range(length)]
            allowed = visible[i]
            top = _max_or_nan([s for s, ok in zip(scores, allowed) if ok], ops)
            zero = ops.value(0.0)
            numerators = [ops.exp(ops.sub(s, top, "softmax"), "softmax") if ok else zero
                          for s, ok in zip(scores, allowed)]
            total = numerators[0]
            for term in numerators[1:]:
                total = ops.add(total, term, "softmax")
            pattern = [ops.div(term, total, "softmax") for term in numerators]
            mixed.append([dot(pattern, column(v, e), "attention") for e in range(block.d_head)])
        heads_out.append([[dot(mixed[i], column(W_O[h], c), "attention") for c in range(d_model)]
                          for i in range(length)])
    return _add_heads(heads_out, b_O, ops, "attention")


def _add_heads(heads_out, b_O, ops, operation: str):
    """Per position and residual direction: the heads' outputs added in head order, then b_O."""
    out = []
    for per_position in zip(*heads_out):
        row = []
        for c, values in enumerate(zip(*per_position)):
            total = values[0]
            for value in values[1:]:
                total = ops.add(total, value, operation)
            row.append(ops.add(total, b_O[c], operation))
        out.append(row)
    return out


def _visible_keys(block, q, k, ops, dot) -> list[list[bool]]:
    """visible[i][j]: whether query i attends to key j, for every softmax kind."""
    length = len(q)
    if isinstance(block, SlidingWindowAttention):
        return [[0 <= i - j < block.window if block.causal else abs(i - j) < block.window for j in range(length)]
                for i in range(length)]
    causal = [[j <= i or not block.causal for j in range(length)] for i in range(length)]
    if not isinstance(block, BlockSparseAttention):
        return causal
    size = block.block
    summaries = []  # per block: its keys summed in index order, then divided by the block's length
    for first in range(0, length, size):
        members = k[first:first + size]
        summary = []
        for e in range(block.d_head):
            total = members[0][e]
            for key in members[1:]:
                total = ops.add(total, key[e], "summary")
            summary.append(ops.div(total, len(members), "summary"))
        summaries.append(summary)
    visible = []
    for i in range(length):
        own = i // size
        scores = [dot(q[i], summary, "block scores") for summary in summaries]
        candidates = [b for b in range(len(summaries)) if (b < own if block.causal else b != own)]
        ranked = sorted(candidates, key=lambda b: (1, 0, b) if ops.is_nan(scores[b]) else (0, -scores[b], b))
        kept = {own, *ranked[:block.k]}
        visible.append([j // size in kept and causal[i][j] for j in range(length)])
    return visible


def _reference_recurrent(block, x, ops, weight, dot, column):
    """Every recurrent mixer, one head, position and state entry at a time, from a zero state: the same steps as
    the executor's recurrent kernels (their comment in `witness.execute` gives the order)."""
    length, d_model = len(x), block.d_model
    w = {name: weight(array, name) for name, array in block.arrays().items()}
    zero, one = ops.value(0.0), ops.value(1.0)

    def affine(W, b):  # x_t W + b for each position t: a dot product in index order, then the bias
        return [[ops.add(dot(x[t], column(W, c), "recurrent"), b[c], "recurrent") for c in range(len(b))]
                for t in range(length)]

    def sigmoid(rows):  # 1 / (1 + exp(0 - u))
        return [[ops.div(one, ops.add(one, ops.exp(ops.sub(zero, u, "gate"), "gate"), "gate"), "gate") for u in row]
                for row in rows]

    heads_out = []
    for h in range(block.n_heads):
        if isinstance(block, RNN):
            outputs = _reference_rnn_head(block, affine(w["W_x"][h], w["b_x"][h]), w["W_s"][h], ops, dot, column,
                                          zero)
        else:
            outputs = _reference_matrix_head(block, h, w, affine, sigmoid, ops, dot, column, zero)
        heads_out.append([[dot(outputs[t], column(w["W_O"][h], c), "recurrent") for c in range(d_model)]
                          for t in range(length)])
    return _add_heads(heads_out, w["b_O"], ops, "recurrent")


def _reference_matrix_head(block, h, w, affine, sigmoid, ops, dot, column, zero):
    """One head of a matrix-state mixer: the outputs o_t [d_v] for t = 0 .. n-1."""
    q, k, v = affine(w["W_Q"][h], w["b_Q"][h]), affine(w["W_K"][h], w["b_K"][h]), affine(w["W_V"][h], w["b_V"][h])
    if isinstance(block, LinearAttention) and block.feature_map == "relu":
        q = [[ops.relu(a) for a in row] for row in q]
        k = [[ops.relu(a) for a in row] for row in k]
    alpha = beta = None
    if isinstance(block, DecayAttention):
        alpha = affine(w["W_alpha"][h], w["b_alpha"][h])
        if block.gate == "sigmoid":
            alpha = sigmoid(alpha)
    if isinstance(block, GatedDeltaNet):
        alpha = sigmoid(affine(w["W_alpha"][h], w["b_alpha"][h]))
    if isinstance(block, (DeltaNet, GatedDeltaNet)):
        beta = sigmoid(affine(w["W_beta"][h], w["b_beta"][h]))
    d_k, d_v = block.d_k, block.d_v
    S = [[zero] * d_v for _ in range(d_k)]
    z = [zero] * d_k
    outputs = []
    for t in range(len(q)):
        if beta is not None:  # delta rule: S[i][j] <- alpha (S[i][j] - (beta k_i) r_j) + (beta k_i) v_j
            beta_k = [ops.mul(beta[t][0], k[t][i], "recurrent") for i in range(d_k)]
            r = [dot(k[t], column(S, j), "recurrent") for j in range(d_v)]
            erased = [[ops.sub(S[i][j], ops.mul(beta_k[i], r[j], "recurrent"), "recurrent") for j in range(d_v)]
                      for i in range(d_k)]
            if alpha is not None:
                erased = [[ops.mul(alpha[t][0], e, "recurrent") for e in row] for row in erased]
            S = [[ops.add(erased[i][j], ops.mul(beta_k[i], v[t][j], "recurrent"), "recurrent") for j in range(d_v)]
                 for i in range(d_k)]
        elif alpha is not None:  # decay: S[i][j] <- alpha_i S[i][j] + k_i v_j (alpha_0 for a scalar decay)
            S = [[ops.add(ops.mul(alpha[t][i if len(alpha[t]) > 1 else 0], S[i][j], "recurrent"),
                          ops.mul(k[t][i], v[t][j], "recurrent"), "recurrent") for j in range(d_v)] for i in range(d_k)]
        else:  # linear: S[i][j] <- S[i][j] + k_i v_j
            S = [[ops.add(S[i][j], ops.mul(k[t][i], v[t][j], "recurrent"), "recurrent") for j in range(d_v)]
                 for i in range(d_k)]
        o = [dot(q[t], column(S, j), "recurrent") for j in range(d_v)]
        if isinstance(block, LinearAttention) and block.normalize:
            z = [ops.add(z[i], k[t][i], "recurrent") for i in range(d_k)]
            denominator = dot(q[t], z, "recurrent")
            o = [ops.div(a, denominator, "recurrent") for a in o]
        outputs.append(o)
    return outputs


def _reference_rnn_head(block, inputs, W_s, ops, dot, column, zero):
    """One head of the general RNN: s_t = act(s_{t-1} W_s + u_t), the states s_t for t = 0 .. n-1."""
    s = [zero] * block.d_state
    states = []
    for u in inputs:
        pre = [ops.add(dot(s, column(W_s, c), "recurrent"), u[c], "recurrent") for c in range(block.d_state)]
        s = [ops.relu(a) for a in pre] if block.activation == "relu" else pre
        states.append(s)
    return states


def _max_or_nan(values, ops):
    """The maximum, or NaN if any value is NaN (numpy's max)."""
    for value in values:
        if ops.is_nan(value):
            return value
    return max(values)


def _unique_argmax(row, ops) -> int:
    if any(ops.is_nan(v) for v in row):
        return -1
    best = max(row)
    winners = [index for index, value in enumerate(row) if value == best]
    return winners[0] if len(winners) == 1 else -1


def _nested(array: np.ndarray, convert):
    """An ndarray as nested lists of converted scalars (row-major)."""
    if array.ndim == 0:
        return convert(float(array))
    return [_nested(part, convert) for part in array]


__all__ = ["reference_run", "ReferenceOutputs", "float_context", "exp_to_grid", "scalars_for",
           "FloatScalars", "FixedScalars"]
