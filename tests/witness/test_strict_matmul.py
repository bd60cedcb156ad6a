"""The compiled loops of `strict` (witness.arith.kernels: rounding, the ordered matmul) against references written
here with MPFR and exact rationals, on the inputs each argument is most likely to get wrong: ties, the subnormal
boundary, the overflow threshold, values far past the range, NaN and ±inf, zero entries (which the loop skips)
beside infinite ones (which forbid skipping), both orientations of the loop and an output longer than its stretch,
products far below and above float32's range, sums one bit past what the format holds. The rounding tests also
assert which path ran (compiled, or by scaling), so that a change in how a path is chosen cannot silently turn one
into a test of the other.
"""

from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab import strategies as ws
from witness.arith import BF16, FP16, Fixed, Float, arithmetic
from witness.errors import OverflowInFormat
from witness.execute import run

from tests.oracles.ieee_rounding import mpfr_context, mpfr_round  # the MPFR rounding the format tests check against


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
    """Equal values, NaN where NaN, the same sign wherever not NaN (a NaN's sign bit means nothing)."""
    numbers = ~np.isnan(x)
    return np.array_equal(x, y, equal_nan=True) and np.array_equal(np.signbit(x[numbers]), np.signbit(y[numbers]))


def same_bits_but_zero_signs(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal values, NaN where NaN, the same sign wherever nonzero: a matmul's zero sums may differ in sign (free:
    see `StrictArithmetic.matmul`)."""
    return same_bits(np.where(x == 0, 0.0, x), np.where(y == 0, 0.0, y))


# -- the compiled rounding (witness.arith.kernels.round_float) -------------------------------------------------------

FORMATS = [Float(3, 4), FP16, BF16, Float(1, 3), Float(2, 2), Float(24, 9), Float(12, 6), Float(50, 10), Float(23, 8)]


def hard_values(fmt: Float) -> np.ndarray:
    """Ties and their float64 neighbours at every binade from the subnormals to the top one, the largest finite
    value, the overflow threshold and its neighbours, halves of the smallest subnormal, float64 subnormals, signed
    zeros, values far past the range, ±inf, NaN."""
    exponents = np.arange(fmt.emin - fmt.mantissa - 2, fmt.emax + 1)
    fields = np.array([0, 1, 2, 3, 2 ** fmt.mantissa - 1])
    grid = ((1 + fields[None, :] / 2 ** fmt.mantissa) * 2.0 ** exponents[:, None]).reshape(-1)
    quantum = np.ldexp(1.0, np.maximum(np.frexp(grid)[1] - 1, fmt.emin) - fmt.mantissa)
    ties = grid + quantum / 2
    overflow = np.ldexp(2.0 - 2.0 ** -(fmt.mantissa + 1), fmt.emax)  # the midpoint above max_finite
    with np.errstate(over="ignore"):  # 2^(emax + 1) is inf for an 11-bit exponent
        beyond = np.ldexp(1.0, [fmt.emax + 1, fmt.emax + 3])
    special = np.array([np.nextafter(2.0 ** fmt.emax, 0), fmt.max_finite, overflow, np.nextafter(overflow, 0),
                        np.nextafter(overflow, np.inf), *beyond, 1e300, fmt.smallest_subnormal / 2,
                        np.nextafter(fmt.smallest_subnormal / 2, 1), 5e-324, 0.0, np.inf])
    values = np.concatenate([grid, ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf), special])
    return np.concatenate([values, -values, [np.nan]])


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_the_compiled_rounding_is_mpfr_rounding(fmt):
    assert fmt.mantissa <= 50 and fmt.exponent <= 10  # the compiled path, not `_round_by_scaling`
    values = hard_values(fmt)
    with np.errstate(over="ignore"):
        assert same_bits(fmt.round(values), mpfr_round(fmt, values))
        assert same_bits(fmt.round(values.reshape(-1, 1)[::2]).reshape(-1), mpfr_round(fmt, values[::2]))  # strided


@pytest.mark.parametrize("fmt", [Float(51, 10), Float(10, 11), Float(3, 11)], ids=str)
def test_formats_outside_the_compiled_rounding_round_by_scaling_alike(fmt):
    values = hard_values(fmt)
    with np.errstate(over="ignore"):
        assert same_bits(fmt.round(values), mpfr_round(fmt, values))


def test_the_compiled_fixed_rounding_is_rational_rounding_and_names_the_first_overflow():
    fmt = Fixed(3, 2)  # grid 1/4, range [-8, 7.75]
    steps = np.arange(-32 * 4, 32 * 4) / 16  # every sixteenth: ties (x.125, x.375, ...) and their neighbours
    inside = steps[(steps >= -8.125) & (steps < 7.875)]  # -8.125 is a tie that rounds to -8, 7.875 one that rounds to 8
    assert fmt.round(inside).tolist() == [float(fixed_round(fmt, Fraction(v))) for v in inside]
    x = np.array([[1.0, 7.875], [9.0, np.nan]])
    with pytest.raises(OverflowInFormat, match=r"fixed:3,2 overflow in store at index \(0, 1\) of shape \[2, 2\]"):
        fmt.round(x, "store")
    with pytest.raises(OverflowInFormat, match=r"index \(0,\)"):
        fmt.round(np.array([np.inf]))


# -- the ordered matmul's compiled loop ------------------------------------------------------------------------------

def test_a_sum_one_bit_past_the_format_rounds_and_one_that_fits_does_not():
    # fp16 keeps 11 significant bits: integer sums up to 2047 are exact, 2049 is a tie that rounds to 2048.
    strict = arithmetic("fp16", "strict")
    a = np.array([[1023.0, 1024.0]])
    fits, too_big = np.array([[1.0], [1.0]]), np.array([[1.0], [1.0 + 2 ** -10]])
    assert strict.matmul(a, fits).tolist() == [[2047.0]] == reference_matmul(FP16, a, fits).tolist()
    assert same_bits(strict.matmul(a, too_big), reference_matmul(FP16, a, too_big))  # 1024 (1 + 2^-10): a 12th bit
    one_more = np.array([[1024.0, 1025.0]])
    assert strict.matmul(one_more, fits).tolist() == [[2048.0]] == reference_matmul(FP16, one_more, fits).tolist()


def test_products_below_the_subnormal_grid_round():
    strict = arithmetic("fp16", "strict")
    a, b = np.array([[2.0 ** -12, 2.0 ** -13]]), np.array([[2.0 ** -12], [2.0 ** -13]])
    assert same_bits(strict.matmul(a, b), reference_matmul(FP16, a, b))  # 2^-24 + 2^-26: below fp16's quantum 2^-24


def test_a_fixed_matmul_that_leaves_the_range_by_rounding_raises():
    strict = arithmetic("fixed:3,2", "strict")  # grid 1/4, range [-8, 7.75]
    a = np.array([[2.0, 1.75]])
    inside, outside = np.array([[2.0], [2.0]]), np.array([[2.0], [2.25]])
    assert strict.matmul(a, inside).tolist() == reference_matmul(Fixed(3, 2), a, inside).tolist() == [[7.5]]
    with pytest.raises(OverflowInFormat):  # 4 + 3.9375 rounds to 8, outside the range
        reference_matmul(Fixed(3, 2), a, outside)
    with pytest.raises(OverflowInFormat, match="matmul"):
        strict.matmul(a, outside)


SHAPES = [((2, 3, 7), (7, 4)), ((5, 7), (7, 2)), ((2, 1, 6, 7), (3, 7, 5)), ((1, 9), (9, 1))]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("fmt, low, high", [(FP16, -14, 6), (FP16, -24, -3), (Float(3, 4), -6, 5), (BF16, -60, 60),
                                            (BF16, -70, -60), (BF16, 60, 66), (Float(10, 8), -62, 0),
                                            (Float(24, 9), -200, 200), (Float(1, 3), -3, 3)], ids=str)
def test_the_compiled_ordered_matmul_is_the_mpfr_one(fmt, low, high, shapes):
    """Both orientations (more rows than columns is computed transposed), shared and batched right factors, zero
    entries (skipped) and tiny, huge and overflowing products."""
    rng = np.random.default_rng(abs(low) * 100 + abs(high) + len(shapes[0]))
    strict = arithmetic(fmt, "strict")
    a, b = format_values(fmt, rng, shapes[0], low, high), format_values(fmt, rng, shapes[1], low, high)
    with np.errstate(over="ignore", invalid="ignore"):
        assert same_bits_but_zero_signs(strict.matmul(a, b), reference_matmul(fmt, a, b))


@pytest.mark.parametrize("fmt", [FP16, Float(3, 4), "fixed:3,4"], ids=str)
def test_infinite_operands_run_every_step_as_defined(fmt):
    """With an infinite operand no step is skipped: inf * 0 is NaN, as the definition says (a fixed format passes
    what is not finite through, the masked scores' rule)."""
    strict = arithmetic(fmt, "strict")
    a = np.array([[0.0, 1.0, 0.5], [-np.inf, 0.0, 1.0], [1.0, 0.0, 0.0]])
    b = np.array([[np.inf, 0.0], [0.0, 0.5], [1.0, -0.25]])
    with np.errstate(invalid="ignore"):
        result = strict.matmul(a, b)
        assert same_bits_but_zero_signs(result, strict._accumulate(a, b))
    assert np.isnan(result[0, 0]) and np.isnan(result[1, 1]) and result[1, 0] == -np.inf and result[2, 0] == np.inf
    if isinstance(strict.operations_format, Float):
        assert same_bits_but_zero_signs(result, reference_matmul(strict.operations_format, a, b))
    # past the first step, in both orientations: a zero factor against an infinite one is still NaN
    with np.errstate(invalid="ignore"):
        across = strict.matmul(np.array([[1.0, 0.0, 2.0]]), np.array([[1.0, 1.0], [np.inf, 1.0], [1.0, 1.0]]))
        down = strict.matmul(np.array([[1.0, np.inf], [2.0, 1.0], [3.0, 1.0]]), np.array([[1.0], [0.0]]))
    assert np.isnan(across[0, 0]) and across[0, 1] == 3.0
    assert np.isnan(down[0, 0]) and down[1:, 0].tolist() == [2.0, 3.0]
    if isinstance(strict.operations_format, Float):  # every step rounds, the first too, in both orientations
        fmt = strict.operations_format
        rng = np.random.default_rng(3)
        for shape_a, shape_b in [((9, 4), (4, 2)), ((2, 4), (4, 9))]:
            a, b = format_values(fmt, rng, shape_a, -3, 3), format_values(fmt, rng, shape_b, -3, 3)
            a[1, 2] = -np.inf
            with np.errstate(invalid="ignore"):
                assert same_bits_but_zero_signs(strict.matmul(a, b), reference_matmul(fmt, a, b))


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_the_compiled_fixed_matmul_is_the_rational_one(shapes):
    fmt = Fixed(4, 4)
    rng = np.random.default_rng(len(shapes[0]) + shapes[1][-1])
    a = rng.integers(-12, 12, shapes[0]) / 16 * rng.choice([0.0, 1.0, 2.0], shapes[0])
    b = rng.integers(-12, 12, shapes[1]) / 16
    strict = arithmetic(fmt, "strict")
    assert same_bits_but_zero_signs(strict.matmul(a, b), reference_matmul(fmt, a, b))


@pytest.mark.parametrize("fmt", [FP16, Fixed(4, 4)], ids=str)
def test_an_output_axis_longer_than_the_loops_stretch_is_computed_everywhere(fmt):
    from witness.arith.kernels import ROW_STRETCH, STRETCH
    rng = np.random.default_rng(7)
    shape = (2 * max(STRETCH, ROW_STRETCH) + 3, 2)
    a = format_values(fmt, rng, shape, -4, 4) if isinstance(fmt, Float) else rng.integers(-12, 12, shape) / 16
    b = np.array([[0.3125], [-0.6875]])
    strict = arithmetic(fmt, "strict")
    # [long, 1]: the loop runs down the column; [1, long]: along the row (another factor, so that the second result
    # cannot be the first one's freed memory read back)
    assert same_bits_but_zero_signs(strict.matmul(a, b), reference_matmul(fmt, a, b))
    c = np.array([[0.4375, -0.8125]])
    assert same_bits_but_zero_signs(strict.matmul(c, a.T), reference_matmul(fmt, c, a.T))


def test_a_fixed_overflow_midway_names_the_entry_the_plain_loop_names():
    strict = arithmetic("fixed:3,2", "strict")
    a = np.array([[1.0, 1.0, 1.0], [4.0, 4.0, -4.0]])  # row 1: 4 + 4 = 8 leaves the range at the second step
    b = np.array([[1.0], [1.0], [1.0]])
    with pytest.raises(OverflowInFormat, match=r"overflow in matmul at index \(1, 0\) of shape \[2, 1\]: value 8.0"):
        strict.matmul(a, b)


def test_bf16_sums_that_overflow_are_infinite():
    strict = arithmetic("bf16", "strict")
    big = BF16.max_finite
    a, b = np.array([[big, big, -big]]), np.array([[1.0], [1.0], [1.0]])
    assert strict.matmul(a, b).tolist() == reference_matmul(BF16, a, b).tolist() == [[np.inf]]


def test_fp64_strict_adds_in_index_order_not_numpys():
    strict = arithmetic("fp64", "strict")
    a, b = np.array([[1.0, 2.0 ** -53, 2.0 ** -53]]), np.ones((3, 1))
    assert strict.matmul(a, b).tolist() == [[1.0]]  # (1 + 2^-53) + 2^-53: each tie rounds back to 1
    assert reference_matmul(Float(52, 11), a, b).tolist() == [[1.0]]


# -- what `StrictArithmetic.store` rests on ----------------------------------------------------

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
