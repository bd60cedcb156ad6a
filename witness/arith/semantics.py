"""Rounding semantics (conventions §3): `arithmetic(fmt, semantics)` gives the `Arithmetic` the executor runs under.

* `strict` -- low-precision hardware, op by op. Every add, sub, multiply, divide and exp is rounded to the format;
  `matmul` and `sum` accumulate in index order with a rounding after every multiply and every add (vectorised over
  the other axes, a Python loop over the contraction index only); exp is correctly rounded. Bit-for-bit equal to
  the MPFR reference `witness.reference.reference_run` (tested).
  Why float64 is enough: one +, -, x or / of two values of a format with P = mantissa + 1 <= 25 significant bits,
  done in float64 (53 bits) and then rounded, is correctly rounded (53 >= 2P + 2, the innocuous double rounding
  bound), provided float64 neither overflows nor underflows -- true for exponent fields of at most 9 bits. For a
  fixed format with integer + fraction <= 25, products and sums are exact in float64 and a float64 quotient is
  within 2^(I-53) of the true one, closer than any quotient of grid values gets to a rounding midpoint
  (2^-(I+2F+1)); so float64 then grid rounding is again exact. fp64 itself is native float64. Other formats are
  refused for `strict`, with the reason. Speed comes from the rounding (`Float.round_by_adding`: one addition and
  one subtraction on cache-sized chunks) and from the matmul's shortcuts (`StrictArithmetic.matmul`), each argued
  where it is and tested against MPFR in tests/test_strict_matmul.py.
  exp: float64 `np.exp` (long double for fp64) gives a candidate whose error is far below the assumed bound
  `EXP_RELATIVE_ERROR`; where both ends of the candidate's error interval round to the same format value, that
  value is the correctly rounded exp (rounding is monotone); the few entries near a rounding boundary are
  enclosed by MPFR with directed rounding at a precision doubled until both ends round alike (`_exp_enclosed`;
  the MPFR reference `witness.reference`, which the tests compare against, computes its exp its own way).
* `theory` -- CPW's model: every vector leaving a block (`store`: the embedding, each head's output, each block's
  output, the residual stream after each block) is rounded to the format; weights are rounded once. Inside a
  block the model is *exact*; here that is approximated by plain float64 (numpy's own summation order), which is
  not exact. A statement about all inputs under `theory` must come from the sound certifier in `verify`, which
  recomputes margins with rigorous arithmetic; runs under this semantics are a fast approximation of it.
* `mixed` -- GPU-kernel style: weights and every vector leaving a block are stored in the format, while the
  arithmetic inside a block (projections, scores, softmax, dot products) is done in fp32, op by op with index-order
  accumulation (i.e. `strict` at fp32). It needs a format whose values are all fp32 values.

Fixed formats raise `OverflowInFormat` naming the operation and the first offending index. The executor marks
masked attention scores with -inf (outside any format); arithmetic on such an entry is exact in the extended
reals (-inf - top = -inf, exp(-inf) = 0), so in a fixed format it is passed through rather than reported.

The `Exact` format cannot drive the executor and is refused (see `witness.arith.formats`).
"""

from __future__ import annotations

import math

import numpy as np

from witness.arith.base import Arithmetic
from witness.arith.formats import FP32, FP64, Exact, Fixed, Float, Format, parse_format
from fractions import Fraction

import gmpy2

from witness.errors import OverflowInFormat, ParameterError

SEMANTICS = ("strict", "theory", "mixed")

#: Output entries per block of the ordered matmul: its running sums and products (a few arrays of this many
#: float64s) stay in a core's cache across the whole accumulation.
MATMUL_BLOCK = 1 << 15
#: Products (output entries x depth) from which the ordered matmul looks for its shortcuts; a smaller one, such as
#: a recurrence's step, runs the plain loop.
SHORTCUTS_FROM = 1 << 14
#: A bound on the relative error of numpy's float64 exp (measured: under 2^-52), with a wide margin.
EXP_RELATIVE_ERROR = 2.0 ** -40
#: The same for long double exp (x87 80-bit, 64-bit significand; glibc's expl is within a few of its ulps).
LONG_EXP_RELATIVE_ERROR = 2.0 ** -56
_LONG_DOUBLE_IS_EXTENDED = np.finfo(np.longdouble).nmant >= 63


