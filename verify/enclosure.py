"""Sound, rounding-aware arithmetic for the certifier: enclosures of exact and of rounded results.

Two facts carry everything here.

* Rounding to nearest is monotone, so if the exact value x lies in [lo, hi] then round(x) lies in
  [round(lo), round(hi)]; and a format value y >= lo satisfies y >= round(lo) (round(lo) is the nearest one).
* One float64 +, -, x of float64 values is within one float64 ulp of the exact result, and is the exact result
  when the error-free transformations (TwoSum, Veltkamp's TwoProduct) report a zero error. So every float64 step
  below is widened outward by one ulp unless it is proven exact.

`Rounding` wraps a format (`witness.arith.formats`) and a semantics: under `strict` every operation inside a block
is rounded, under `theory` only the vectors leaving a block (`store`). `Affine` values (a*k + b over an integer range
of k, exact rationals) let a block be evaluated exactly on every format value of an interval at once: an operation
whose result is representable for every k is exact, which the grid of the result (a power of two dividing every
value) and its largest magnitude decide.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from witness.arith.formats import Fixed, Float
from witness.errors import OverflowInFormat

#: Relative error allowed for numpy's float64 exp, with a wide margin (measured error is below 2^-52).
EXP_RELATIVE_ERROR = 2.0 ** -40
_F64_UNIT = 2.0 ** -53


class Unknown(Exception):
    """An assumption of the certifier does not hold; the message says which. The verdict is then `unknown`."""


def down(x):
    return np.nextafter(x, -np.inf)


def up(x):
    return np.nextafter(x, np.inf)


def _split(a):
    c = 134217729.0 * a
    high = c - (c - a)
    return high, a - high


def exact_sum(a, b, s):
    """Whether s = fl64(a + b) is exact (TwoSum)."""
    bb = s - a
    return ((a - (s - bb)) + (b - bb)) == 0


def exact_product(a, b, p):
    """Whether p = fl64(a * b) is exact (Veltkamp splitting; values far from overflow and underflow)."""
    ah, al = _split(a)
    bh, bl = _split(b)
    return (((ah * bh - p) + ah * bl + al * bh) + al * bl) == 0


def enclose(r, exact):
    """[lo, hi] around the exact result of one float64 step r; a point where the step was exact."""
    return np.where(exact, r, down(r)), np.where(exact, r, up(r))


def gamma(count: int, unit: float) -> float:
    """Higham's gamma_count = count*u / (1 - count*u), rounded up: the relative error bound of a count-term sum."""
    if count * unit >= 0.5:
        raise Unknown(f"a {count}-term sum is too long for a relative error bound at unit roundoff {unit:g}")
    return float(up(count * unit / (1 - count * unit))) * (1 + 2.0 ** -40)


def two_adic(values: np.ndarray) -> int | None:
    """The largest g with every entry a multiple of 2^g (None when every entry is zero)."""
    nonzero = np.abs(values[values != 0])
    if nonzero.size == 0:
        return None
    mantissa, exponent = np.frexp(nonzero)
    integer = np.ldexp(mantissa, 53).astype(np.int64)
    trailing = np.log2((integer & -integer).astype(np.float64)).astype(np.int64)
    return int((exponent - 53 + trailing).min())


