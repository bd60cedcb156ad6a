"""The checker's arithmetic: number formats, exact rounding, and exponentials enclosed by MPFR.

Every number the checker reasons with is exact, or an enclosure whose direction is stated:

* Exact values are `fractions.Fraction`s, or float64 numbers that are values of the format (every value of a
  format with at most 52 fraction and 11 exponent bits is one), so they convert to Fractions without loss.
* `Format.round` rounds a Fraction to the nearest value, ties to even: the definition. `round_array` is the same
  on float64 inputs, vectorised (scaling by a power of two is exact, and `np.rint` rounds ties to even); the test
  suite compares the two.
* One `strict` operation (+, -, x, /) on two format values is the float64 operation followed by one rounding.
  For fixed formats of at most 25 bits, sums and products are exact in float64; a float64 quotient errs by at most
  2^(I - 53), less than any quotient of two grid values comes to a rounding midpoint (2^-(I + 2F + 1)), so the
  grid rounding is the correct one. For float formats with P = mantissa + 1 <= 25 significant bits and at most 9
  exponent bits, float64 neither overflows nor underflows on them and has 53 >= 2P + 2 bits, so rounding twice is
  innocuous (S. A. Figueroa, "When is double rounding innocuous?", SIGNUM Newsletter 30(3), 1995). fp64 is float64
  itself (IEEE 754 round to nearest even). Other formats are refused for `strict`.
* exp: MPFR rounding down and up gives lo <= e^x <= hi for the rational x (the argument converted in the same
  direction, exp being increasing). The correctly rounded exp of a format value is the common rounding of lo and hi
  once the two agree, at a precision doubled until they do (Ziv's strategy; e^x is irrational for x != 0, so the
  loop ends).
* The float64 stand-in for `theory`: the executor computes the inside of a block in float64, so a theory verdict
  about its runs bounds float64's rounding there too (`float64_softmax_error`). Its exp is numpy's, assumed within
  a relative `FLOAT64_EXP_ERROR` of e^x, the assumption the executor's own exp makes (witness.arith.semantics;
  measured under 2^-52; a test checks the two constants agree).
"""

from __future__ import annotations

import functools
import math
from functools import cached_property
from dataclasses import dataclass
from fractions import Fraction

import gmpy2
import numpy as np

from verify.checker.refusal import Refused, require

#: Bits of precision for exponential bounds (each bound is then rounded outward once more to a float64).
EXP_PRECISION = 256
#: The assumed bound on the relative error of numpy's float64 exp (module docstring).
FLOAT64_EXP_ERROR = Fraction(1, 2 ** 40)


def floor_log2(x: Fraction) -> int:
    """floor(log2 |x|) of a nonzero rational, exactly."""
    n, d = abs(x.numerator), x.denominator
    e = n.bit_length() - d.bit_length()
    if (n << max(-e, 0)) < (d << max(e, 0)):
        e -= 1
    return e


def valuation(x: Fraction) -> int | None:
    """The 2-adic valuation of a dyadic rational (None for 0 or a non-dyadic)."""
    if x == 0 or x.denominator & (x.denominator - 1):
        return None
    n = abs(x.numerator)
    return (n & -n).bit_length() - x.denominator.bit_length()


def float64_sums_exactly(grid: int, size: Fraction) -> bool:
    """Whether float64 adds terms that are multiples of 2^grid, with magnitudes summing to `size`, exactly in every
    order: every partial sum is then such a multiple below 2^(grid + 53) in magnitude (and not below the subnormals'
    grid 2^-1074), hence a float64."""
    return grid >= -1074 and size < Fraction(2) ** (grid + 53)


