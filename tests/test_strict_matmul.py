"""The fast paths of `strict` rounding and of its ordered matmul, against references written here with MPFR and
exact rationals, on the inputs each path's argument is most likely to get wrong: ties, the subnormal boundary, the
largest magnitudes a path accepts, products just above and below float32's normal range, sums one bit past the
bound under which a matmul rounds nothing. Each test also asserts which path ran, so that a change in how a path
is chosen cannot silently turn it into a test of another one.
"""

from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from witness import strategies as ws
from witness.arith import BF16, FP16, Fixed, Float, arithmetic
from witness.errors import OverflowInFormat
from witness.execute import run

from test_formats import mpfr_context, mpfr_round  # the MPFR rounding the format tests check against

pytestmark = pytest.mark.usefixtures("strict_shortcuts_everywhere")


def reference_matmul(fmt, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """acc = R(a_0 b_0), acc = R(acc + R(a_k b_k)), entry by entry: MPFR for floats, Fractions for fixed formats
    (raising OverflowInFormat as the executor does when a rounded value leaves the range)."""
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    a = np.broadcast_to(a, shape[:-1] + (a.shape[-1],))
    b = np.broadcast_to(b, shape[:-2] + b.shape[-2:])
    out = np.empty(shape)
    for index in np.ndindex(*shape):
        *batch, i, j = index
        row, column = a[tuple(batch) + (i,)], b[tuple(batch) + (slice(None), j)]
        if isinstance(fmt, Float):
            ctx = mpfr_context(fmt)
            acc = ctx.mul(gmpy2.mpfr(float(row[0]), 53), gmpy2.mpfr(float(column[0]), 53))
            for x, y in zip(row[1:], column[1:]):
                acc = ctx.add(acc, ctx.mul(gmpy2.mpfr(float(x), 53), gmpy2.mpfr(float(y), 53)))
            out[index] = float(acc)
        else:
            acc = fixed_round(fmt, Fraction(row[0]) * Fraction(column[0]))
            for x, y in zip(row[1:], column[1:]):
                acc = fixed_round(fmt, acc + fixed_round(fmt, Fraction(x) * Fraction(y)))
            out[index] = float(acc)
    return out


def fixed_round(fmt: Fixed, value: Fraction) -> Fraction:
    steps = round(value * 2 ** fmt.fraction)  # Python rounds half to even
    if not -2 ** (fmt.integer + fmt.fraction) <= steps < 2 ** (fmt.integer + fmt.fraction):
        raise OverflowInFormat(f"{value} outside {fmt.name}")
    return Fraction(steps, 2 ** fmt.fraction)


def format_values(fmt: Float, rng, shape, low: int, high: int) -> np.ndarray:
    """Random values of the format with exponents in [low, high], both signs, some zeros."""
    values = np.ldexp(rng.integers(2 ** fmt.mantissa, 2 ** (fmt.mantissa + 1), shape) / 2.0 ** fmt.mantissa,
                      rng.integers(low, high + 1, shape)) * rng.choice([-1.0, 1.0], shape)
    values[rng.random(shape) < 0.15] = 0.0
    return fmt.round(values)


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return np.array_equal(x, y, equal_nan=True) and np.array_equal(np.signbit(x), np.signbit(y))


# -- rounding by one addition (Float.round_by_adding) ----------------------------------------------------------------

FORMATS = [Float(3, 4), FP16, BF16, Float(1, 3), Float(2, 2), Float(24, 9), Float(12, 6), Float(50, 10)]


def hard_values(fmt: Float) -> np.ndarray:
    """Ties and their float64 neighbours at every binade from the subnormals to just below 2^emax, the largest
    values below 2^emax, halves of the smallest subnormal, float64 subnormals, signed zeros."""
    exponents = np.arange(fmt.emin - fmt.mantissa - 2, fmt.emax)
    fields = np.array([0, 1, 2, 3, 2 ** fmt.mantissa - 1])
    grid = ((1 + fields[None, :] / 2 ** fmt.mantissa) * 2.0 ** exponents[:, None]).reshape(-1)
    quantum = np.ldexp(1.0, np.maximum(np.frexp(grid)[1] - 1, fmt.emin) - fmt.mantissa)
    ties = grid + quantum / 2
    below_top = np.nextafter(2.0 ** fmt.emax, 0)
    special = np.array([below_top, fmt.max_finite, fmt.smallest_subnormal / 2,
                        np.nextafter(fmt.smallest_subnormal / 2, 1), 5e-324, 0.0, -0.0])
    values = np.concatenate([grid, ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf), special])
    values = values[np.abs(values) < 2.0 ** fmt.emax]
    return np.concatenate([values, -values])


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_rounding_by_adding_in_float64_is_mpfr_rounding(fmt):
    values = hard_values(fmt)
    rounded = fmt.round_by_adding(values)
    assert rounded is not None  # every value here is one the addition path takes
    assert same_bits(rounded, mpfr_round(fmt, values))
    assert same_bits(fmt.round(values), rounded)


