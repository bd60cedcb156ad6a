"""Compiled loops (numba) for `strict` arithmetic: rounding to a float or fixed format, and the ordered matmul.

numpy rounds an array in several passes over memory (exponent, constant, add, subtract, sign) and an ordered
matmul in two such roundings per step of the contraction; these loops do each entry's whole computation at once,
in registers. They compute the same function as the definitions they replace, by the arguments in their
docstrings; tests/witness/test_strict_matmul.py and tests/witness/test_strict_reference.py judge them against MPFR and exact
rationals. The kernels take plain numbers (the callers in `witness.arith.formats` and `witness.arith.semantics`
derive them from a format), so this module knows nothing of witness.

Compiled on first use and cached on disk beside this file (numba's `cache=True`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

#: Output entries per stretch of the ordered matmul's inner loop: its running sums (this many float64s) stay in a
#: core's cache while every step of the contraction passes over them.
STRETCH = 1 << 12
#: Output rows per stretch when the inner loop runs down the columns: the stretch's rows of the left factor, copied
#: transposed (depth times this many float64s), and its sums for every column stay in cache.
ROW_STRETCH = 1 << 8

_HALF_FRACTION = 1 << 51  # the fraction field of 1.5 * 2^k


@intrinsic
def _bits(typingctx, x):
    """The bit pattern of a float64, as an int64 (a reinterpretation, no conversion)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def _float(typingctx, pattern):
    """The float64 whose bit pattern is the int64 `pattern`."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@functools.lru_cache(maxsize=None)
def float_parameters(mantissa: int, exponent: int) -> tuple[int, int, int, float]:
    """What `round_float` needs for Float(mantissa, exponent): the shift 52 - mantissa, the lowest and highest
    biased float64 exponents it clamps to (emin + 1023 and emax + 1024), and the largest finite value. Requires
    mantissa <= 50 and exponent <= 10 (see `round_float`)."""
    if not (mantissa <= 50 and exponent <= 10):
        raise ValueError(f"round_float handles mantissa <= 50 and exponent <= 10, not ({mantissa}, {exponent})")
    emax = 2 ** (exponent - 1) - 1
    return 52 - mantissa, 1 - emax + 1023, emax + 1024, float(np.ldexp(2.0 - 2.0 ** -mantissa, emax))


@njit(inline="always")
def round_float(x, shift, lowest, highest, max_finite):
    """x rounded to nearest, ties to even, onto Float(mantissa = 52 - shift, emax = highest - 1024) with its
    subnormals; beyond the largest finite value, ±inf (IEEE overflow); NaN stays NaN; the sign of a zero is kept.

    Why: let e be x's binary exponent (floor(log2|x|); its biased float64 field), clamped to [emin, emax + 1], so
    the format's quantum at x is q = 2^(e - mantissa) (below the normal range, emin's; x = 0 and float64's own
    subnormals read as field 0 and are clamped up). Let C = 1.5 * 2^(e + shift), built from its bit pattern. For
    |x| < 2^(e + 1) <= C/3 (shift >= 2), x + C lies in [2^(e + shift), 2^(e + shift + 1)), where float64's spacing is
    2^(e + shift - 52) = q: so float64's rounded x + C is C plus x rounded to a multiple of q, ties to even (C/q =
    1.5 * 2^52 is even), and subtracting C is exact. A nonzero result has x's sign; a zero one gets it from
    copysign (rounding a negative number to zero gives -0). Past the range: a value that rounds up to
    2^(emax + 1) exceeds max_finite, hence inf; x in [2^(emax + 1), 2^(emax + 2)) is the same argument one binade
    up, and its multiples of q are past max_finite too; for |x| >= 2^(emax + 2) (e clamped at emax + 1, so C <=
    1.5 * 2^(emax + 52)) the addition errs by at most 2^-53 (|x| + C) <= 2^-53 |x| + 1.5 * 2^emax and the
    subtraction by at most 2^-53 of its result, which so stays above |x| (1 - 2^-51) - 1.6 * 2^emax > 2^(emax + 1)
    > max_finite (tested up to 1e300). inf + C - C is inf; NaN stays NaN and fails the comparison. C stays finite
    because (emax + 1024) + shift <= 1535 + 51 < 2047 for exponent <= 10.
    """
    field = min(max((_bits(x) >> 52) & 0x7FF, lowest), highest)
    constant = _float(((field + shift) << 52) | _HALF_FRACTION)
    rounded = math.copysign((x + constant) - constant, x)
    return math.copysign(math.inf, x) if abs(rounded) > max_finite else rounded


@njit(inline="always")
def round_fixed(x, scale, limit):
    """x rounded to the grid 1/scale, ties to even, and whether it lies in the range [-limit, limit - 1] steps:
    scaling by a power of two (scale = 2^fraction) is exact, so rint does the one rounding, and so is scaling the
    integer result back by 1/scale (a power of two too, exact, and computed once per loop); NaN and ±inf are out
    of range. Returns (rounded, in_range), branch-free."""
    steps = np.rint(x * scale)
    return steps * (1.0 / scale), (steps >= -limit) & (steps <= limit - 1)


@njit(cache=True)
def round_float_array(x, out, shift, lowest, highest, max_finite):
    """out[i] = round_float(x[i]) for flat arrays x, out."""
    for i in range(x.size):
        out[i] = round_float(x[i], shift, lowest, highest, max_finite)


@njit(cache=True)
def round_fixed_array(x, out, scale, limit):
    """out[i] = round_fixed(x[i]) for flat arrays; the index of the first entry out of range, or -1 (found by a
    second pass only when some entry is, so that the rounding pass stays branch-free)."""
    inside = True
    for i in range(x.size):
        value, fits = round_fixed(x[i], scale, limit)
        out[i] = value
        inside &= fits
    if not inside:
        for i in range(x.size):
            if not round_fixed(x[i], scale, limit)[1]:
                return i
    return -1


#: How `ordered_matmul` rounds: onto a float format (`round_float`), onto a fixed one (`round_fixed`), or not at
#: all (fp64, whose operations are float64's own).
ROUND_FLOAT, ROUND_FIXED, NO_ROUNDING = 0, 1, 2


def matmul_parameters(rounding: int, float_format: tuple[int, int, int, float] = (0, 0, 0, 0.0),
                      fixed_format: tuple[float, float] = (0.0, 0.0)) -> tuple:
    """`ordered_matmul`'s `parameters`: float_parameters(...) for ROUND_FLOAT, (2^fraction, 2^(integer +
    fraction)) for ROUND_FIXED, one tuple of one type for every rounding."""
    return (rounding, *float_format, *fixed_format)


@njit(inline="always")
def _rounded(x, parameters):
    """(x rounded as `parameters` say, whether it is in range). A fixed format's NaN and ±inf are out of range
    too, so a matmul with a masked score (-inf) goes to the caller's plain loop, which passes them through."""
    rounding, shift, lowest, highest, max_finite, scale, limit = parameters
    if rounding == ROUND_FLOAT:
        return round_float(x, shift, lowest, highest, max_finite), True
    if rounding == ROUND_FIXED:
        return round_fixed(x, scale, limit)
    return x, True