class Rounding:
    """A format with a semantics: rounding of arrays, of rationals, and of intervals of exact values."""

    def __init__(self, fmt, semantics: str):
        if not isinstance(fmt, (Float, Fixed)):
            raise Unknown(f"certify reasons about Float and Fixed formats, not {fmt}")
        if semantics not in ("strict", "theory"):
            raise Unknown(f"certify knows the strict and theory semantics, not {semantics!r}")
        self.format = fmt
        self.semantics = semantics
        self.strict = semantics == "strict"
        if isinstance(fmt, Float):
            self.unit = 2.0 ** -(fmt.mantissa + 1)
            self.eta = fmt.smallest_subnormal / 2
            self.limit = fmt.max_finite
        else:
            self.unit = 0.0
            self.eta = 2.0 ** -(fmt.fraction + 1)
            self.limit = fmt.highest

    # -- arrays of exact values ------------------------------------------------------------------------------
    def round(self, values, what: str = "a value") -> np.ndarray:
        try:
            result = self.format.round(values)
        except OverflowInFormat as exc:
            raise Unknown(f"{what} may overflow {self.format.name}: {exc}") from None
        if not np.isfinite(result).all():
            raise Unknown(f"{what} overflows {self.format.name}")
        return result

    def store(self, lo, hi, what: str = "a stored vector"):
        """Enclosure of round(x) for x in [lo, hi]."""
        return self.round(lo, what), self.round(hi, what)

    def op(self, lo, hi, what: str = "an operation"):
        """Enclosure of one operation's result: rounded under strict, exact under theory."""
        return self.store(lo, hi, what) if self.strict else (lo, hi)

    def add(self, alo, ahi, blo, bhi, what: str = "an addition"):
        lo, hi = alo + blo, ahi + bhi
        lo, _ = enclose(lo, exact_sum(alo, blo, lo))
        _, hi = enclose(hi, exact_sum(ahi, bhi, hi))
        return self.op(lo, hi, what)

    def scale(self, alo, ahi, w, what: str = "a product"):
        """Enclosure of x * w for x in [alo, ahi] and a point w."""
        p1, p2 = alo * w, ahi * w
        l1, h1 = enclose(p1, exact_product(alo, w, p1))
        l2, h2 = enclose(p2, exact_product(ahi, w, p2))
        return self.op(np.minimum(l1, l2), np.maximum(h1, h2), what)

    def matmul(self, lo, hi, W, what: str = "a matmul"):
        """Enclosure of x @ W for x in [lo, hi] [..., d] and point weights W [d, k], accumulated in index order."""
        acc_lo = acc_hi = None
        for i in range(W.shape[0]):
            w = W[i]
            if not w.any():
                continue  # a zero product adds an exact zero
            plo, phi = self.scale(lo[..., i:i + 1], hi[..., i:i + 1], w, what)
            plo, phi = np.where(w == 0, 0.0, plo), np.where(w == 0, 0.0, phi)
            if acc_lo is None:
                acc_lo, acc_hi = plo, phi
            else:
                acc_lo, acc_hi = self.add(acc_lo, acc_hi, plo, phi, what)
        if acc_lo is None:
            zero = np.zeros(lo.shape[:-1] + (W.shape[1],))
            return zero, zero
        return acc_lo, acc_hi

    def add_bias(self, lo, hi, bias, what: str = "a bias"):
        return self.add(lo, hi, bias, bias, what) if np.any(bias) else (lo, hi)

    def point_dot(self, A: np.ndarray, B: np.ndarray, rounded: bool, A_radius: np.ndarray | None = None):
        """Enclosure of A @ B (A [m, d] with optional radius, B [d, k] points) by float64 BLAS plus an error bound.

        `rounded`: the result is the index-order, every-step-rounded dot product of the format (strict); else
        the exact one (under `theory`, `rounded` gives an enclosure of both). When every entry sits on a
        power-of-two grid and the largest partial sum fits the format's significand, every step is exact and the
        enclosure is a point.
        """
        depth = A.shape[-1]
        D = A @ B
        magnitude = np.abs(A) @ np.abs(B)
        grid_a, grid_b = two_adic(A), two_adic(B)
        largest = float(magnitude.max(initial=0.0))
        if grid_a is None or grid_b is None:
            exact_in_f64, exact_in_format = True, True
        else:
            grid = grid_a + grid_b
            exact_in_f64 = largest <= math.ldexp(1.0, grid + 53) and grid >= -1074 + 60
            exact_in_format = self.grid_holds(grid, largest)
        has_radius = A_radius is not None and A_radius.any()
        if exact_in_f64 and (exact_in_format or not rounded) and not has_radius:
            return D, D
        error = up(A_radius @ np.abs(B)) * (1 + 2.0 ** -40) if has_radius else 0.0
        if not exact_in_f64:
            error = error + magnitude * gamma(depth + 1, _F64_UNIT) + 1e-300
        if rounded and not exact_in_format:
            error = error + magnitude * gamma(depth + 1, self.unit) + 2 * (depth + 1) * self.eta
        error = up(error)
        lo, hi = down(D - error), up(D + error)
        if rounded and self.strict:  # the result is a format value, so it lies between the rounded ends
            return self.round(lo, "a dot product"), self.round(hi, "a dot product")
        return lo, hi

    # -- exact rationals ---------------------------------------------------------------------------------------
    def grid_holds(self, grid: int, largest) -> bool:
        """Whether every multiple of 2^grid of magnitude <= largest is a value of the format."""
        fmt = self.format
        if largest > self.limit:
            return False
        if isinstance(fmt, Float):
            return grid >= fmt.emin - fmt.mantissa and largest <= 2.0 ** (grid + fmt.mantissa + 1)
        return grid >= -fmt.fraction

    def round_rational(self, x: Fraction) -> Fraction:
        """round(x) onto the format, exactly (ties to even); Unknown when it overflows."""
        if x == 0:
            return Fraction(0)
        fmt = self.format
        if isinstance(fmt, Float):
            magnitude = abs(x)
            exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
            while Fraction(2) ** exponent > magnitude:
                exponent -= 1
            while Fraction(2) ** (exponent + 1) <= magnitude:
                exponent += 1
            quantum = Fraction(2) ** (max(exponent, fmt.emin) - fmt.mantissa)
        else:
            quantum = Fraction(1, 2 ** fmt.fraction)
        result = round(x / quantum) * quantum
        if abs(result) > Fraction(self.limit) or (isinstance(fmt, Fixed) and result < fmt.lowest):
            raise Unknown(f"the value {float(x)!r} overflows {fmt.name}")
        return result

    def format_values(self, lo: float, hi: float) -> list[tuple[Fraction, int, int]]:
        """The format values in [lo, hi] as segments (quantum, k0, k1): the values k * quantum, k0 <= k <= k1."""
        fmt = self.format
        if lo > hi:
            return []
        if isinstance(fmt, Fixed):
            quantum = Fraction(1, 2 ** fmt.fraction)
            return [(quantum, math.ceil(Fraction(lo) / quantum), math.floor(Fraction(hi) / quantum))]
        segments = []
        if lo <= 0 <= hi:
            segments.append((Fraction(1), 0, 0))
        for sign, a, b in ((1, max(lo, 0.0), hi), (-1, max(-hi, 0.0), -lo)):
            if b <= 0 or a > b:
                continue
            top = math.frexp(b)[1] - 1
            bottom = max(math.frexp(a)[1] - 1 if a > 0 else fmt.emin - 1, fmt.emin - 1)
            if top - bottom > 64:
                raise Unknown(f"an MLP input ranges over {top - bottom} binades of {fmt.name}")
            for exponent in range(bottom, top + 1):
                quantum = Fraction(2) ** (max(exponent, fmt.emin) - fmt.mantissa)
                start = Fraction(2) ** exponent if exponent >= fmt.emin else Fraction(0)
                first = max(Fraction(a), start)
                last = min(Fraction(b), Fraction(2) ** (exponent + 1))
                k0, k1 = math.ceil(first / quantum), math.floor(last / quantum)
                if k0 <= k1:
                    segments.append((quantum, k0, k1) if sign > 0 else (quantum, -k1, -k0))
        return segments

    def round_affine(self, form: Affine, k0: int, k1: int) -> Affine:
        """round(a*k + b) for every integer k in [k0, k1], as an affine form; Unknown unless provably exact."""
        if form.a == 0 or k0 == k1:
            return Affine(Fraction(0), self.round_rational(form.at(k0)))
        values = (form.at(k0), form.at(k1))
        largest = max(abs(v) for v in values)
        valuations = (_valuation(form.a), _valuation(form.b))
        grid = None if None in valuations else min(valuations)
        if grid is None or not self.grid_holds(grid, largest) or (
                isinstance(self.format, Fixed) and min(values) < self.format.lowest):
            raise Unknown(f"an MLP step ({float(form.a)}*k + {float(form.b)} for k in [{k0}, {k1}]) is not exact on "
                          f"every format value of its input interval")
        return form


def _valuation(x: Fraction) -> int | None:
    """The 2-adic valuation of a dyadic rational (a large number for 0); None when x is not dyadic."""
    if x == 0:
        return 10**9
    if x.denominator & (x.denominator - 1):
        return None
    numerator = abs(x.numerator)
    return (numerator & -numerator).bit_length() - x.denominator.bit_length()


class Affine:
    """a*k + b over integers k, with exact rational coefficients."""

    __slots__ = ("a", "b")

    def __init__(self, a: Fraction, b: Fraction):
        self.a, self.b = Fraction(a), Fraction(b)

    def at(self, k: int) -> Fraction:
        return self.a * k + self.b

    def __add__(self, other: Affine) -> Affine:
        return Affine(self.a + other.a, self.b + other.b)

    def times(self, w: Fraction) -> Affine:
        return Affine(self.a * w, self.b * w)


def exp_upper(x: np.ndarray) -> np.ndarray:
    """An upper bound of exp(x), elementwise."""
    with np.errstate(under="ignore"):
        return up(np.exp(x) * (1 + EXP_RELATIVE_ERROR))