@dataclass(frozen=True)
class Format:
    """`float` (binary floating point: `mantissa` stored fraction bits, `exponent` bits, subnormals) or `fixed`
    (two's complement on the grid 2^-fraction over [-2^integer, 2^integer - 2^-fraction]); round to nearest even.
    A value that rounds outside the range is an overflow, which the checker refuses."""

    kind: str
    mantissa: int = 0
    exponent: int = 0
    integer: int = 0
    fraction: int = 0

    @property
    def name(self) -> str:
        if self.kind == "fixed":
            return f"fixed:{self.integer},{self.fraction}"
        return PRESET_NAMES.get((self.mantissa, self.exponent), f"float:{self.mantissa},{self.exponent}")

    @property
    def bits(self) -> int:
        return 1 + (self.mantissa + self.exponent if self.kind == "float" else self.integer + self.fraction)

    @property
    def is_fp64(self) -> bool:
        return self.kind == "float" and (self.mantissa, self.exponent) == (52, 11)

    # -- the float parameters ---------------------------------------------------------------------------------
    @property
    def emax(self) -> int:
        return 2 ** (self.exponent - 1) - 1

    @property
    def emin(self) -> int:
        return 1 - self.emax

    @cached_property
    def largest(self) -> Fraction:
        """The largest finite value."""
        if self.kind == "fixed":
            return Fraction(2 ** self.integer) - Fraction(1, 2 ** self.fraction)
        return (2 - Fraction(1, 2 ** self.mantissa)) * Fraction(2) ** self.emax

    @cached_property
    def lowest(self) -> Fraction:
        return -Fraction(2 ** self.integer) if self.kind == "fixed" else -self.largest

    @cached_property
    def limits(self) -> tuple[float, float]:
        """(lowest, largest) as float64 (both are format values, so exactly)."""
        return float(self.lowest), float(self.largest)

    @property
    def unit(self) -> Fraction:
        """u with |round(x) - x| <= u |x| + eta for every x in range."""
        return Fraction(1, 2 ** (self.mantissa + 1)) if self.kind == "float" else Fraction(0)

    @property
    def eta(self) -> Fraction:
        if self.kind == "fixed":
            return Fraction(1, 2 ** (self.fraction + 1))
        return Fraction(2) ** (self.emin - self.mantissa) / 2

    @property
    def supported(self) -> bool:
        """Whether one float64 +, -, x, / of format values followed by `round_array` is the correctly rounded
        result (module docstring): the formats the checker reasons about, under either semantics."""
        if self.kind == "fixed":
            return self.integer + self.fraction <= 25
        return self.is_fp64 or (self.mantissa <= 24 and self.exponent <= 9)

    # -- rounding ---------------------------------------------------------------------------------------------
    def quantum(self, x: Fraction) -> Fraction:
        """The spacing of format values at x (the quantum x rounds to)."""
        if self.kind == "fixed":
            return Fraction(1, 2 ** self.fraction)
        e = floor_log2(x) if x else self.emin
        return Fraction(2) ** (max(e, self.emin) - self.mantissa)

    def round(self, x: Fraction, what: str = "a value") -> Fraction:
        """x rounded to the nearest format value, ties to even; Refused on overflow."""
        x = Fraction(x)
        if x == 0:
            return x
        q = self.quantum(x)
        result = round(x / q) * q  # Fraction.__round__ rounds half to even
        require(self.lowest <= result <= self.largest, f"{what} ({float(x):.6g}) overflows {self.name}")
        return result

    def ceil(self, x: Fraction, what: str = "a bound") -> Fraction:
        """The least format value >= x >= 0."""
        x = Fraction(x)
        require(x >= 0, "ceil is taken of nonnegative bounds")
        q = self.quantum(x)
        result = math.ceil(x / q) * q  # at most the next power of two, itself a format value
        require(result <= self.largest, f"{what} ({float(x):.6g}) may overflow {self.name}")
        return result

    def round_array(self, x, what: str = "a value") -> np.ndarray:
        """Each float64 entry rounded to the nearest format value, ties to even; Refused on overflow or NaN."""
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            if self.kind == "fixed":
                result = np.ldexp(np.rint(np.ldexp(x, self.fraction)), -self.fraction)
            elif self.is_fp64:
                result = x
            elif (self.mantissa, self.exponent) in NATIVE:  # IEEE conversion, round to nearest even
                result = x.astype(NATIVE[self.mantissa, self.exponent]).astype(np.float64)
            else:
                exponent = np.maximum(np.frexp(x)[1] - 1, self.emin) - self.mantissa
                result = np.ldexp(np.rint(np.ldexp(x, -exponent)), exponent)
            low, high = self.limits
            if result.size and not (result.min() >= low and result.max() <= high):  # NaN fails both
                bad = x[~((result >= low) & (result <= high))].ravel()[0]
                raise Refused(f"{what} ({bad:.6g}) overflows {self.name}")
        return result

    def is_value(self, x: np.ndarray) -> bool:
        x = np.asarray(x, dtype=np.float64)
        return bool(np.isfinite(x).all()) and bool(np.array_equal(self.round_array(x), x))

    # -- one operation on format values, correctly rounded (module docstring) -------------------------------------
    def add(self, a, b, what: str = "a sum") -> np.ndarray:
        return self.round_array(np.add(a, b), what)

    def sub(self, a, b, what: str = "a difference") -> np.ndarray:
        return self.round_array(np.subtract(a, b), what)

    def mul(self, a, b, what: str = "a product") -> np.ndarray:
        return self.round_array(np.multiply(a, b), what)

    def div(self, a, b, what: str = "a quotient") -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.round_array(np.divide(a, b), what)

    def exp(self, x: float) -> float:
        """e^x correctly rounded to the format, for a format value x."""
        return _exp_nearest(self, float(x))

    def exp_array(self, x: np.ndarray) -> np.ndarray:
        values, where = np.unique(np.asarray(x, dtype=np.float64), return_inverse=True)
        return np.array([self.exp(v) for v in values])[where.reshape(np.shape(x))]

    # -- the format values of an interval ----------------------------------------------------------------------
    def segments(self, lo: Fraction, hi: Fraction) -> list[tuple[Fraction, int, int]]:
        """The format values in [lo, hi] as runs (quantum, k0, k1): the values k * quantum for k0 <= k <= k1, each
        run inside one binade (one quantum)."""
        lo, hi = max(Fraction(lo), self.lowest), min(Fraction(hi), self.largest)
        if lo > hi:
            return []
        if self.kind == "fixed":
            q = Fraction(1, 2 ** self.fraction)
            return [(q, math.ceil(lo / q), math.floor(hi / q))]
        runs = [(Fraction(1), 0, 0)] if lo <= 0 <= hi else []
        for sign, a, b in ((1, max(lo, Fraction(0)), hi), (-1, max(-hi, Fraction(0)), -lo)):
            if b <= 0 or a > b:
                continue
            top = max(floor_log2(b), self.emin)
            bottom = max(floor_log2(a), self.emin) if a > 0 else self.emin
            for e in range(bottom, top + 1):
                q = Fraction(2) ** (e - self.mantissa)
                start = Fraction(2) ** e if e > self.emin else Fraction(0)
                first, last = max(a, start), min(b, Fraction(2) ** (e + 1))
                k0, k1 = math.ceil(first / q), math.floor(last / q)
                if k0 == 0:
                    k0 = 1  # zero is listed once, above
                if k0 <= k1:
                    runs.append((q, k0, k1) if sign > 0 else (q, -k1, -k0))
        return runs


