"""Number formats: rounding against MPFR (gmpy2) and exact rationals, format specs, correctly rounded exp."""

from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from witness.arith import BF16, FP16, FP32, FP64, Fixed, Float, arithmetic, parse_format
from witness.errors import OverflowInFormat, ParameterError
from tests.oracles.ieee_rounding import mpfr_context, mpfr_round

FLOATS = [Float(3, 4), Float(5, 5), FP16, BF16, FP32, Float(2, 2), Float(24, 9), Float(1, 3), Float(20, 11)]


def grid_values(fmt: Float, fractions=None) -> np.ndarray:
    """Non-negative finite values of a float format, by its definition (subnormals, then normals): every one, or
    those whose stored fraction field is in `fractions`."""
    bias = 2 ** (fmt.exponent - 1) - 1
    fields = np.arange(2 ** fmt.mantissa) if fractions is None else np.asarray(fractions)
    fraction = fields / 2 ** fmt.mantissa
    values = [fraction * 2.0 ** (1 - bias)]
    values += [(1 + fraction) * 2.0 ** e for e in range(1 - bias, bias + 1)]
    return np.concatenate(values)


def edge_values(fmt: Float) -> np.ndarray:
    """Ties (exact midpoints), their float64 neighbours, subnormals, the overflow boundary, signed zeros."""
    last = 2 ** fmt.mantissa - 1
    fields = np.unique(np.clip(np.r_[0:9, last - 8:last + 1, 2 ** (fmt.mantissa - 1)], 0, last))
    grid = np.unique(grid_values(fmt, fields))
    ulp = np.ldexp(1.0, np.maximum(np.frexp(grid)[1] - 1, 2 - 2 ** (fmt.exponent - 1)) - fmt.mantissa)
    mids = grid + ulp / 2  # exact in float64: at most mantissa + 2 significant bits
    top = grid[-1]
    half_ulp = 2.0 ** (2 ** (fmt.exponent - 1) - 1 - fmt.mantissa - 1)
    tiny = fmt.smallest_subnormal
    boundary = np.array([top, top + half_ulp, np.nextafter(top + half_ulp, 0), top + 2 * half_ulp, 2 * top,
                         np.inf, tiny / 2, np.nextafter(tiny / 2, 1), tiny * 1.5, tiny * 2.5, 1e-300, 0.0])
    values = np.concatenate([grid, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), boundary])
    return np.concatenate([values, -values])


@pytest.mark.parametrize("fmt", FLOATS, ids=str)
def test_float_rounding_matches_mpfr_on_edges_and_random_values(fmt):
    rng = np.random.default_rng(fmt.bits)
    span = 2 ** (fmt.exponent - 1) + fmt.mantissa + 4
    with np.errstate(over="ignore"):  # float:20,11 reaches past float64's range: those values are inf
        random = np.ldexp(rng.uniform(1, 2, 3000), rng.integers(-span, span, 3000)) * rng.choice([-1, 1], 3000)
        values = np.concatenate([edge_values(fmt), random])
    ours, theirs = fmt.round(values), mpfr_round(fmt, values)
    assert np.array_equal(ours, theirs)
    assert np.array_equal(np.signbit(ours), np.signbit(theirs))  # the sign of zero and of infinities too


def test_float_rounding_by_hand():
    small = Float(3, 4)  # bias 7: max (2 - 1/8) 2^7 = 240, smallest subnormal 2^-9
    assert small.max_finite == 240.0 and small.smallest_subnormal == 2.0 ** -9
    cases = {1.0625: 1.0, 1.1875: 1.25, 247.99: 240.0, 248.0: np.inf, -248.0: -np.inf, 2.0 ** -10: 0.0,
             1.5 * 2.0 ** -9: 2.0 ** -8, 2.5 * 2.0 ** -9: 2.0 ** -8, 2.0 ** -10 * 1.001: 2.0 ** -9}
    got = small.round(np.array(list(cases)))
    assert got.tolist() == list(cases.values())
    assert np.signbit(small.round(np.array([-1e-30])))[0]
    assert FP16.round(np.array([65519.99, 65520.0, 2.0 ** -25, 3 * 2.0 ** -26])).tolist() == [
        65504.0, np.inf, 0.0, 2.0 ** -24]
    assert np.isnan(FP16.round(np.array([np.nan])))[0]
    assert FP64.round(np.array([0.1]))[0] == 0.1


