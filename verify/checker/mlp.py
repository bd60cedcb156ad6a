"""An MLP evaluated exactly on every format value of a box: the proof that a fetched interval gives one exact output.

For one output direction d, resid_post[d] = store(resid_mid[d] + store(relu(resid_mid W_in + b_in) W_out + b_out)[d]).
At most one coordinate f of the box that the units writing d read (or d itself) may vary; the others are points.
The format values of [lo_f, hi_f] fall into runs k * q, k0 <= k <= k1, of one quantum q (`Format.segments`), and on
a run every intermediate value is an affine form a k + b with exact rational coefficients:

* a rounding step (every multiply and add under `strict`; the stores under both semantics) is accepted only where it
  is provably exact for every k of the run: a and b are multiples of 2^g and every multiple of 2^g up to the largest
  magnitude on the run is a format value; then round(a k + b) = a k + b. A point (a = 0, or k0 = k1) is rounded
  exactly. Anything else is refused: the output would need more than this argument;
* relu of an affine form is 0 where the exact form is <= 0 and the form itself where it is > 0 (rounding is
  monotone and round(0) = 0, so the rounded pre-activation has the same sign); a run on which the form changes sign
  is split at its root;
* the output must come out constant on every run, and equal on all of them: that value is resid_post[d].

Under `theory` the executor stands in float64 for the exact inside of the block, so a theory verdict about it needs
the float64 sums to be the exact ones: each unit's pre-activation (its products and bias) and the output's sum (its
units' products and bias) must be exact in float64 for every k of the run, in any order of summation. That holds
when every term is a multiple of 2^g (a k + b with a, b multiples of 2^g, g >= -1074) and the terms' magnitudes
sum to less than 2^(g+53): every product and partial sum is then an integer multiple of 2^g below 2^(g+53) in
magnitude, a float64. An affine term's largest magnitude on the run is at one of its ends. Units writing nothing
the proof reads may round in float64; `ranges` shows they stay finite, so their zero output weights give zeros.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from verify.checker.numbers import Format, float64_sums_exactly, valuation
from verify.checker.refusal import require


class Affine:
    __slots__ = ("a", "b")

    def __init__(self, a: Fraction, b: Fraction):
        self.a, self.b = a, b

    def at(self, k: int) -> Fraction:
        return self.a * k + self.b

    def plus(self, other: Affine) -> Affine:
        return Affine(self.a + other.a, self.b + other.b)

    def times(self, w: Fraction) -> Affine:
        return Affine(self.a * w, self.b * w)


class MLP:
    """One layer's MLP, as sparse columns of rounded weights (built from dense arrays by `from_dense`):
    `unit_inputs[h]` = [(direction, W_in[direction, h])] and `writers[d]` = [(h, W_out[h, d])], both in index order,
    `b_in[h]`, `b_out[d]` (missing: 0)."""

    def __init__(self, fmt: Format, strict: bool, unit_inputs: dict, b_in: dict, writers: dict, b_out: dict,
                 what: str):
        self.fmt, self.strict, self.what = fmt, strict, what
        self.unit_inputs, self.b_in, self.writers, self.b_out = unit_inputs, b_in, writers, b_out
        self.cache: dict = {}

    @staticmethod
    def from_dense(fmt: Format, strict: bool, W_in, b_in, W_out, b_out, what: str) -> MLP:
        unit_inputs = {int(h): [(int(i), float(W_in[i, h])) for i in np.flatnonzero(W_in[:, h])]
                       for h in range(W_in.shape[1])}
        writers = {int(d): [(int(h), float(W_out[h, d])) for h in np.flatnonzero(W_out[:, d])]
                   for d in np.flatnonzero(W_out.any(axis=0))}
        return MLP(fmt, strict, unit_inputs, {int(h): float(b_in[h]) for h in np.flatnonzero(b_in)}, writers,
                   {int(d): float(b_out[d]) for d in np.flatnonzero(b_out)}, what)

    def inputs(self, d: int) -> list[int]:
        """The directions the units writing d read, in index order."""
        return sorted({i for h, _ in self.writers.get(d, ()) for i, _ in self.unit_inputs.get(h, ())})

    def output(self, d: int, lo, hi) -> Fraction:
        """resid_post[d], one exact value for every format value of resid_mid in the box [lo, hi] (anything indexable
        by direction). Outputs whose units, weights and input intervals agree up to renaming share one evaluation."""
        relevant = sorted(set(self.inputs(d)) | {d})
        local = {i: k for k, i in enumerate(relevant)}
        units = tuple((tuple((local[i], w) for i, w in self.unit_inputs.get(h, ())), self.b_in.get(h, 0.0), w_out)
                      for h, w_out in self.writers.get(d, ()))
        box = tuple((float(lo[i]), float(hi[i])) for i in relevant)
        key = (units, self.b_out.get(d, 0.0), box, local[d])
        if key not in self.cache:
            self.cache[key] = self._output(units, key[1], [(Fraction(a), Fraction(b)) for a, b in box], local[d])
        return self.cache[key]

    def _output(self, units, b_out: float, box: list, d: int) -> Fraction:
        varying = [i for i, (a, b) in enumerate(box) if a != b]
        require(len(varying) <= 1, f"{self.what}: an output depends on {len(varying)} fetched coordinates; the "
                                   f"argument handles one")
        if varying:
            f = varying[0]
            runs = self.fmt.segments(*box[f])
        else:
            f, runs = None, [(Fraction(1), 0, 0)]
        require(runs, f"{self.what}: an empty input interval")

        def value(i: int, q: Fraction) -> Affine:
            return Affine(q, Fraction(0)) if i == f else Affine(Fraction(0), box[i][0])

        results = set()
        for q, k0, k1 in runs:
            results |= self._run(units, b_out, d, value, q, k0, k1)
        require(len(results) == 1, f"{self.what}: an output takes {len(results)} values over the fetched interval")
        return results.pop()

    def _round(self, form: Affine, k0: int, k1: int) -> Affine:
        fmt = self.fmt
        if form.a == 0 or k0 == k1:
            return Affine(Fraction(0), fmt.round(form.at(k0), f"{self.what} value"))
        require(all(c.denominator & (c.denominator - 1) == 0 for c in (form.a, form.b)),
                f"{self.what}: a non-dyadic intermediate value")
        ends = (form.at(k0), form.at(k1))
        g = min(v for v in (valuation(form.a), valuation(form.b)) if v is not None)
        largest = max(abs(v) for v in ends)
        require(fmt.lowest <= min(ends) and max(ends) <= fmt.largest, f"{self.what}: an intermediate value overflows")
        if fmt.kind == "float":
            exact = g >= fmt.emin - fmt.mantissa and largest <= Fraction(2) ** (g + fmt.mantissa + 1)
        else:
            exact = g >= -fmt.fraction
        require(exact, f"{self.what}: a step ({float(form.a):.6g} k + {float(form.b):.6g}, k in [{k0}, {k1}]) is not "
                       f"exact on every format value of its input interval")
        return form

    def _float64_exact(self, terms: list[Affine], k0: int, k1: int) -> None:
        """Refuse unless every order of summing `terms` in float64 is exact for every k in [k0, k1] (module
        docstring, theory)."""
        valuations = [v for t in terms for v in (valuation(t.a), valuation(t.b)) if v is not None]
        if not valuations:
            return
        g = min(valuations)
        size = sum((max(abs(t.at(k0)), abs(t.at(k1))) for t in terms), Fraction(0))
        require(float64_sums_exactly(g, size),
                f"{self.what}: a sum inside the MLP is not exact in float64, the executor's stand-in for theory's "
                f"exact arithmetic (terms down to 2^{g}, magnitudes up to {float(size):.6g})")

    @staticmethod
    def _pre_activation(inputs, b_in: float, value, q: Fraction, step) -> Affine:
        """A unit's pre-activation with every rounding step applied but the last, which `_run` applies only where
        relu passes the value on (sign(round(y)) is sign(y) or 0, so relu(round(y)) = 0 whenever y <= 0)."""
        pieces = [(value(i, q).times(Fraction(w)), True) for i, w in inputs]
        if b_in:
            pieces.append((Affine(Fraction(0), Fraction(b_in)), False))
        if not pieces:
            return Affine(Fraction(0), Fraction(0))
        acc = None
        for position, (piece, is_product) in enumerate(pieces):
            last = position == len(pieces) - 1
            if is_product and not (last and acc is None):
                piece = step(piece)
            acc = piece if acc is None else acc.plus(piece)
            if not last and position > 0:
                acc = step(acc)
        return acc

    def _run(self, units, b_out: float, d: int, value, q: Fraction, k0: int, k1: int) -> set[Fraction]:
        strict = self.strict
        step = (lambda form: self._round(form, k0, k1)) if strict else (lambda form: form)
        hidden = []
        for inputs, b_in, _ in units:
            if not strict:
                self._float64_exact([value(i, q).times(Fraction(w)) for i, w in inputs]
                                    + [Affine(Fraction(0), Fraction(b_in))], k0, k1)
            pre = self._pre_activation(inputs, b_in, value, q, step)
            low, high = pre.at(k0), pre.at(k1)
            if min(low, high) < 0 < max(low, high):  # the exact form crosses zero inside the run: split there
                root = math.floor(-pre.b / pre.a)
                return (self._run(units, b_out, d, value, q, k0, root)
                        | self._run(units, b_out, d, value, q, root + 1, k1))
            hidden.append(Affine(Fraction(0), Fraction(0)) if max(low, high) <= 0 else step(pre))
        out = None
        for (_, _, w_out), unit in zip(units, hidden):
            term = step(unit.times(Fraction(w_out)))
            out = term if out is None else step(out.plus(term))
        out = out or Affine(Fraction(0), Fraction(0))
        if not strict:
            self._float64_exact([unit.times(Fraction(w_out)) for (_, _, w_out), unit in zip(units, hidden)]
                                + [Affine(Fraction(0), Fraction(b_out))], k0, k1)
        if b_out or not strict:
            out = self._round(out.plus(Affine(Fraction(0), Fraction(b_out))), k0, k1)  # the bias add / the store
        total = self._round(value(d, q).plus(out), k0, k1)  # the residual add, stored
        require(total.a == 0, f"{self.what}: an output still depends on the fetched value after the MLP")
        return {total.b}