#: Formats numpy stores natively: its conversion from float64 is the IEEE one (compared with `round` in the tests).
NATIVE = {(10, 5): np.float16, (23, 8): np.float32}

PRESET_NAMES = {(10, 5): "fp16", (7, 8): "bf16", (23, 8): "fp32", (52, 11): "fp64"}


def parse_format(spec) -> Format:
    """`fp16`, `bf16`, `fp32`, `fp64`, `float:M,E` (1 <= M <= 52, 2 <= E <= 11) or `fixed:I,F` (I, F >= 0,
    1 <= I + F <= 52)."""
    require(isinstance(spec, str), f"a format is a string such as 'fp16' or 'float:5,5', not {spec!r}")
    presets = {name: (m, e) for (m, e), name in PRESET_NAMES.items()}
    if spec in presets:
        return Format("float", mantissa=presets[spec][0], exponent=presets[spec][1])
    kind, _, rest = spec.partition(":")
    parts = rest.split(",")
    require(kind in ("float", "fixed") and len(parts) == 2 and all(p.isascii() and p.isdigit() for p in parts),
            f"unknown format {spec!r}")
    a, b = int(parts[0]), int(parts[1])
    if kind == "float":
        require(1 <= a <= 52 and 2 <= b <= 11, f"float formats have 1..52 fraction and 2..11 exponent bits: {spec!r}")
        return Format("float", mantissa=a, exponent=b)
    require(1 <= a + b <= 52, f"fixed formats have 1..52 bits after the sign: {spec!r}")
    return Format("fixed", integer=a, fraction=b)


# -- exponentials ---------------------------------------------------------------------------------------------
def _mpfr(x: Fraction) -> gmpy2.mpfr:
    """x converted in the current context's rounding direction."""
    return gmpy2.mpfr(gmpy2.mpq(x.numerator, x.denominator))