@njit(cache=True)
def ordered_matmul(left, right, parameters, skip_zeros):
    """(out, in_range): out[b] = left[b] @ right[b or 0] (left [B, r, K], right [B or 1, K, c]) accumulated in
    index order with a rounding (`parameters`, from `matmul_parameters`) after every multiply and every add:
    acc = R(l_0 r_0), acc = R(acc + R(l_k r_k)). in_range is false once a fixed format's rounded product or sum has
    left the range or is not finite (the caller then runs the plain loop: its error names the offending entry, and
    it passes masked scores through).

    The inner loop runs along whichever of the output's two axes is longer, a stretch at a time
    (`_along_columns`, `_along_rows`): every output entry still adds its products in index order, and l r = r l
    exactly, so which factor a step holds fixed changes nothing. With `skip_zeros` (every operand finite, the
    caller checks) a step whose fixed factor is zero is skipped and the sum starts from +0: the skipped product is
    an exact zero and adding an exact zero, like starting from +0 (0 + p = p for every format value p), changes
    nothing but, possibly, the sign of a zero sum (see `StrictArithmetic.matmul` for why that sign is free).
    Without it every step runs as defined (an infinite operand times zero is NaN).
    """
    if right.shape[2] >= left.shape[1]:
        return _along_columns(left, right, parameters, skip_zeros)
    return _along_rows(left, right, parameters, skip_zeros)


@njit(inline="always")
def _ordered_sum(total, scalars, rows, offset, count, parameters, skip_zeros):
    """total[:count] = the sum over k of scalars[k] * rows[k, offset:offset + count], in index order with a
    rounding after every multiply and every add (the first product rounded alone), `skip_zeros` as in
    `ordered_matmul`; whether every rounding stayed in range (it stops at the first step that did not)."""
    inside = True
    first = 0
    if skip_zeros:
        total[:count] = 0.0
    else:
        for j in range(count):
            total[j], fits = _rounded(scalars[0] * rows[0, offset + j], parameters)
            inside &= fits
        first = 1
    for k in range(first, scalars.size):
        scalar = scalars[k]
        if skip_zeros and scalar == 0.0:
            continue
        for j in range(count):
            product, fits = _rounded(scalar * rows[k, offset + j], parameters)
            total[j], fits_too = _rounded(total[j] + product, parameters)
            inside &= fits & fits_too
        if not inside:
            return False
    return inside


@njit(cache=True)
def _along_columns(left, right, parameters, skip_zeros):
    """`ordered_matmul` with the inner loop along a row of the output: left[b, i, k] fixed, right[b, k, stretch]
    streamed."""
    batches, rows, depth = left.shape
    columns = right.shape[2]
    out = np.empty((batches, rows, columns))
    for b in range(batches):
        rb = 0 if right.shape[0] == 1 else b
        for i in range(rows):
            for start in range(0, columns, STRETCH):
                stop = min(columns, start + STRETCH)
                if not _ordered_sum(out[b, i, start:stop], left[b, i], right[rb], start, stop - start, parameters,
                                    skip_zeros):
                    return out, False
    return out, True


@njit(cache=True)
def _along_rows(left, right, parameters, skip_zeros):
    """`ordered_matmul` with the inner loop down a column of the output: right[b, k, j] fixed, a stretch of
    left[b, :, k] streamed, from a transposed copy of the stretch's rows of left (in cache) so that it is read
    contiguously; the stretch's sums for every column are written back at the end."""
    batches, rows, depth = left.shape
    columns = right.shape[2]
    out = np.empty((batches, rows, columns))
    stretch = min(rows, ROW_STRETCH)
    block = np.empty((depth, stretch))
    totals = np.empty((columns, stretch))
    for b in range(batches):
        rb = 0 if right.shape[0] == 1 else b
        for start in range(0, rows, stretch):
            count = min(rows, start + stretch) - start
            for i in range(count):
                for k in range(depth):
                    block[k, i] = left[b, start + i, k]
            for j in range(columns):
                if not _ordered_sum(totals[j], right[rb, :, j], block, 0, count, parameters, skip_zeros):
                    return out, False
            for i in range(count):
                for j in range(columns):
                    out[b, start + i, j] = totals[j, i]
    return out, True
