"""The trusted checker (verify.checker) is independent of what it checks and exact in its arithmetic: its modules
import the standard library, numpy, gmpy2, safetensors and each other only; `Format.round_array` agrees with the
Fraction definition `Format.round` (random values, ties, subnormals, overflow); its exp is correctly rounded,
compared with MPFR's own IEEE emulation (another path)."""

from __future__ import annotations

import ast
import sys
from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from verify import checker
from verify.checker.numbers import parse_format

from tests import REPO

CHECKER = REPO / "verify" / "checker"
ALLOWED = {"numpy", "gmpy2", "mpmath", "sympy", "safetensors", "verify"}


# -- independence -----------------------------------------------------------------------------------------------
def test_the_checker_imports_nothing_of_what_it_checks():
    seen = set()
    for path in sorted(CHECKER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path.name}: relative import"
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                seen.add(name)
                assert top in sys.stdlib_module_names or top in ALLOWED, f"{path.name} imports {name}"
                if top == "verify":
                    assert name.startswith("verify.checker"), f"{path.name} imports {name}"
    assert "numpy" in seen and "verify.checker.numbers" in seen


# -- arithmetic -------------------------------------------------------------------------------------------------
FORMATS = ["float:1,3", "float:2,3", "float:3,4", "float:5,5", "fp16", "bf16", "float:10,6", "fp32",
           "fixed:3,2", "fixed:6,8", "fixed:12,12"]


@pytest.mark.parametrize("spec", FORMATS)
def test_vectorised_rounding_is_the_fraction_definition(spec):
    fmt = parse_format(spec)
    rng = np.random.default_rng(len(spec))
    largest = float(fmt.largest)
    values = rng.uniform(-1, 1, 3000) * largest * np.exp(-rng.uniform(0, 40, 3000))
    quantum = float(fmt.quantum(Fraction(0)))
    ties = (np.arange(-200, 200) + 0.5) * quantum  # midpoints of the finest grid: ties to even
    binade_ties = np.array([2.0 ** e * (1 + 2.0 ** -(fmt.mantissa + 1)) for e in range(-3, 4)]) if fmt.kind == "float" \
        else np.array([])
    for x in np.concatenate([values, ties, binade_ties, [0.0, -0.0, largest, -float(fmt.largest)]]):
        if abs(x) > largest:
            continue
        assert Fraction(float(fmt.round_array(np.array([x]))[0])) == fmt.round(Fraction(x)), (spec, x)
    with pytest.raises(checker.Refused, match="overflows"):
        fmt.round_array(np.array([largest * 2]))
    with pytest.raises(checker.Refused, match="overflows"):
        fmt.round(Fraction(largest) * 2)


@pytest.mark.parametrize("spec", ["float:2,3", "float:3,4", "fp16", "bf16", "fp32", "fp64"])
def test_exp_is_correctly_rounded(spec):
    """Against MPFR's IEEE emulation of the format (precision, exponent range, subnormals): another code path."""
    fmt = parse_format(spec)
    context = gmpy2.context(precision=fmt.mantissa + 1, emax=fmt.emax + 1, emin=fmt.emin - fmt.mantissa + 1,
                            subnormalize=True)
    rng = np.random.default_rng(1)
    arguments = fmt.round_array(np.maximum(-rng.exponential(4.0, 400), -float(fmt.largest)))
    for x in arguments:
        assert fmt.exp(x) == float(context.exp(gmpy2.mpfr(float(x), 53))), (spec, x)


def test_fixed_exp_rounds_to_the_grid():
    fmt = parse_format("fixed:4,6")
    for x in fmt.round_array(-np.linspace(0, 6, 97)):
        with gmpy2.context(precision=300):
            exact = Fraction(*gmpy2.exp(gmpy2.mpfr(float(x))).as_integer_ratio())  # 300 bits: far from any tie
        assert Fraction(fmt.exp(x)) == round(exact * 64) / 64


def test_the_checker_assumes_the_float64_exp_error_the_executor_assumes():
    """The checker imports nothing of witness, so it restates the bound on numpy's exp that both rely on."""
    from verify.checker.numbers import FLOAT64_EXP_ERROR
    from witness.arith.semantics import EXP_RELATIVE_ERROR
    assert FLOAT64_EXP_ERROR == Fraction(EXP_RELATIVE_ERROR)