@pytest.mark.parametrize("bits,fmt", [(16, FP16), (32, FP32), (64, FP64)])
def test_test_context_matches_gmpy2_ieee_presets(bits, fmt):
    ours, ieee = mpfr_context(fmt), gmpy2.ieee(bits)
    assert (ours.precision, ours.emax, ours.emin) == (ieee.precision, ieee.emax, ieee.emin)


def fixed_reference(fmt: Fixed, value: float) -> float:
    """Round to the grid with exact rationals; Python's round() of a Fraction rounds half to even."""
    return float(Fraction(round(Fraction(value) * 2 ** fmt.fraction), 2 ** fmt.fraction))


@pytest.mark.parametrize("fmt", [Fixed(4, 4), Fixed(6, 8), Fixed(0, 5), Fixed(12, 0)], ids=str)
def test_fixed_rounding_matches_rationals(fmt):
    rng = np.random.default_rng(fmt.bits)
    step = 2.0 ** -fmt.fraction
    grid = np.arange(-2 ** (fmt.integer + fmt.fraction), 2 ** (fmt.integer + fmt.fraction)) * step
    ties = grid[:-1] + step / 2
    values = np.concatenate([grid, ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf),
                             rng.uniform(fmt.lowest, fmt.highest, 2000)])
    values = values[(values >= fmt.lowest) & (values <= fmt.highest)]
    expected = np.array([fixed_reference(fmt, v) for v in values])
    assert np.array_equal(fmt.round(values), expected)


def test_fixed_rounding_by_hand_and_overflow_messages():
    fmt = Fixed(4, 4)  # grid 1/16, range [-16, 15.9375]
    assert (fmt.bits, fmt.lowest, fmt.highest) == (9, -16.0, 15.9375)
    assert fmt.round(np.array([1 / 32, 3 / 32, -1 / 32, -16.03125])).tolist() == [0.0, 0.125, 0.0, -16.0]
    with pytest.raises(OverflowInFormat, match=r"fixed:4,4 overflow in matmul at index \(1, 0\)"):
        fmt.round(np.array([[0.0, 1.0], [16.0, 20.0]]), "matmul")
    with pytest.raises(OverflowInFormat, match="in add"):
        fmt.round(np.array([15.96875]), "add")  # a tie whose even neighbour, 16, is out of range
    for bad in (np.inf, -np.inf, np.nan):
        with pytest.raises(OverflowInFormat):
            fmt.round(np.array([bad]))


@pytest.mark.parametrize("spec,expected", [
    ("fp16", Float(10, 5)), ("bf16", Float(7, 8)), ("fp32", Float(23, 8)), ("fp64", Float(52, 11)),
    ("float:3,4", Float(3, 4)), ("float:10,5", FP16), ("fixed:4,4", Fixed(4, 4)), (" fixed:0,7 ", Fixed(0, 7))])
def test_parse_format_and_names_round_trip(spec, expected):
    fmt = parse_format(spec)
    assert fmt == expected
    assert parse_format(fmt.name) == fmt


def test_bits_and_names():
    assert [f.bits for f in (FP16, BF16, FP32, FP64, Float(3, 4), Fixed(4, 4))] == [16, 16, 32, 64, 8, 9]
    assert [f.name for f in (FP16, BF16, Float(3, 4), Fixed(6, 8))] == ["fp16", "bf16", "float:3,4", "fixed:6,8"]


@pytest.mark.parametrize("spec", ["fp8", "float:3", "float:0,4", "float:3,1", "float:53,11", "float:3,12",
                                  "fixed:-1,2", "fixed:0,0", "fixed:30,30", "", "FLOAT:3,4", "float:3,4,5", 16])
def test_parse_format_rejects_bad_specs(spec):
    with pytest.raises(ParameterError):
        parse_format(spec)


@pytest.mark.parametrize("make", [lambda: Float(3, True), lambda: Float(2.5, 4), lambda: Fixed(-1, 3),
                                  lambda: Fixed(40, 20)])
def test_constructors_validate(make):
    with pytest.raises(ParameterError):
        make()


def test_formats_are_frozen():
    with pytest.raises(AttributeError):
        FP16.mantissa = 3


# -- correctly rounded exp ----------------------------------------------------------------------------------

def all_finite(fmt: Float) -> np.ndarray:
    grid = grid_values(fmt)
    return np.concatenate([grid, -grid])