@pytest.mark.parametrize("fmt", [Float(3, 4), FP16, BF16, Float(10, 8), Float(1, 3)], ids=str)
def test_rounding_by_adding_in_float32_is_mpfr_rounding(fmt):
    values = hard_values(fmt).astype(np.float32)  # float32 neighbours of the ties now
    largest = 2.0 ** min(fmt.emax - 1, 127 - 23 + fmt.mantissa)
    values = values[np.abs(values) < 2 * largest]
    copy = values.copy()
    rounded = fmt.round_by_adding(values, in_place=True)
    assert rounded is values and rounded.dtype == np.float32
    assert same_bits(rounded.astype(np.float64), mpfr_round(fmt, copy))


@pytest.mark.parametrize("values", [[1.0, np.inf], [np.nan, 1.0], [-np.inf], [2.0 ** 15]], ids=str)
def test_rounding_by_adding_refuses_what_it_cannot_round(values):
    x = np.array(values)
    assert FP16.round_by_adding(x.copy(), in_place=True) is None
    # bf16's constant C = 1.5 * 2^(23 - 7 + e) leaves float32 for e > 111: refused, not wrong
    assert BF16.round_by_adding(np.array([2.0 ** 112], dtype=np.float32)) is None
    assert BF16.round_by_adding(np.array([2.0 ** 111], dtype=np.float32)) is not None


# -- the ordered matmul's two shortcuts -------------------------------------------------------------------------------

def test_a_matmul_whose_sums_fit_rounds_nothing_and_one_bit_more_does_round():
    # fp16 keeps 11 significant bits. Integer entries, so g = 0 and the bound is 2^11 = 2048.
    strict = arithmetic("fp16", "strict")
    a = np.array([[1023.0, 1024.0]])
    fits, too_big = np.array([[1.0], [1.0]]), np.array([[1.0], [1.0 + 2 ** -10]])
    assert strict._rounds_nothing(a, fits)  # 1023 + 1024 = 2047 < 2048
    assert strict.matmul(a, fits).tolist() == [[2047.0]] == reference_matmul(FP16, a, fits).tolist()
    assert not strict._rounds_nothing(a, too_big)  # 1024 * (1 + 2^-10) needs a 12th bit
    assert same_bits(strict.matmul(a, too_big), reference_matmul(FP16, a, too_big))
    one_more = np.array([[1024.0, 1025.0]])  # 2049 has 12 significant bits: fp16 rounds it to 2048
    assert not strict._rounds_nothing(one_more, fits)
    assert strict.matmul(one_more, fits).tolist() == [[2048.0]] == reference_matmul(FP16, one_more, fits).tolist()


def test_a_matmul_below_the_subnormal_grid_is_not_taken_as_exact():
    strict = arithmetic("fp16", "strict")
    a, b = np.array([[2.0 ** -12, 2.0 ** -13]]), np.array([[2.0 ** -12], [2.0 ** -13]])
    assert not strict._rounds_nothing(a, b)  # products 2^-24 + 2^-26: below fp16's quantum 2^-24
    assert same_bits(strict.matmul(a, b), reference_matmul(FP16, a, b))