def exp_bounds(x: Fraction, precision: int = EXP_PRECISION) -> tuple[Fraction, Fraction]:
    """lo <= e^x <= hi, exactly representable rationals."""
    return tuple(Fraction(*exp_rounded(x, direction, precision).as_integer_ratio())
                 for direction in (gmpy2.RoundDown, gmpy2.RoundUp))


def exp_rounded(x: Fraction, direction, precision: int = EXP_PRECISION) -> gmpy2.mpfr:
    """e^x rounded down or up (`direction`, gmpy2.RoundDown or RoundUp) to `precision` bits: the argument is
    converted in the same direction, exp being increasing. An mpfr, not a Fraction: e^x for a very negative x is a
    rational of hundreds of millions of bits, which only an exact caller should build."""
    with gmpy2.context(precision=precision, round=direction):
        result = gmpy2.exp(_mpfr(Fraction(x)))
    require(gmpy2.is_finite(result), f"exp({float(x):.6g}) is outside MPFR's range")
    return result


def exp_upper(x: Fraction) -> Fraction:
    return Fraction(*exp_rounded(x, gmpy2.RoundUp).as_integer_ratio())


@functools.lru_cache(maxsize=1 << 16)
def _exp_nearest(fmt: Format, x: float) -> float:
    precision = 64
    while True:
        lo, hi = exp_bounds(Fraction(x), precision)
        low, high = fmt.round(lo, f"exp({x!r})"), fmt.round(hi, f"exp({x!r})")
        if low == high:
            return float(low)
        precision *= 2


def number(x) -> float | str:
    """An exact rational as a proof records it in JSON: a float when it is one exactly, else 'p/q'."""
    x = Fraction(x)
    return float(x) if Fraction(float(x)) == x else f"{x.numerator}/{x.denominator}"


# -- bounds in float64, rounded outward ---------------------------------------------------------------------------
def up(x):
    """The next float64 above each entry: an upper bound on an exact value that float64 rounded to nearest."""
    return np.nextafter(x, np.inf)


def down(x):
    """The next float64 below each entry: a lower bound on an exact value that float64 rounded to nearest."""
    return np.nextafter(x, -np.inf)


def upper_float(x: Fraction) -> float:
    """The least float64 >= x."""
    f = float(x)
    return f if Fraction(f) >= x else float(np.nextafter(f, np.inf))


def lower_float(x: Fraction) -> float:
    """The greatest float64 <= x."""
    f = float(x)
    return f if Fraction(f) <= x else float(np.nextafter(f, -np.inf))


def float64_gamma(k: int) -> Fraction:
    """Higham's gamma_k for float64: |fl(sum of k terms) - sum| <= gamma_k sum |terms|, in any order."""
    u = Fraction(1, 2 ** 53)
    require(k * u < Fraction(1, 2), f"a {k}-term float64 sum is too long for its error bound")
    return k * u / (1 - k * u)


def float64_softmax_error(keys: int, mixed: int) -> float:
    """A relative bound eps, rounded up: |float64 head output - exact head output| <= eps sum_c V_c |W_O[c, d]| for a
    softmax over `keys` exact scores (the maximum subtracted exactly), V_c >= |v_jc| at every key, the head output
    a float64 sum over `mixed` value coordinates. Why: each numerator errs by FLOAT64_EXP_ERROR = E relatively,
    their sum by gamma_keys and each quotient by u = 2^-53, so every weight is pi_j (1 + theta_j) with
    |theta_j| <= theta = (1 + E)(1 + u) / ((1 - E)(1 - gamma_keys)) - 1 (the numerators' common error cancels up
    to the factor (1 +- E)); the mix sum_j p_j v_jc errs by at most V_c (theta + gamma_keys (1 + theta)), and the
    head's sum over c by gamma_mixed sum_c |mix_c| |W_O[c, d]| more, with |mix_c| <= V_c (1 + theta)(1 + gamma_keys)."""
    E, u, g_keys, g_mixed = FLOAT64_EXP_ERROR, Fraction(1, 2 ** 53), float64_gamma(keys), float64_gamma(mixed)
    theta = (1 + E) * (1 + u) / ((1 - E) * (1 - g_keys)) - 1
    # exp and the quotients may land below float64's normal range (s_j - top < -708), where their error is
    # absolute (at most 2^-1074 each), not relative: every weight may then be off by 2^-1073 more, V_c each.
    tiny = Fraction(keys, 2 ** 1072)
    return upper_float(theta + g_keys * (1 + theta) + g_mixed * (1 + theta) * (1 + g_keys) + tiny)
