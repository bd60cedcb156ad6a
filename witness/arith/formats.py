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

import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from witness.errors import OverflowInFormat, ParameterError

FORMAT_SYNTAX = "fp16 | bf16 | fp32 | fp64 | float:M,E | fixed:I,F | exact"

_KERNELS = None


def kernels():
    """`witness.arith.kernels`, imported on first use: numba takes about half a CPU-second to import, and only a
    rounding or an index-order matmul needs it (a compile or `--help` never does; tests/cli/test_startup.py)."""
    global _KERNELS
    if _KERNELS is None:
        from witness.arith import kernels as module

        _KERNELS = module
    return _KERNELS


def _check_int(owner: str, name: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ParameterError(f"{owner} {name} must be an integer in [{low}, {high}], got {value!r}")


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
        floats never raise. Every format of mantissa <= 50 and exponent <= 10 rounds in one compiled pass
        (`witness.arith.kernels.round_float`, argued there); the others by exponent arithmetic.
        """
        x = np.asarray(values, dtype=np.float64)
        if (self.mantissa, self.exponent) == (52, 11):
            return x
        if self.mantissa > 50 or self.exponent > 10:
            return self._round_by_scaling(x)
        rounded = np.empty(x.shape)
        compiled = kernels()
        compiled.round_float_array(x.reshape(-1), rounded.reshape(-1),
                                   *compiled.float_parameters(self.mantissa, self.exponent))
        return rounded

    def _round_by_scaling(self, x: np.ndarray) -> np.ndarray:
        """`round` for any float64 array, by exponent arithmetic."""
        with np.errstate(invalid="ignore", over="ignore"):
            # The quantum of x is 2^(max(floor(log2|x|), emin) - mantissa); frexp gives floor(log2|x|) + 1
            # exactly, and scaling by powers of two is exact, so rint (ties to even) does the one rounding.
            exponent = np.maximum(np.frexp(x)[1] - 1, self.emin) - self.mantissa
            rounded = np.ldexp(np.rint(np.ldexp(x, -exponent)), exponent)
            return np.where(np.abs(rounded) > self.max_finite, np.copysign(np.inf, x), rounded)

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
        """Each entry rounded to the grid 2^-fraction, ties to even; OverflowInFormat if any leaves the range
        (naming the first such entry). NaN and ±inf are out of range too: a fixed-point register holds neither.
        One compiled pass (`witness.arith.kernels.round_fixed`)."""
        x = np.asarray(values, dtype=np.float64)
        rounded = np.empty(x.shape)
        first = kernels().round_fixed_array(x.reshape(-1), rounded.reshape(-1), 2.0 ** self.fraction,
                                            2.0 ** (self.integer + self.fraction))
        if first >= 0:
            index = tuple(int(i) for i in np.unravel_index(first, x.shape))
            raise OverflowInFormat(
                f"{self.name} overflow in {operation} at index {index} of shape {list(x.shape)}: value "
                f"{float(x[index])!r} is outside [{self.lowest!r}, {self.highest!r}]")
        return rounded

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
