"""Rounding semantics (conventions §3): `arithmetic(fmt, semantics)` gives the `Arithmetic` the executor runs under.

* `strict` -- low-precision hardware, op by op. Every add, sub, multiply, divide and exp is rounded to the format;
  `matmul` and `sum` accumulate in index order with a rounding after every multiply and every add (one compiled
  loop, `witness.arith.kernels`); exp is correctly rounded. Bit-for-bit equal to
  the MPFR reference `tests.oracles.mpfr_reference.reference_run` (tested).
  Why float64 is enough: one +, -, x or / of two values of a format with P = mantissa + 1 <= 25 significant bits,
  done in float64 (53 bits) and then rounded, is correctly rounded (53 >= 2P + 2, the innocuous double rounding
  bound), provided float64 neither overflows nor underflows -- true for exponent fields of at most 9 bits. For a
  fixed format with integer + fraction <= 25, products and sums are exact in float64 and a float64 quotient is
  within 2^(I-53) of the true one, closer than any quotient of grid values gets to a rounding midpoint
  (2^-(I+2F+1)); so float64 then grid rounding is again exact. fp64 itself is native float64. Other formats are
  refused for `strict`, with the reason. Speed comes from compiled loops (`witness.arith.kernels`: each rounding one
  addition and one subtraction of a constant read off the bit pattern, the ordered matmul fused into one loop that
  skips zero factors), each argued where it is and tested against MPFR in tests/witness/test_strict_matmul.py.
  exp: float64 `np.exp` (long double for fp64) gives a candidate whose error is far below the assumed bound
  `EXP_RELATIVE_ERROR`; where both ends of the candidate's error interval round to the same format value, that
  value is the correctly rounded exp (rounding is monotone); the few entries near a rounding boundary are
  enclosed by MPFR with directed rounding at a precision doubled until both ends round alike (`_exp_enclosed`;
  the MPFR reference `tests.oracles.mpfr_reference`, which the tests compare against, computes its exp its own way).
* `theory` -- CPW's model: every vector leaving a block (`store`: the embedding, each head's output, each block's
  output, the residual stream after each block) is rounded to the format; weights are rounded once. Inside a
  block the model is *exact*; here that is approximated by plain float64 (numpy's own summation order), which is
  not exact. A statement about all inputs under `theory` must come from the sound certifier in `verify`, which
  recomputes margins with rigorous arithmetic; runs under this semantics are a fast approximation of it, and a
  theory certificate also bounds how far they can stray (docs/certificates.md): where it is confirmed, these runs
  answer as the exact model does.
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
from fractions import Fraction
from typing import Any

import numpy as np

from witness.arith.base import Arithmetic
from witness.arith.formats import FP32, FP64, Exact, Fixed, Float, Format, kernels, parse_format
from witness.errors import ParameterError, StandInOverflow

SEMANTICS = ("strict", "theory", "mixed")
#: What each semantics means, in the words every verdict carries beside its name (docs/formats.md#semantics): a
#: `verified` under theory is a claim about exact arithmetic inside blocks, not about any hardware.
MEANINGS = {"strict": "every operation rounded to the format, sums in index order",
            "theory": "exact inside blocks, every stored vector rounded",
            "mixed": "fp32 inside blocks, every stored vector rounded"}


def semantics_text(semantics: str) -> str:
    """The semantics with its meaning, as verdicts print it: "theory: exact inside blocks, ..."."""
    return f"{semantics}: {MEANINGS[semantics]}"

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
        `weights`, or `store`) produced, a value of the format already (tests/witness/test_strict_matmul.py checks every
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
        """a @ b (numpy broadcasting), accumulated in index order: acc = a_0 b_0, acc = acc + a_k b_k, every
        product and every sum rounded, in one compiled loop (`witness.arith.kernels.ordered_matmul`;
        `_accumulate` is the same loop written with numpy, which a fixed format runs where the compiled
        loop meets a value out of its range: to name the offending entry as every other operation's error does, or
        to pass a masked score through).

        The loop runs along whichever of the output's two axes is longer (the same products, since x y = y x
        exactly, added in the same order), so that its inner stretch is long. When every operand is finite, steps
        whose fixed factor is zero are skipped (constructions have sparse weights and one-hot activations): that
        may give a zero sum the other sign; a signed zero is equal to the other one in every comparison,
        every later sum with a nonzero term, and exp, and the executor divides only by sums of exps.
        """
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        depth = a.shape[-1]
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        rows, columns = a.shape[-2], b.shape[-1]
        if depth == 0:
            return np.matmul(a, b)
        finite = bool(np.isfinite(a).all() and np.isfinite(b).all())
        if math.prod(b.shape[:-2]) == 1:  # b shared by the whole batch: every row of a is a row of one product
            left = np.broadcast_to(a, batch + (rows, depth)).reshape(1, -1, depth)
            right = b.reshape(1, depth, columns)
        else:
            left = np.broadcast_to(a, batch + (rows, depth)).reshape(-1, rows, depth)
            right = np.broadcast_to(b, batch + (depth, columns)).reshape(-1, depth, columns)
        left, right = np.ascontiguousarray(left), np.ascontiguousarray(right)
        fmt, compiled = self.operations_format, kernels()
        if isinstance(fmt, Fixed):
            parameters = compiled.matmul_parameters(compiled.ROUND_FIXED,
                                                    fixed_format=(2.0 ** fmt.fraction,
                                                                  2.0 ** (fmt.integer + fmt.fraction)))
        elif fmt == FP64:
            parameters = compiled.matmul_parameters(compiled.NO_ROUNDING)
        else:
            parameters = compiled.matmul_parameters(compiled.ROUND_FLOAT,
                                                    compiled.float_parameters(fmt.mantissa, fmt.exponent))
        result, inside = compiled.ordered_matmul(left, right, parameters, finite)
        if not inside:
            return self._accumulate(a, b)  # raises OverflowInFormat naming the first offending entry, or passes -inf
        return result.reshape(batch + (rows, columns))

    def _accumulate(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """acc = R(a_0 b_0), acc = R(acc + R(a_k b_k)) with numpy, vectorised over every axis but the
        contraction's: the definition the compiled loop follows, run where that loop hands a fixed format back
        (see `matmul`)."""
        total = self.mul(a[..., :, 0:1], b[..., 0:1, :], "matmul")
        for k in range(1, a.shape[-1]):
            product = self.mul(a[..., :, k:k + 1], b[..., k:k + 1, :], "matmul")
            with np.errstate(invalid="ignore", over="ignore"):
                total = self._round(total + product, "matmul", total, product)
        return total

    def sum(self, a: np.ndarray, axis: int) -> np.ndarray:
        """acc = a_0, acc = R(acc + a_k) along `axis`: the ordered matmul with a column of ones, whose products
        a_k 1 = a_k round to themselves (a_k is a value of the format, as every operand here is: see `store`), so
        that a sum gets the matmul's compiled loop."""
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
    """Weights and every vector leaving a block rounded to the format; float64 inside blocks (see module doc).

    Inside a block the exact model holds a finite value wherever the step's operands are finite. So a float64 step
    whose result is ±inf or NaN although its operands are finite (2^600 * 2^600, exp(800)) no longer stands in for
    the exact model: it raises `StandInOverflow` naming the step, instead of letting the inf meet a zero weight and a
    NaN reach the answer. Non-finite operands pass through as under `strict`: a masked score (-inf), or a value the
    format's own rounding sent to ±inf when it was stored (the format's overflow, which the model has too)."""

    semantics = "theory"

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _stand_in(np.add, "add", a, b)

    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _stand_in(np.subtract, "sub", a, b)

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _stand_in(np.multiply, "mul", a, b)

    def div(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _stand_in(np.divide, "div", a, b)

    def exp(self, a: np.ndarray) -> np.ndarray:
        return _stand_in(np.exp, "exp", a)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _stand_in(np.matmul, "matmul", a, b, elementwise=False)

    def sum(self, a: np.ndarray, axis: int) -> np.ndarray:
        return _stand_in(lambda x: x.sum(axis=axis, keepdims=True), "sum", a, elementwise=False)


def _stand_in(function: Any, operation: str, *operands: np.ndarray, elementwise: bool = True) -> np.ndarray:
    """`function(*operands)` in float64, or `StandInOverflow` at the first non-finite entry whose operands are all
    finite (for a contraction, `elementwise=False`, an entry's operands are all of its operands' entries)."""
    operands = tuple(np.asarray(operand, dtype=np.float64) for operand in operands)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        result = np.asarray(function(*operands))
    if np.isfinite(result).all():
        return result
    if elementwise:
        from_finite = np.logical_and.reduce([np.isfinite(np.broadcast_to(o, result.shape)) for o in operands])
    else:
        from_finite = all(np.isfinite(o).all() for o in operands)
    wrong = ~np.isfinite(result) & from_finite
    if wrong.any():
        index = tuple(int(i) for i in np.argwhere(wrong)[0])
        raise StandInOverflow(f"theory: the float64 stand-in for exact arithmetic gave {result[index]} at "
                              f"{operation} index {index} from finite operands, where the exact model holds a "
                              "finite value, so this run cannot say what the exact model computes (certify proves "
                              "such networks)")
    return result


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
    import gmpy2  # imported here: only a rounding boundary needs MPFR, and a command that rounds none starts faster

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
        rounded = np.empty(values.shape)
        # no range check here
        kernels().round_fixed_array(values.reshape(-1), rounded.reshape(-1), 2.0 ** fmt.fraction, math.inf)
        return rounded
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
           "SEMANTICS", "MEANINGS", "semantics_text", "float64_ops_are_correctly_rounded"]