def test_fixed_matmul_rounds_nothing_only_inside_the_range():
    strict = arithmetic("fixed:3,2", "strict")  # grid 1/4, range [-8, 7.75]
    a = np.array([[2.0, 1.75]])
    inside, outside = np.array([[2.0], [2.0]]), np.array([[2.0], [2.25]])
    assert strict._rounds_nothing(a, inside)  # 4 + 3.5 = 7.5
    assert strict.matmul(a, inside).tolist() == reference_matmul(Fixed(3, 2), a, inside).tolist() == [[7.5]]
    assert not strict._rounds_nothing(a, outside)  # 4 + 3.9375: rounds, and 7.9375 -> 8 leaves the range
    with pytest.raises(OverflowInFormat):
        reference_matmul(Fixed(3, 2), a, outside)
    with pytest.raises(OverflowInFormat, match="matmul"):
        strict.matmul(a, outside)


@pytest.mark.parametrize("fmt, low, high", [(FP16, -14, 6), (FP16, -24, -3), (Float(3, 4), -6, 5), (BF16, -60, 60),
                                            (BF16, 60, 66), (Float(10, 8), -62, 0)], ids=str)
def test_the_float32_accumulation_is_the_ordered_rounded_one(fmt, low, high):
    rng = np.random.default_rng(abs(low) * 100 + abs(high))
    strict = arithmetic(fmt, "strict")
    a, b = format_values(fmt, rng, (2, 3, 7), low, high), format_values(fmt, rng, (7, 4), low, high)
    narrow = strict._float32_suffices(a, b)
    smallest = np.min(np.abs(a[a != 0])) * np.min(np.abs(b[b != 0]))
    assert (narrow is not None) == (smallest >= 2.0 ** -126)
    assert not strict._rounds_nothing(a, b)
    with np.errstate(over="ignore", invalid="ignore"):
        assert same_bits(strict.matmul(a, b), reference_matmul(fmt, a, b))


def test_bf16_products_below_float32s_normal_range_take_the_float64_loop():
    strict = arithmetic("bf16", "strict")
    a, b = np.array([[2.0 ** -70, 1.0]]), np.array([[2.0 ** -60 * 1.5], [3.0]])
    assert strict._float32_suffices(a, b) is None  # 2^-130 * 1.5 would round in float32 before bf16
    assert same_bits(strict.matmul(a, b), reference_matmul(BF16, a, b))
    a[0, 0] = 2.0 ** -66
    assert strict._float32_suffices(a, b) is not None  # 1.5 * 2^-126: normal
    assert same_bits(strict.matmul(a, b), reference_matmul(BF16, a, b))


def test_bf16_sums_that_overflow_are_infinite_on_both_paths():
    strict = arithmetic("bf16", "strict")
    big = BF16.max_finite
    a, b = np.array([[big, big, -big]]), np.array([[1.0], [1.0], [1.0]])
    assert strict._float32_suffices(a, b) is not None
    assert strict.matmul(a, b).tolist() == reference_matmul(BF16, a, b).tolist() == [[np.inf]]


# -- what `StrictArithmetic.store` and `_float32_suffices` rest on ----------------------------------------------------

class OperandsAreFormatValues:
    """A strict arithmetic that, at every step the executor calls, checks each operand is a value of the
    operations format (or ±inf / NaN: masked scores and overflowed floats), then does the step."""

    def __init__(self, arith):
        self.inner, self.steps = arith, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _checked(self, name):
        def step(*operands, **options):
            for operand in operands:
                x = np.asarray(operand, dtype=np.float64)
                finite = np.where(np.isfinite(x), x, 0.0)
                assert np.array_equal(self.inner.operations_format.round(finite), finite), name
            self.steps += 1
            return getattr(self.inner, name)(*operands, **options)
        return step

    def __getattribute__(self, name):
        if name in ("add", "sub", "mul", "div", "exp", "relu", "matmul", "sum", "store"):
            return object.__getattribute__(self, "_checked")(name)
        return object.__getattribute__(self, name)


@pytest.mark.parametrize("spec", ["fp16", "bf16", "float:3,4", "fixed:4,4"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_operand_of_every_strict_step_is_a_format_value(spec, data):
    strategy = data.draw(st.sampled_from([ws.networks(), ws.hybrid_networks(), ws.sparse_networks()]))
    network, tokens = data.draw(strategy)
    checked = OperandsAreFormatValues(arithmetic(spec, "strict"))
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            run(network, tokens, checked)
    except OverflowInFormat:
        pass
    assert checked.steps > 0