@pytest.mark.parametrize("fmt", [Float(3, 4), Float(5, 5), FP16, BF16], ids=str)
def test_strict_exp_is_correctly_rounded_on_every_value_of_the_format(fmt):
    x = all_finite(fmt)
    x = x[x > -200]  # below this every exp rounds to zero in these formats; checked by the tail below
    ctx = mpfr_context(fmt)
    expected = np.array([float(ctx.exp(gmpy2.mpfr(v, 53))) for v in x])
    assert np.array_equal(arithmetic(fmt).exp(x), expected)
    assert np.array_equal(arithmetic(fmt).exp(np.array([-1e4, -np.inf, np.inf, 1e4])), [0.0, 0.0, np.inf, np.inf])


def hard_exp_arguments(fmt: Float, count: int, rng) -> np.ndarray:
    """Format values x whose float64 exp lies within 2^-38 (relative) of a rounding midpoint of `fmt`: the cases
    a float64 exp cannot decide alone. Found by scanning random candidates."""
    x = fmt.round(rng.uniform(-80, 80, count))
    y = np.exp(x)
    ulp = np.ldexp(1.0, np.frexp(y)[1] - 1 - fmt.mantissa)
    distance = np.abs(np.abs(y - fmt.round(y)) - ulp / 2)
    return x[distance <= y * 2.0 ** -38]


@pytest.mark.parametrize("fmt,count", [(FP32, 40000), (FP64, 20000)], ids=str)
def test_strict_exp_is_correctly_rounded_on_random_values_including_hard_cases(fmt, count):
    rng = np.random.default_rng(7)
    x = fmt.round(np.concatenate([rng.uniform(-100, 80, count // 2), rng.uniform(-4, 4, count // 2)]))
    if fmt == FP32:
        hard = hard_exp_arguments(fmt, 4_000_000, rng)
        assert hard.size >= 20
        x = np.concatenate([x, hard])
    ctx = mpfr_context(fmt)
    expected = np.array([float(ctx.exp(gmpy2.mpfr(v, 53))) for v in x])
    assert np.array_equal(arithmetic(fmt).exp(x), expected)


def fixed_exp_reference(fmt: Fixed, x: float) -> float:
    """exp(x) at 300 bits, rounded to the grid with rationals (exp(x) is never a midpoint for x != 0)."""
    value = gmpy2.context(precision=300).exp(gmpy2.mpfr(x, 53))
    return float(Fraction(round(Fraction(gmpy2.mpq(value)) * 2 ** fmt.fraction), 2 ** fmt.fraction))


@pytest.mark.parametrize("fmt", [Fixed(4, 4), Fixed(6, 8), Fixed(3, 12)], ids=str)
def test_strict_exp_fixed_is_correctly_rounded_and_overflow_names_exp(fmt):
    step = 2.0 ** -fmt.fraction
    x = np.arange(-2 ** (fmt.integer + fmt.fraction), 2 ** (fmt.integer + fmt.fraction)) * step
    x = x[x <= np.log(fmt.highest)]
    expected = np.array([fixed_exp_reference(fmt, v) for v in x])
    assert np.array_equal(arithmetic(fmt).exp(x), expected)
    with pytest.raises(OverflowInFormat, match=f"{fmt.name} overflow in exp"):
        arithmetic(fmt).exp(np.array([0.0, fmt.highest]))


def test_exp_fallback_runs_on_hard_cases(monkeypatch):
    import witness.arith.semantics as semantics

    calls = []
    original = semantics._exp_enclosed
    monkeypatch.setattr(semantics, "_exp_enclosed", lambda x, fmt: calls.append(x) or original(x, fmt))
    hard = hard_exp_arguments(FP32, 1_000_000, np.random.default_rng(3))
    ctx = mpfr_context(FP32)
    assert np.array_equal(arithmetic(FP32).exp(hard), [float(ctx.exp(gmpy2.mpfr(v, 53))) for v in hard])
    assert len(calls) >= 1


def test_fp64_exp_without_extended_long_double_goes_to_mpfr(monkeypatch):
    import witness.arith.semantics as semantics

    monkeypatch.setattr(semantics, "_LONG_DOUBLE_IS_EXTENDED", False)
    x = np.concatenate([np.random.default_rng(5).uniform(-50, 50, 2000), [0.0, -np.inf, np.inf, np.nan]])
    ctx = mpfr_context(FP64)
    expected = np.array([float(ctx.exp(gmpy2.mpfr(v, 53))) for v in x])
    assert np.array_equal(arithmetic(FP64).exp(x), expected, equal_nan=True)
