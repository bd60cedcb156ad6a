"""MPFR (gmpy2) scalars: one Python value per number, one correctly rounded operation of a format per call.

The ground truth for the `strict` semantics, one operation at a time: `tests.oracles.mpfr_reference` runs whole networks with
them, in exactly the operation order that `witness.execute` documents (and that its vectorised `strict` arithmetic
must reproduce bit for bit).

Floats use a gmpy2 context with precision mantissa + 1, the format's exponent range and `subnormalize=True`, so
each gmpy2 operation is one IEEE operation of the format, exp included (MPFR rounds exp correctly). Fixed formats
use exact rationals (`fractions.Fraction`) rounded to the grid with ties to even; a value outside the range
raises OverflowInFormat, and exp is enclosed by MPFR with directed rounding until both ends round to the same
grid point (Ziv's strategy; exp of a non-zero rational is irrational, so this ends).

This module deliberately shares no code with the vectorised semantics (`witness.arith.semantics`) or the executor.
"""

from __future__ import annotations

from fractions import Fraction

import gmpy2
import numpy as np

from witness.arith.formats import Fixed, Float, Format
from witness.errors import OverflowInFormat, ParameterError


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


__all__ = ["float_context", "exp_to_grid", "scalars_for", "FloatScalars", "FixedScalars"]
