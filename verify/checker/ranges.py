"""Range bounds: at every position, for every input, every value the network computes stays finite and in the
format's range. Without this, one overflow anywhere -- an inf that meets a zero weight -- would turn keys and
values at other positions into NaN, and fixed-point runs would stop with an error.

A bound is a vector B with |x[d]| <= B[d] at every position, pushed through every block. Two facts carry it:
rounding to nearest is monotone and odd, so |round(y)| <= round(Y) whenever |y| <= Y; and a float64 result widened
to the next float64 up bounds the exact value it rounded. Under `strict` an ordered sum of terms |t_i| <= T_i is
then at most the fold A <- round(A + T_i) of the bounds (each term itself rounded); under `theory` the exact sum is
at most the float64 sum of nonnegative terms times 1 + (k + 2) 2^-51 (any order: Higham's gamma_k, k terms).

Softmax weights lie in [0, 1] and under `theory` the mix is a convex combination (|mix_c| <= max |v_c|), which the
executor's float64 stand-in exceeds by at most its softmax error (`numbers.float64_softmax_error`); under
`strict` the mix is an ordered sum of n rounded products of weights <= 1 with values. A linear layer's state is
the ordered sum over positions of phi(k_j) v_j^T, stored every step; where its keys read only position-only
directions the exact keys are used, so a coordinate nonzero at few positions sums few terms. An MLP output
direction fed by hidden units that read a single input direction is a piecewise-linear function of that input,
whose exact range is its extreme over the kinks and the ends of the input's range, widened by a bound on every
rounding step; other outputs are bounded term by term.

Under `theory` nothing inside a block is rounded to the format, but the executor computes it in float64, where a
value the exact model holds (2^600 2^600) overflows and an inf meets a zero weight as NaN. So every bound on a value
computed inside a block (queries, keys, values, scores, block summaries, hidden units, MLP outputs, read-outs) must
be at most 2^1020: a float64 result of at most a few thousand operations on such values errs by a factor below
1 + 2^-40, and a score difference at most doubles it, so nothing reaches 2^1024.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from verify.checker.numbers import Format, float64_softmax_error, up
from verify.checker.products import affine
from verify.checker.refusal import require


#: The largest bound under theory on a value inside a block (module docstring).
INSIDE_LIMIT = 2.0 ** 1020


class Ranges:
    def __init__(self, fmt: Format, strict: bool):
        self.fmt, self.strict = fmt, strict

    def inside(self, B: np.ndarray, what: str) -> np.ndarray:
        """B, a bound on a value computed inside a block, which under theory must stay finite in float64."""
        if not self.strict:
            require(bool(np.all(B <= INSIDE_LIMIT)), f"{what} may overflow float64, in which the executor computes "
                                                     f"theory's exact inside of a block")
        return B

    def stored(self, B: np.ndarray, what: str) -> np.ndarray:
        """A bound on |round(y)| for |y| <= B."""
        return self.fmt.round_array(up(np.asarray(B, dtype=np.float64)), what)

    def total(self, T: np.ndarray, what: str) -> np.ndarray:
        """A bound on |sum_i t_i| (axis -1) with |t_i| <= T_i: ordered and rounded (strict), or exact."""
        T = np.asarray(T, dtype=np.float64)
        if not self.strict:
            return up(T.sum(axis=-1) * (1 + (T.shape[-1] + 2) * 2.0 ** -51))
        acc = np.zeros(T.shape[:-1])
        for i in range(T.shape[-1]):
            acc = self.fmt.round_array(up(acc + self.fmt.round_array(up(T[..., i]), what)), what)
        return acc

    def long_total(self, term: np.ndarray, count: int, what: str, rounded_terms: bool = True) -> np.ndarray:
        """A bound on |a sum of `count` terms, each |t| <= term, rounded after every add| (a strict sum, or a
        state stored every step): the fold A <- round(A + term), which once it stops growing never grows again.
        `rounded_terms`: each term is itself a rounded value."""
        term = np.asarray(term, dtype=np.float64)
        acc = np.zeros_like(term)
        step = self.fmt.round_array(up(term), what) if rounded_terms else up(term)
        for _ in range(count):
            grown = self.fmt.round_array(up(acc + step), what)
            if np.array_equal(grown, acc):
                break
            acc = grown
        return acc

    def softmax_mix(self, v: np.ndarray, count: int, what: str) -> np.ndarray:
        """A bound on |sum_j p_j v_j| for softmax weights p over `count` keys, |v_j| <= v. Theory: a convex
        combination, at most v, but the executor's float64 stand-in, whose weights may sum past 1 and whose sum
        rounds, exceeds it by up to `numbers.float64_softmax_error` (as the proofs widen the read position's head).
        Strict: the fold of `count` terms v, or, when count u < 1/2, the relative bound: the denominator is
        sum_j e_j (1 + theta) with |theta| <= gamma = gamma_count (float additions err only
        relatively; fixed ones not at all), each weight round(e_j / D) <= (e_j / D)(1 + u) + eta, so
        sum_j p_j <= (1 + u) / (1 - gamma) + count eta, and the ordered sum of the rounded products is at most
        ((1 + u) v sum_j p_j + count eta)(1 + gamma)."""
        if not self.strict:
            return up(np.asarray(v, dtype=np.float64) * up(1 + float64_softmax_error(count, 1)))
        folded = self.long_total(v, count, what)
        u, eta = float(self.fmt.unit), float(self.fmt.eta)
        if count * u >= 0.5:
            return folded
        gamma = float(up(up(count * u) / np.nextafter(1 - count * u, 0)))
        weights = up(up(up(1 + u) / np.nextafter(1 - gamma, 0)) + up(count * eta))
        relative = up(up(up(up(1 + u) * up(v * weights)) + up(count * eta)) * up(1 + gamma))
        return np.minimum(folded, self.fmt.round_array(up(relative), what))

    def dot(self, B: np.ndarray, W: np.ndarray, b: np.ndarray, what: str) -> np.ndarray:
        """A bound on |x W + b| (as the semantics computes it) for |x| <= B."""
        W = np.abs(W)
        rows = np.flatnonzero(W.any(axis=1))
        with np.errstate(over="ignore"):  # an infinite bound is refused where it is used
            terms = B[rows, None] * W[rows]  # [rows, out]
        if self.strict:
            out = self.total(terms.T, what)
            return self.fmt.round_array(up(out + np.abs(b)), what) if np.any(b) else out
        return up(self.total(np.concatenate([terms.T, np.abs(b)[:, None]], axis=1), what))


def network_ranges(fmt: Format, strict: bool, arrays: dict, structure: dict, tokens: int, length: int) -> list[float]:
    """Check that no value overflows at any of `length` positions for any of the token ids [0, tokens); return the
    largest residual bound after each layer. `arrays` are rounded to the format."""
    r = Ranges(fmt, strict)
    W_E, W_pos = arrays["embed.W_E"][:tokens], arrays["pos_embed.W_pos"][:length]
    B = r.stored(up(np.abs(W_E).max(axis=0) + np.abs(W_pos).max(axis=0)), "the embedding")
    token_dirs = W_E.any(axis=0)
    written = np.zeros(B.size, bool)
    largest = []
    for l, spec in enumerate(structure["layers"]):
        p = f"blocks.{l}.attn"
        w = {k: arrays[f"{p}.{k}"] for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")}
        heads = []
        for h in range(w["W_Q"].shape[0]):
            q = r.inside(r.dot(B, w["W_Q"][h], w["b_Q"][h], f"{p} queries"), f"{p} queries")
            k = r.inside(r.dot(B, w["W_K"][h], w["b_K"][h], f"{p} keys"), f"{p} keys")
            v = r.inside(r.dot(B, w["W_V"][h], w["b_V"][h], f"{p} values"), f"{p} values")
            if spec["mixer"] == "linear":
                require(not spec.get("normalize"), f"{p}: the checker knows linear attention without a normaliser")
                key_rows = w["W_K"][h].any(axis=1)
                exact_keys = None
                if not (key_rows & (token_dirs | written)).any():  # keys read position-only directions
                    exact_keys = np.abs(affine(W_pos, w["W_K"][h], w["b_K"][h], fmt, strict, f"{p} keys"))
                mixed = _linear_read(r, q, k, v, exact_keys, length, p)
            else:
                require(spec["mixer"] in ("attention", "block_sparse"), f"{p}: the checker has no range argument for "
                                                                         f"{spec['mixer']!r} layers")
                if spec["mixer"] == "block_sparse":  # a summary is a mean of keys: an ordered sum, then divided
                    if strict:
                        summary = r.long_total(k, int(spec["block"]), f"{p} block sums")
                    else:  # the mean of a block's keys, summed in float64 before the division
                        summary = k
                        r.inside(k * int(spec["block"]), f"{p} block sums")
                    r.inside(r.total(q * summary, f"{p} block scores"), f"{p} block scores")
                scores = r.inside(r.total(q * k, f"{p} scores"), f"{p} scores")
                if strict:
                    r.stored(2 * scores, f"{p} score differences")
                    r.long_total(np.ones(1), length, f"{p} softmax denominators")
                mixed = r.softmax_mix(v, length, f"{p} mixed values")
            heads.append(r.stored(r.dot(mixed, w["W_O"][h], np.zeros(B.size), f"{p} head output"), f"{p} head output"))
        attn = r.stored(r.total(np.concatenate([np.stack(heads, axis=1), np.abs(w["b_O"])[:, None]], axis=1),
                                f"{p} attention output"), f"{p} attention output")
        attn_dirs = w["W_O"].any(axis=(0, 1)) | (w["b_O"] != 0)
        B = np.where(attn_dirs, r.stored(up(B + attn), f"{p} residual stream"), B)
        written |= attn_dirs
        if spec.get("mlp"):
            mlp = {k: arrays[f"blocks.{l}.mlp.{k}"] for k in ("W_in", "b_in", "W_out", "b_out")}
            B, mlp_dirs = _mlp_ranges(r, mlp, B, f"blocks.{l}.mlp")
            written |= mlp_dirs
        largest.append(float(B.max(initial=0.0)))
    r.dot(B, arrays["unembed.W_U"], arrays["unembed.b_U"], "the logits")
    return largest


def _linear_read(r: Ranges, q, k, v, exact_keys, length: int, p: str) -> np.ndarray:
    """A bound on a linear head's read-out S^T phi(q) (|phi(y)| <= |y| for both feature maps)."""
    if exact_keys is None:
        state = r.long_total(np.outer(k, v), length, f"{p} states", rounded_terms=r.strict)
    else:
        state = np.zeros((k.size, v.size))
        for j in np.flatnonzero(exact_keys.any(axis=1)):
            term = np.outer(exact_keys[j], v)
            term = r.fmt.round_array(up(term), f"{p} states") if r.strict else up(term)
            state = r.fmt.round_array(up(state + term), f"{p} states")  # the state is stored every step
    return r.inside(r.total((q[:, None] * state).T, f"{p} read-outs"), f"{p} read-outs")


def _mlp_ranges(r: Ranges, mlp: dict, B: np.ndarray, p: str) -> tuple[np.ndarray, np.ndarray]:
    W_in, b_in, W_out, b_out = mlp["W_in"], mlp["b_in"], mlp["W_out"], mlp["b_out"]
    hidden = r.inside(r.dot(B, W_in, b_in, f"{p} hidden units"), f"{p} hidden units")  # relu never grows one
    if not r.strict:  # every column, read or not, before the store (strict rounds, and bounds, each below)
        r.inside(r.dot(hidden, W_out, b_out, f"{p} outputs"), f"{p} outputs")
    out_dirs = W_out.any(axis=0) | (b_out != 0)
    new = B.copy()
    for d in np.flatnonzero(out_dirs):
        units = np.flatnonzero(W_out[:, d])
        inputs = np.flatnonzero(W_in[:, units].any(axis=1))
        if inputs.size == 1 and all(np.count_nonzero(W_in[:, h]) == 1 for h in units):
            f = int(inputs[0])
            new[d] = one_input_range(r, tuple(W_in[f, units].tolist()), tuple(b_in[units].tolist()),
                                     tuple(W_out[units, d].tolist()), float(b_out[d]), float(B[f]), float(B[d]), d == f,
                                     f"{p} output {d}")
        else:
            # Under strict the fold must follow the executor's order term by term; merging a twin pair into one
            # position would drop the other's term from its place (small terms absorbed before it, not after).
            size = np.abs(W_out[units, d]) if r.strict else _twin_weights(W_in, b_in, W_out[:, d], units)
            out = r.stored(r.dot(hidden[units], size[:, None], b_out[d:d + 1], f"{p} output"), f"{p} output")
            new[d] = r.stored(up(B[d] + out[0]), f"{p} residual stream")
    return new, out_dirs


def _twin_weights(W_in, b_in, w_out, units) -> np.ndarray:
    """|w_out| per unit, except that of two bias-free units reading negated columns (relu(z) and relu(-z), never
    both positive) only the larger weight counts, once (a bound on an exact sum, in any order: theory only)."""
    size = np.abs(w_out[units])
    seen = {}
    for position, h in enumerate(units):
        column = W_in[:, h]
        if b_in[h] or not column.any():
            continue
        first = column[np.flatnonzero(column)[0]]
        key = tuple((column * np.sign(first)).tolist())
        if key in seen and seen[key][1] != np.sign(first):
            other = seen.pop(key)[0]
            size[other], size[position] = max(size[other], size[position]), 0.0
        else:
            seen[key] = (position, np.sign(first))
    return size


def one_input_range(r: Ranges, w_in: tuple, b_in: tuple, w_out: tuple, b_out: float, B_f: float, B_d: float,
                    same: bool, what: str) -> float:
    """A bound on |x[d] + MLP(x)[d]| when the MLP's units writing d (weights w_in, b_in, w_out) read x[f] alone,
    |x[f]| <= B_f, |x[d]| <= B_d, `same`: d = f (module docstring).

    Exactly, g(y) = [d = f] y + sum_h w_out[h] relu(w_in[h] y + b_in[h]) + b_out, plus x[d] (|x[d]| <= B[d]) when
    d != f: piecewise linear in y = x[f], so its extremes over [-B[f], B[f]] sit at the ends or at kinks. Every
    rounding step errs by at most u |value| + eta; `error` bounds their sum, each unit's errors passing through
    relu (1-Lipschitz) and its output weight."""
    fmt = r.fmt
    span = Fraction(B_f)
    kinks = [-Fraction(b) / Fraction(a) for a, b in zip(w_in, b_in)]
    points = [-span, span] + [y for y in kinks if -span < y < span]

    def partial(y: Fraction, units: int) -> Fraction:
        """The exact sum of the first `units` output terms at x[f] = y."""
        return sum((Fraction(c) * max(Fraction(a) * y + Fraction(b), Fraction(0))
                    for a, b, c in zip(w_in[:units], b_in[:units], w_out[:units])), Fraction(0))

    def g(y: Fraction) -> Fraction:
        return Fraction(b_out) + (y if same else 0) + partial(y, len(w_out))

    exact = max(abs(g(y)) for y in points) + (0 if same else Fraction(B_d))
    u, eta = fmt.unit, fmt.eta
    size = [abs(Fraction(a)) * span + abs(Fraction(b)) for a, b in zip(w_in, b_in)]  # |pre-activation|
    if r.strict:
        # each unit: the product and the bias add; then the output dot (k products and adds), its bias, the residual
        unit_error = [(2 * u + u * u) * s + (2 + u) * eta for s in size]
        out_size = sum(abs(Fraction(c)) * (s + e) for c, s, e in zip(w_out, size, unit_error)) + abs(Fraction(b_out))
        k = 2 * len(size) + 1
        error = (sum(abs(Fraction(c)) * e for c, e in zip(w_out, unit_error))
                 + ((1 + u) ** k - 1) * out_size + k * (1 + u) ** k * eta)
        # That error model holds only while every step stays in range: an overflowing product or partial sum (an
        # inf) does not cancel however small the exact total. So each product, and each partial sum of the output
        # dot in the executor's unit order, must be a value the format holds: its exact extreme (piecewise linear
        # again, extremes at the same points) plus `error`, which bounds every prefix's accumulated rounding.
        for c, s, e in zip(w_out, size, unit_error):
            fmt.ceil(abs(Fraction(c)) * (s + e) * (1 + u) + eta, f"{what}: a product")
        for units in range(2, len(w_out) + 1):
            fmt.ceil(max(abs(partial(y, units)) for y in points) + error, f"{what}: a partial sum")
    else:  # exact inside the MLP; its output is stored, then the residual sum
        out_size = sum(abs(Fraction(c)) * s for c, s in zip(w_out, size)) + abs(Fraction(b_out))
        error = u * out_size + eta
    # The MLP's output is stored before the residual add: where d = f it can exceed the residual's bound by |y|.
    fmt.ceil(max(abs(Fraction(b_out) + partial(y, len(w_out))) for y in points) + error, f"{what}: the MLP output")
    total = exact + error
    return float(fmt.ceil(total + u * total + eta, what))  # the residual add, stored
