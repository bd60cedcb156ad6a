"""Number formats (docs/conventions.md §3): what a p-bit value is, and correctly rounded round-to-nearest-even onto it.

* `Float(mantissa, exponent)`: IEEE-style binary floating point with `mantissa` stored fraction bits and an
  `exponent`-bit field (bias 2^(exponent-1) - 1), subnormals, ±inf and NaN. p = 1 + exponent + mantissa.
  Presets `FP16` (10,5), `BF16` (7,8), `FP32` (23,8), `FP64` (52,11).
* `Fixed(integer, fraction)`: two's-complement fixed point on the grid 2^-fraction over
  [-2^integer, 2^integer - 2^-fraction]. p = 1 + integer + fraction. A value outside the range is an error
  (`OverflowInFormat`) naming the operation and the first offending index, never a silent wrap or saturation.
* `Exact`: real arithmetic, the reference notion the sound certifier (`verify`) reasons in. It cannot drive the
  executor -- exp of a rational is irrational, so no float array holds the exact run -- and `witness.arith.
  semantics.arithmetic` refuses it.

Every format is a frozen, validated dataclass; `name` round-trips through `parse_format`. Formats hold values
that float64 represents exactly, which is why `round` takes and returns float64 arrays.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from witness.errors import OverflowInFormat, ParameterError

FORMAT_SYNTAX = "fp16 | bf16 | fp32 | fp64 | float:M,E | fixed:I,F | exact"


def _check_int(owner: str, name: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ParameterError(f"{owner} {name} must be an integer in [{low}, {high}], got {value!r}")


#: Entries `Float.round` handles at a time: a few float64 arrays of this size fit in a core's cache.
ROUND_CHUNK = 1 << 15


@dataclass(frozen=True)
class Float:
    """Binary floating point with subnormals, ±inf, NaN; rounding is to nearest, ties to even.

    Limits: exponent in [2, 11] and mantissa in [1, 52], so that every value, subnormal or not, is a float64.
    """

    mantissa: int
    exponent: int
    PRESETS: ClassVar[dict[tuple[int, int], str]] = {(10, 5): "fp16", (7, 8): "bf16", (23, 8): "fp32",
                                                      (52, 11): "fp64"}

    def __post_init__(self) -> None:
        _check_int("Float", "mantissa", self.mantissa, 1, 52)
        _check_int("Float", "exponent", self.exponent, 2, 11)
        object.__setattr__(self, "mantissa", int(self.mantissa))
        object.__setattr__(self, "exponent", int(self.exponent))

    @property
    def bits(self) -> int:
        return 1 + self.exponent + self.mantissa

    @property
    def name(self) -> str:
        return self.PRESETS.get((self.mantissa, self.exponent), f"float:{self.mantissa},{self.exponent}")

    @property
    def emax(self) -> int:
        """The largest unbiased exponent of a finite value."""
        return 2 ** (self.exponent - 1) - 1

    @property
    def emin(self) -> int:
        """The smallest unbiased exponent of a normal value; subnormals share its quantum."""
        return 1 - self.emax

    @property
    def max_finite(self) -> float:
        return float(np.ldexp(2.0 - 2.0 ** -self.mantissa, self.emax))

    @property
    def smallest_subnormal(self) -> float:
        return float(np.ldexp(1.0, self.emin - self.mantissa))

    def round(self, values, operation: str = "round") -> np.ndarray:
        """Each entry rounded to the nearest value of the format, ties to even, as a float64 array.

        IEEE overflow: a magnitude that rounds (with unbounded exponent) above `max_finite` becomes ±inf. NaN
        stays NaN and the sign of zero is kept. `operation` is accepted for a uniform interface with `Fixed`;
        floats never raise.
        """
        x = np.asarray(values, dtype=np.float64)
        if (self.mantissa, self.exponent) == (52, 11):
            return x
        if (self.mantissa, self.exponent) == (23, 8):  # numpy's cast is IEEE round to nearest even, and fast
            with np.errstate(over="ignore"):
                return x.astype(np.float32).astype(np.float64)
        return _in_chunks(x, self._round_chunk)

    def _round_chunk(self, chunk: np.ndarray, out: np.ndarray) -> None:
        out[...] = chunk
        if self.mantissa > 50 or self.round_by_adding(out, in_place=True) is None:
            out[...] = self._round_by_scaling(chunk)

    def _round_by_scaling(self, x: np.ndarray) -> np.ndarray:
        """`round` for any float64 array, by exponent arithmetic."""
        with np.errstate(invalid="ignore", over="ignore"):
            # The quantum of x is 2^(max(floor(log2|x|), emin) - mantissa); frexp gives floor(log2|x|) + 1
            # exactly, and scaling by powers of two is exact, so rint (ties to even) does the one rounding.
            exponent = np.maximum(np.frexp(x)[1] - 1, self.emin) - self.mantissa
            rounded = np.ldexp(np.rint(np.ldexp(x, -exponent)), exponent)
            return np.where(np.abs(rounded) > self.max_finite, np.copysign(np.inf, x), rounded)

    def round_by_adding(self, x: np.ndarray, in_place: bool = False, zero_signs: bool = True) -> np.ndarray | None:
        """`round` of a float64 or float32 array (same dtype back; into x itself when `in_place`) by one addition
        and one subtraction in that dtype, when every entry is finite with magnitude below 2^emax and the constant
        below fits the dtype; else None (x untouched), and the caller takes the general path. Needs mantissa <=
        (the dtype's fraction bits) - 2. Without `zero_signs`, a result that rounds to zero may come out as +0
        where the rounding gives -0 (two passes fewer; for callers that no comparison of theirs can tell apart).

        Why it is the format's rounding: let e = max(floor(log2|x|), emin), so the format's quantum at x is
        q = 2^(e - mantissa), and let C = 1.5 * 2^(t - mantissa + e), t the dtype's fraction bits (52 or 23).
        Since |x| < 2^(e+1) <= C/3, x + C lies in [2^(t - mantissa + e), 2^(t + 1 - mantissa + e)), where the
        dtype's spacing is exactly q; so the rounded sum is C plus x rounded to a multiple of q, ties to even (C/q
        = 1.5 * 2^t is even). Subtracting C is exact (both are multiples of q, within a factor 2 of each other),
        and a copysign restores the sign of a result that rounded to zero (C is taken with x's sign, which
        mirrors the whole computation for a negative x, so it also carries that sign; a positive C serves a
        negative x as well, since C - |x| >= 2C/3 stays in the same binade). Below 2^emax the result is at most
        2^emax, a finite format value. 2^e is read off x's bit pattern (its exponent field, fraction cleared),
        raised to 2^emin for entries below the normal range (the dtype's subnormals and 0 included); an infinite
        or NaN x reads as inf and is refused with the rest.
        """
        if x.ndim == 0:  # numpy's ufuncs return scalars, not arrays, for 0-d operands
            rounded = self.round_by_adding(x.reshape(1), in_place, zero_signs)
            return None if rounded is None else rounded.reshape(())
        unsigned, exponent_field, largest, smallest, multiplier = _adding_constants(self, x.dtype)
        scale = np.bitwise_and(x.view(unsigned), exponent_field).view(x.dtype)
        if not scale.max() <= largest:  # NaN-safe
            return None
        np.maximum(scale, smallest, out=scale)
        scale *= multiplier
        if zero_signs:
            np.copysign(scale, x, out=scale)  # C with x's sign: the same sum, mirrored, and it carries the sign
        rounded = x if in_place else x.copy()
        rounded += scale
        rounded -= scale
        return np.copysign(rounded, scale, out=rounded) if zero_signs else rounded

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Fixed:
    """Two's-complement fixed point: grid 2^-fraction, range [-2^integer, 2^integer - 2^-fraction].

    Limits: integer, fraction >= 0 and 1 <= integer + fraction <= 52, so every value is a float64.
    """

    integer: int
    fraction: int

    def __post_init__(self) -> None:
        _check_int("Fixed", "integer", self.integer, 0, 52)
        _check_int("Fixed", "fraction", self.fraction, 0, 52)
        if not 1 <= self.integer + self.fraction <= 52:
            raise ParameterError(f"Fixed integer + fraction must lie in [1, 52], got {self.integer + self.fraction}")
        object.__setattr__(self, "integer", int(self.integer))
        object.__setattr__(self, "fraction", int(self.fraction))

    @property
    def bits(self) -> int:
        return 1 + self.integer + self.fraction

    @property
    def name(self) -> str:
        return f"fixed:{self.integer},{self.fraction}"

    @property
    def lowest(self) -> float:
        return -(2.0 ** self.integer)

    @property
    def highest(self) -> float:
        return 2.0 ** self.integer - 2.0 ** -self.fraction

    def round(self, values, operation: str = "round") -> np.ndarray:
        """Each entry rounded to the grid 2^-fraction, ties to even; OverflowInFormat if any leaves the range.

        NaN and ±inf are out of range too: a fixed-point register holds neither.
        """
        x = np.asarray(values, dtype=np.float64)
        if x.size > ROUND_CHUNK:
            try:
                return _in_chunks(x, lambda chunk, out: np.copyto(out, self.round(chunk, operation)))
            except OverflowInFormat:  # the whole array's own message, naming its first offending index
                pass
        with np.errstate(invalid="ignore", over="ignore"):
            steps = np.rint(x * 2.0 ** self.fraction)  # exact scaling (by a power of two, upwards), the one rounding
            limit = 2.0 ** (self.integer + self.fraction)
            inside = steps.size == 0 or (steps.min() >= -limit and steps.max() <= limit - 1)  # false on NaN
        if not inside:
            outside = ~((steps >= -limit) & (steps <= limit - 1))
            first = tuple(int(i) for i in np.argwhere(outside)[0])
            raise OverflowInFormat(
                f"{self.name} overflow in {operation} at index {first} of shape {list(x.shape)}: value "
                f"{float(x[first])!r} is outside [{self.lowest!r}, {self.highest!r}]")
        steps *= 2.0 ** -self.fraction
        return steps

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Exact:
    """Real arithmetic: the reference notion for sound reasoning (intervals / rationals), not an executor format."""

    @property
    def name(self) -> str:
        return "exact"

    @property
    def bits(self) -> int:
        raise ParameterError("the exact format has no bit count p")

    def round(self, values, operation: str = "round") -> np.ndarray:
        raise ParameterError("the exact format does not round float arrays; use verify's certifier for exact "
                             "reasoning")

    def __str__(self) -> str:
        return self.name


Format = Float | Fixed | Exact


@functools.lru_cache(maxsize=None)
def _adding_constants(fmt: Float, dtype: np.dtype) -> tuple:
    """For `Float.round_by_adding` in `dtype` (float64 or float32): its unsigned integer type, the mask of its
    exponent field, the largest 2^e it takes (that of an |x| < 2^emax, and of one whose C is finite in the dtype),
    2^emin, and 1.5 * 2^(fraction bits - mantissa), the last four as scalars of the dtype."""
    info = np.finfo(dtype)
    unsigned = np.uint64 if dtype == np.float64 else np.uint32
    fraction_bits = int(info.nmant)
    largest = min(fmt.emax - 1, int(info.maxexp) - 1 - fraction_bits + fmt.mantissa)
    return (unsigned, unsigned(((1 << int(info.nexp)) - 1) << fraction_bits), dtype.type(2.0 ** largest),
            dtype.type(2.0 ** fmt.emin), dtype.type(1.5 * 2.0 ** (fraction_bits - fmt.mantissa)))


def _in_chunks(x: np.ndarray, round_into) -> np.ndarray:
    """x rounded by round_into(piece, out), which writes a piece's rounding into out, on consecutive pieces of
    x's entries (ROUND_CHUNK at a time): the same values, each pass over a piece then running in the processor's
    cache."""
    rounded = np.empty(x.shape)
    flat, out = x.reshape(-1), rounded.reshape(-1)
    for start in range(0, flat.size, ROUND_CHUNK):
        round_into(flat[start:start + ROUND_CHUNK], out[start:start + ROUND_CHUNK])
    return rounded

FP16 = Float(10, 5)
BF16 = Float(7, 8)
FP32 = Float(23, 8)
FP64 = Float(52, 11)
EXACT = Exact()

_PRESETS = {"fp16": FP16, "bf16": BF16, "fp32": FP32, "fp64": FP64, "exact": EXACT}
_PAIR = re.compile(r"(float|fixed):(\d+),(\d+)")


def parse_format(spec: str) -> Format:
    """`fp16`, `bf16`, `fp32`, `fp64`, `float:M,E` (mantissa, exponent bits), `fixed:I,F` or `exact`."""
    if not isinstance(spec, str):
        raise ParameterError(f"a format is written as {FORMAT_SYNTAX}, got {spec!r}")
    text = spec.strip()
    if text in _PRESETS:
        return _PRESETS[text]
    match = _PAIR.fullmatch(text)
    if match is None:
        raise ParameterError(f"unknown format {spec!r}; expected {FORMAT_SYNTAX}")
    kind, first, second = match.group(1), int(match.group(2)), int(match.group(3))
    return Float(first, second) if kind == "float" else Fixed(first, second)


__all__ = ["Float", "Fixed", "Exact", "Format", "FP16", "BF16", "FP32", "FP64", "EXACT", "parse_format",
           "FORMAT_SYNTAX"]