def float64_ops_are_correctly_rounded(fmt: Format) -> bool:
    """Whether one float64 +, -, x, / followed by rounding to `fmt` is the correctly rounded result (see above)."""
    if isinstance(fmt, Float):
        return fmt == FP64 or (fmt.mantissa <= 24 and fmt.exponent <= 9)
    return isinstance(fmt, Fixed) and fmt.integer + fmt.fraction <= 25


def _as_format(fmt: Format | str) -> Format:
    return parse_format(fmt) if isinstance(fmt, str) else fmt


class _Rounded(Arithmetic):
    """Shared by all three semantics: the storage format, to which weights and stored vectors are rounded."""

    def __init__(self, fmt: Format):
        self.format = fmt
        self.format_name = fmt.name
        self.bits = fmt.bits

    def weights(self, a: np.ndarray) -> np.ndarray:
        return self.format.round(a, "weights")

    def store(self, a: np.ndarray) -> np.ndarray:
        return self.format.round(a, "store")


class StrictArithmetic(_Rounded):
    """Every elementary operation rounded to `operations_format` (the format itself for `strict`)."""

    semantics = "strict"

    def __init__(self, fmt: Format):
        super().__init__(fmt)
        self.operations_format = self._operations_format(fmt)

    def store(self, a: np.ndarray) -> np.ndarray:
        """Rounds nothing under `strict`: the executor stores only what an operation of this arithmetic (or
        `weights`, or `store`) produced, a value of the format already (tests/test_strict_matmul.py checks every
        operand of every operation on random networks of every mixer). `mixed` operates in fp32 and stores in
        its format, so there storing rounds."""
        return a if self.operations_format == self.format else self.format.round(a, "store")

    def _operations_format(self, fmt: Format) -> Format:
        if not float64_ops_are_correctly_rounded(fmt):
            raise ParameterError(
                f"strict semantics is implemented for float formats with mantissa <= 24 and exponent <= 9, for "
                f"fp64, and for fixed formats with integer + fraction <= 25 (where float64 then one rounding is "
                f"correctly rounded); {fmt.name} is outside them")
        return fmt

    def _round(self, raw: np.ndarray, operation: str, *operands: np.ndarray) -> np.ndarray:
        fmt = self.operations_format
        # A masked score (-inf) is exact in the extended reals (module docstring). A finite result with an infinite
        # operand (x / inf) is a zero, which rounding leaves as it is: only a non-finite result needs the operands.
        if isinstance(fmt, Fixed) and not np.isfinite(raw).all():
            infinite = np.zeros(raw.shape, dtype=bool)
            for operand in operands:
                infinite |= ~np.isfinite(operand)
            if infinite.any():
                return np.where(infinite, raw, fmt.round(np.where(infinite, 0.0, raw), operation))
        return fmt.round(raw, operation)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            return self._round(np.add(a, b), "add", a, b)

    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            return self._round(np.subtract(a, b), "sub", a, b)

    def mul(self, a: np.ndarray, b: np.ndarray, operation: str = "mul") -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            return self._round(np.multiply(a, b), operation, a, b)

    def div(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return self._round(np.divide(a, b), "div", a, b)

    def relu(self, a: np.ndarray) -> np.ndarray:
        return np.maximum(a, 0.0)

    def exp(self, a: np.ndarray) -> np.ndarray:
        x = np.asarray(a, dtype=np.float64)
        fmt = self.operations_format
        if isinstance(fmt, Fixed):
            infinite = ~np.isfinite(x)
            result = fmt.round(_exp_nearest(np.where(infinite, 0.0, x), fmt), "exp")
            return np.where(infinite, np.exp(x), result)
        return _exp_nearest(x, fmt)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """a @ b (numpy broadcasting), accumulated in index order: acc = a_0 b_0, acc = acc + a_k b_k.

        Rows and columns of `b` that are zero everywhere are skipped when `a` is finite: their products are exact
        zeros, and adding an exact zero changes nothing but, possibly, the sign of a zero sum. (Constructions
        have sparse weights, so this is most of the work.) Two shortcuts give the same values by argument, not by
        running the loop: a matmul in which no rounding can happen is float64's own (`_rounds_nothing`), and for
        formats of at most 11 significant bits the loop runs in float32 (`_float32_suffices`). Like the skipped
        rows, both may give a zero sum the other sign; a signed zero is equal to the other one in every
        comparison, every later sum with a nonzero term, and exp, and the executor divides only by sums of exps.
        """
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        finite = bool(np.isfinite(a).all() and np.isfinite(b).all())
        if a.ndim >= 2 and b.ndim >= 2 and finite:
            nonzero = b != 0
            rows = np.flatnonzero(nonzero.any(axis=tuple(i for i in range(b.ndim) if i != b.ndim - 2)))
            columns = np.flatnonzero(nonzero.any(axis=tuple(range(b.ndim - 1))))
            if rows.size < b.shape[-2] or columns.size < b.shape[-1]:
                shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
                result = np.zeros(shape)
                if rows.size:
                    result[..., columns] = self._ordered_matmul(a[..., rows], b[..., rows, :][..., columns], True)
                return result
        return self._ordered_matmul(a, b, finite)

    def _ordered_matmul(self, a: np.ndarray, b: np.ndarray, finite: bool) -> np.ndarray:
        """The ordered accumulation, computed block by block of output entries so that each block's running sums
        stay in the processor's cache through all `depth` steps, and along whichever of the output's two axes is
        longer (c = a b is computed as c^T = b^T a^T when a has more rows than b has columns: the same products,
        since x y = y x exactly, added in the same order), so that every step works on long rows. A block is a
        set of whole output entries, so no sum changes its order. A fixed-format overflow is re-raised by the
        plain loop over the whole result, so that its message names the result's first offending entry."""
        depth = a.shape[-1]
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        rows, columns = a.shape[-2], b.shape[-1]
        if depth == 0:
            return np.matmul(a, b)
        if math.prod(batch) * rows * columns * depth < SHORTCUTS_FROM:  # checking would cost more than it saves
            return self._accumulate(a, b)
        if finite and self._rounds_nothing(a, b):
            return np.matmul(a, b)
        narrow = self._float32_suffices(a, b)
        accumulate = self._accumulate if narrow is None else self._accumulate_float32
        left, right = (a, b) if narrow is None else narrow
        if math.prod(b.shape[:-2]) == 1:  # b shared by the whole batch: every row of a is a row of one product
            left = np.broadcast_to(left, batch + (rows, depth)).reshape(1, -1, depth)
            right = right.reshape(1, depth, columns)
        else:
            left = np.broadcast_to(left, batch + (rows, depth)).reshape(-1, rows, depth)
            right = np.broadcast_to(right, batch + (depth, columns)).reshape(-1, depth, columns)
        transposed = left.shape[1] > columns
        if transposed:
            left, right = np.swapaxes(right, 1, 2), np.ascontiguousarray(np.swapaxes(left, 1, 2))
        try:
            result = self._blocks(left, right, accumulate)
        except OverflowInFormat:  # only fixed formats raise, and they never take the float32 path
            self._accumulate(a, b)
            raise
        if transposed:
            result = np.swapaxes(result, 1, 2)
        return result.reshape(batch + (rows, columns))

    @staticmethod
    def _blocks(left: np.ndarray, right: np.ndarray, accumulate) -> np.ndarray:
        """accumulate(left, right) for left [B, r, depth], right [B or 1, depth, c], by blocks of about
        MATMUL_BLOCK output entries (whole rows of c where they fit)."""
        batches, rows, columns = left.shape[0], left.shape[1], right.shape[2]
        block_columns = min(columns, MATMUL_BLOCK)
        block_rows = max(1, min(rows, MATMUL_BLOCK // block_columns))
        block_batches = max(1, MATMUL_BLOCK // (block_rows * block_columns))
        result = np.empty((batches, rows, columns))
        for first in range(0, batches, block_batches):
            batch_part = slice(first, first + block_batches)
            right_part = right if right.shape[0] == 1 else right[batch_part]
            for top in range(0, rows, block_rows):
                row_part = slice(top, top + block_rows)
                for start in range(0, columns, block_columns):
                    column_part = slice(start, start + block_columns)
                    result[batch_part, row_part, column_part] = accumulate(left[batch_part, row_part],
                                                                           right_part[..., column_part])
        return result

    def _accumulate(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """acc = R(a_0 b_0), acc = R(acc + R(a_k b_k)) in float64, rounded by the format after every step."""
        total = self.mul(a[..., :, 0:1], b[..., 0:1, :], "matmul")
        for k in range(1, a.shape[-1]):
            product = self.mul(a[..., :, k:k + 1], b[..., k:k + 1, :], "matmul")
            with np.errstate(invalid="ignore", over="ignore"):
                total = self._round(total + product, "matmul")
        return total

    def _float32_suffices(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """a and b as float32 when the ordered accumulation may run in float32 with the same result, else None.

        When: a float format with mantissa <= 10 and exponent <= 8, and a and b hold float32 values (checked by
        converting back). Then every nonzero product of an entry of a and one of b whose magnitude is at least
        2^-126 (checked: the product of the smallest nonzero magnitudes) is exact in float32 (at most 22
        significant bits), or overflows to inf exactly when the format's rounding of it does (the format's
        largest value is below float32's); each float32 sum of two format values is either exact (a result below
        2^-126 is a multiple of the format's smallest quantum, >= 2^-136, with at most 10 significant bits) or
        float32's correct rounding in its normal range, and rounding that to the format is the format's correct
        rounding of the exact sum because float32's 24 bits are at least 2 (mantissa + 1) + 2 (the innocuous
        double rounding bound of the module docstring).
        """
        fmt = self.operations_format
        if not (isinstance(fmt, Float) and fmt.mantissa <= 10 and fmt.exponent <= 8):
            return None
        narrow = a.astype(np.float32), b.astype(np.float32)
        if not all(np.array_equal(wide, small) for wide, small in zip((a, b), narrow)):
            return None
        if _smallest_nonzero(narrow[0]) * _smallest_nonzero(narrow[1]) < 2.0 ** -126:
            return None
        return narrow

    def _accumulate_float32(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """`_accumulate` in float32 (see `_float32_suffices`), back as float64."""
        fmt = self.operations_format

        def rounded(raw: np.ndarray) -> np.ndarray:  # the sign of a zero is free here (see `matmul`)
            result = fmt.round_by_adding(raw, in_place=True, zero_signs=False)
            return fmt.round(raw.astype(np.float64)).astype(np.float32) if result is None else result

        with np.errstate(invalid="ignore", over="ignore"):
            total = rounded(a[..., :, 0:1] * b[..., 0:1, :])
            product = np.empty_like(total)
            for k in range(1, a.shape[-1]):
                np.multiply(a[..., :, k:k + 1], b[..., k:k + 1, :], out=product)
                total += rounded(product)
                total = rounded(total)
        return total.astype(np.float64)

    def _rounds_nothing(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Whether every product a_ik b_kj and every partial sum of the ordered accumulation is a value of the
        format, so that each rounding is the identity and the result is the exact a @ b, which float64's own
        matmul then computes exactly too (in whatever order it adds: see below).

        The argument: every entry of b is an integer multiple of 2^gb (its lowest set bit) and, as checked, every
        entry of a one of 2^G, so every product and every partial sum is a multiple n 2^g, g = G + gb, bounded in
        magnitude by S = max_ij sum_k |a_ik| |b_kj|. G is the least value for which the format holds all such
        multiples: for a float format G + gb = max(floor(log2 S), emin) - mantissa, so |n| <= S / 2^g <
        2^(mantissa + 1): n has at most mantissa + 1 bits, and the value is on the format's grid wherever its
        quantum is at most 2^g -- in the normal range because its exponent is at most floor(log2 S), below it
        because g >= emin - mantissa; S < max_finite rules out overflow. For a fixed format, g = -fraction, and
        S <= the largest value. S is computed in float64 from nonnegative multiples of 2^g: its partial sums are
        exact until one reaches 2^(53 + g), beyond any bound tested, and never decrease, so the float64 S passes
        a test exactly when the true one does; the same bound keeps float64's matmul exact in any order.
        Multiplying a by 2^-G is exact (a power of two, in range for these formats), so rint finds the entries
        that are not multiples. The only difference from the ordered loop is the sign of a zero sum.

        First the same test on the first batch entry alone: its S is at most the whole S and its gb at least the
        whole gb, so its G is at most the whole G, and an entry that is not a multiple of that power of two is
        not one of the whole G's either: most matmuls that round are turned down there, at a small part of the
        cost. a and b are finite (the caller checks).
        """
        for part_a, part_b in ((a[(0,) * (a.ndim - 2)], b[(0,) * (b.ndim - 2)]), (a, b)):
            gb = _lowest_bit_exponent(part_b)  # the first entry's is at least the whole b's
            bound = float(np.matmul(np.abs(part_a), np.abs(part_b)).max()) if part_a.size and gb is not None else 0
            if bound == 0:  # every product is zero (for the first entry: nothing learned)
                continue
            g = self._grid_exponent(bound)
            if g is None:
                return False
            scaled = part_a * 2.0 ** (gb - g)
            if not np.array_equal(scaled, np.rint(scaled)):
                return False
        return True

    def _grid_exponent(self, bound: float) -> int | None:
        """g = G + gb of `_rounds_nothing` for a bound S on every partial sum, or None when S rules the shortcut
        out (overflow)."""
        fmt = self.operations_format
        if isinstance(fmt, Fixed):
            return -fmt.fraction if bound <= fmt.highest else None
        return max(math.frexp(bound)[1] - 1, fmt.emin) - fmt.mantissa if bound < fmt.max_finite else None

    def sum(self, a: np.ndarray, axis: int) -> np.ndarray:
        """acc = a_0, acc = R(acc + a_k) along `axis`: the ordered matmul with a column of ones, whose products
        a_k 1 = a_k round to themselves (a_k is a value of the format, as every operand here is: see `store`), so
        that a sum gets the matmul's blocks and shortcuts."""
        a = np.asarray(a, dtype=np.float64)
        if a.shape[axis] <= 1:  # no sum, or the one term itself
            return a.sum(axis=axis, keepdims=True)
        moved = np.moveaxis(a, axis, -1)[..., None, :]  # [..., 1, n]
        return np.moveaxis(self.matmul(moved, np.ones((a.shape[axis], 1)))[..., 0, :], -1, axis)


class MixedArithmetic(StrictArithmetic):
    """Weights and block outputs stored in the format; everything inside a block is `strict` fp32."""

    semantics = "mixed"

    def _operations_format(self, fmt: Format) -> Format:
        fits = (isinstance(fmt, Float) and fmt.mantissa <= 23 and fmt.exponent <= 8) or (
            isinstance(fmt, Fixed) and fmt.integer + fmt.fraction <= 23)
        if not fits:
            raise ParameterError(f"mixed semantics accumulates in fp32, so it needs a format whose values are fp32 "
                                 f"values (float mantissa <= 23 and exponent <= 8, or fixed integer + fraction "
                                 f"<= 23); {fmt.name} is not")
        return FP32


class TheoryArithmetic(_Rounded):
    """Weights and every vector leaving a block rounded to the format; float64 inside blocks (see module doc)."""

    semantics = "theory"


def _smallest_nonzero(x: np.ndarray) -> float:
    """The smallest nonzero magnitude in x (inf when there is none), from the magnitudes' bit patterns minus one:
    0 wraps to the largest integer, so it never is the minimum unless every entry is 0."""
    unsigned = np.uint64 if x.dtype == np.float64 else np.uint32
    magnitudes = np.bitwise_and(x.reshape(-1).view(unsigned), unsigned(np.iinfo(unsigned).max >> 1))
    magnitudes -= unsigned(1)
    smallest = magnitudes.min() if magnitudes.size else np.iinfo(unsigned).max
    return float("inf") if smallest == np.iinfo(unsigned).max else float((smallest + unsigned(1)).view(x.dtype))


def _lowest_bit_exponent(x: np.ndarray) -> int | None:
    """The largest g such that every entry of the finite float64 array x is an integer multiple of 2^g; None when x
    is all zero. From the bit patterns: a nonzero entry is s 2^(e - 1075) with s its integer significand (the
    implicit bit set for normal entries, e the biased exponent, 1 for subnormals), so its lowest set bit is at
    e - 1075 + (the number of trailing zero bits of s), read off s & -s converted to float64 (a power of two)."""
    bits = np.bitwise_and(x.reshape(-1).view(np.uint64), np.uint64(0x7FFFFFFFFFFFFFFF))
    bits = bits[bits != 0]
    if bits.size == 0:
        return None
    biased = np.right_shift(bits, np.uint64(52))
    significand = np.bitwise_and(bits, np.uint64((1 << 52) - 1))
    significand |= np.where(biased > 0, np.uint64(1 << 52), np.uint64(0))
    lowest = significand & (~significand + np.uint64(1))
    trailing = np.right_shift(lowest.astype(np.float64).view(np.uint64), np.uint64(52)).astype(np.int64) - 1023
    return int((np.maximum(biased, 1).astype(np.int64) - 1075 + trailing).min())


def _exp_nearest(x: np.ndarray, fmt: Float | Fixed) -> np.ndarray:
    """exp of each entry correctly rounded to `fmt` (for fixed: to the grid, without the range check)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if fmt == FP64 and _LONG_DOUBLE_IS_EXTENDED:
            candidate = np.exp(x.astype(np.longdouble))
            error = np.longdouble(LONG_EXP_RELATIVE_ERROR)  # 1 ± 2^-56 is 1 in float64: widen first
            low = (candidate * (1 - error)).astype(np.float64)
            high = (candidate * (1 + error)).astype(np.float64)
        elif fmt == FP64:  # no wider type to check against: every non-trivial entry goes to MPFR
            low, high = np.exp(x), np.where((x == 0) | ~np.isfinite(x), np.exp(x), np.nan)
        else:
            candidate = np.exp(x)
            low = _nearest(candidate * (1 - EXP_RELATIVE_ERROR), fmt)
            high = _nearest(candidate * (1 + EXP_RELATIVE_ERROR), fmt)
    result = np.where(low == high, low, np.nan)
    undecided = (low != high) & ~np.isnan(x)
    if undecided.any():
        arguments, where = np.unique(x[undecided], return_inverse=True)
        result[undecided] = np.array([_exp_enclosed(float(v), fmt) for v in arguments])[where.reshape(-1)]
    return result


def _exp_enclosed(x: float, fmt: Float | Fixed) -> float:
    """exp(x) correctly rounded to `fmt`: MPFR encloses it between a rounded-down and a rounded-up value; once both
    round (exactly, as rationals) to the same format value, so does exp(x) (Ziv; exp(x) is irrational for x != 0,
    so doubling the precision ends the loop)."""
    if x == 0:
        return 1.0
    precision = 64
    while True:
        ends = []
        for direction in (gmpy2.RoundDown, gmpy2.RoundUp):
            with gmpy2.context(precision=precision, round=direction):
                ends.append(_round_rational(Fraction(*gmpy2.exp(gmpy2.mpfr(x)).as_integer_ratio()), fmt))
        if ends[0] == ends[1]:
            return ends[0]
        precision *= 2


def _round_rational(q: Fraction, fmt: Float | Fixed) -> float:
    """A positive rational rounded to nearest (ties to even) on the format's grid; inf above a float format's
    range (a fixed format's range is checked by the caller)."""
    if isinstance(fmt, Fixed):
        quantum = Fraction(1, 2 ** fmt.fraction)
    else:
        exponent = q.numerator.bit_length() - q.denominator.bit_length()
        if q < Fraction(2) ** exponent:
            exponent -= 1
        quantum = Fraction(2) ** (max(exponent, fmt.emin) - fmt.mantissa)
    value = round(q / quantum) * quantum
    return float("inf") if isinstance(fmt, Float) and value > fmt.max_finite else float(value)


def _nearest(values: np.ndarray, fmt: Float | Fixed) -> np.ndarray:
    """Round to nearest even onto `fmt`; for fixed formats without the range check (the caller checks once)."""
    if isinstance(fmt, Fixed):
        return np.ldexp(np.rint(np.ldexp(values, fmt.fraction)), -fmt.fraction)
    return fmt.round(values)


def arithmetic(fmt: Format | str, semantics: str = "strict") -> Arithmetic:
    """The `Arithmetic` for a format (object or spec such as "fp16", "float:3,4", "fixed:4,4") and a semantics."""
    fmt = _as_format(fmt)
    if isinstance(fmt, Exact):
        raise ParameterError("the exact format cannot be executed in floats (exp of a rational is irrational); "
                             "use it through verify's certifier")
    kinds = {"strict": StrictArithmetic, "theory": TheoryArithmetic, "mixed": MixedArithmetic}
    if semantics not in kinds:
        raise ParameterError(f"unknown semantics {semantics!r}; expected one of {', '.join(SEMANTICS)}")
    return kinds[semantics](fmt)


__all__ = ["arithmetic", "StrictArithmetic", "TheoryArithmetic", "MixedArithmetic",
           "SEMANTICS", "float64_ops_are_correctly_rounded"]
