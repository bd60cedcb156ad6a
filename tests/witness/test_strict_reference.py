"""The vectorised `strict` executor agrees bit for bit with the scalar MPFR reference (tests.oracles.mpfr_reference)."""

import ast
import inspect
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import witness
from verify import check
from lab import strategies as ws
from witness.arith import Fixed, Float, arithmetic, parse_format
from tests.oracles import mpfr_reference as scalar_reference
from witness.arith import mpfr
from witness.errors import InputError, OverflowInFormat
from witness.execute import run
from witness.ir import Basis, Embedding, Meta, Network, Readout
from witness.mixers import MIXERS
from tests.oracles.mpfr_reference import reference_run
from tests.oracles.strict_agreement import assert_strict_matches_reference

RANDOM_NETWORKS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("spec", ["float:3,4", "float:5,5", "fp16", "bf16", "fp32", "fp64", "float:1,3",
                                  "float:24,9", "fixed:4,4", "fixed:6,8", "fixed:2,3"])
@RANDOM_NETWORKS
@given(net_and_tokens=ws.networks())
def test_strict_matches_mpfr_reference_on_random_networks(spec, net_and_tokens):
    event(assert_strict_matches_reference(*net_and_tokens, parse_format(spec)))


@pytest.mark.parametrize("spec", ["float:3,4", "fp16", "fixed:10,6"])
@RANDOM_NETWORKS
@given(net_and_tokens=ws.networks(scale=16.0))
def test_strict_matches_mpfr_reference_where_values_overflow(spec, net_and_tokens):
    """Large weights: float:3,4 (max 240) overflows to ±inf and produces NaN; fp16 sometimes; fixed:10,6 raises."""
    event(assert_strict_matches_reference(*net_and_tokens, parse_format(spec)))


def readout_network(W_E, W_pos, W_U, b_U) -> Network:
    """No layers: logits = (W_E[t] + W_pos[i]) W_U + b_U at the last position."""
    W_E, W_pos = np.array(W_E, dtype=float), np.array(W_pos, dtype=float)
    return Network(Embedding(W_E, W_pos), (), Readout(np.array(W_U, dtype=float), np.array(b_U, dtype=float)),
                   Basis(tuple(f"x[{k}]" for k in range(W_E.shape[1]))), Meta())


def test_reference_by_hand():
    # float:3,4 keeps 3 fraction bits: 1 + 1/16 is a tie between 1 and 1 + 1/8 and rounds to the even 1.
    network = readout_network([[1.0]], [[0.0625]], [[1.0, 0.9375]], [0.0, 0.125])
    reference = reference_run(network, [0], Float(3, 4))
    # logit 1 = round(round(1 * 0.9375) + 0.125) = round(1.0625) = 1: a tie with logit 0, so no prediction.
    assert reference.logits.tolist() == [[1.0, 1.0]]
    assert reference.predictions.tolist() == [-1]
    assert reference_run(network, [0], Float(10, 5)).logits.tolist() == [[1.0625, 1.12109375]]
    with pytest.raises(OverflowInFormat, match="fixed:1,1 overflow"):
        reference_run(readout_network([[1.5]], [[1.0]], [[1.0]], [0.0]), [0], Fixed(1, 1))


def test_reference_rejects_tokens_that_do_not_fit():
    network = readout_network([[1.0]], [[0.0]], [[1.0]], [0.0])
    for tokens in ([], [1], [0, 0]):
        with pytest.raises(InputError):
            reference_run(network, tokens, Float(3, 4))


def module_imports(module) -> set[str]:
    tree = ast.parse(inspect.getsource(module))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return imported | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}


def reachable(function) -> set:
    """Every witness function `function` can call: through the global names its code (nested functions
    included) reads, and through the functions its closure holds (the kinds' kernels and references are built
    by factories), transitively."""
    seen, todo = set(), [function]
    while todo:
        current = todo.pop()
        if not isinstance(current, types.FunctionType) or (current := inspect.unwrap(current)) in seen:
            continue
        seen.add(current)
        codes = [current.__code__]
        while codes:
            code = codes.pop()
            codes.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
            todo.extend(current.__globals__[name] for name in code.co_names if name in current.__globals__)
        todo.extend(cell.cell_contents for cell in current.__closure__ or ())
    return {f for f in seen if f.__module__.startswith("witness")}


def reads_numpy(function) -> bool:
    names = set()
    for f in reachable(function):
        codes = [f.__code__]
        while codes:
            code = codes.pop()
            codes.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
            names |= {name for name in code.co_names if f.__globals__.get(name) is np}
    return bool(names)


def test_reference_shares_no_code_with_the_executor():
    assert module_imports(mpfr) == {"__future__", "fractions", "gmpy2", "numpy", "witness.arith.formats",
                                    "witness.errors"}
    assert module_imports(scalar_reference) == {"__future__", "dataclasses", "numpy", "witness.arith.formats",
                                         "witness.arith.mpfr", "witness.errors", "witness.ir", "witness.mixers"}
    assert not reachable(reference_run) & reachable(run)
    for kind, mixer in MIXERS.items():
        kernel, scalar = reachable(mixer.kernel), reachable(mixer.reference)
        assert kernel and scalar and not kernel & scalar, (kind, kernel & scalar)
        assert not reads_numpy(mixer.reference), kind


def test_composition_is_exact_under_fp16_strict_on_every_input():
    network = witness.compile("composition", L=2, m=2, n=[2])
    result = check.exhaustive(network, arithmetic("fp16", "strict"))
    assert (result.status.value, result.checked, result.failures) == ("verified", 4096, 0)


@pytest.mark.parametrize("spec", ["float:3,4", "fp16", "fixed:6,8"])
@RANDOM_NETWORKS
@given(net_and_tokens=ws.networks(), seed=st.integers(0, 2**32 - 1))
def test_strict_matches_mpfr_reference_with_sparse_weights(spec, net_and_tokens, seed):
    """Zero rows and columns in weight matrices (as constructions have) take the executor's skipping path."""
    network, tokens = net_and_tokens
    rng = np.random.default_rng(seed)
    sparse = {}
    for name, array in network.state_dict().items():
        if array.ndim >= 2:
            array = array * (rng.random(array.shape[-2]) < 0.5)[:, None] * (rng.random(array.shape[-1]) < 0.5)
        sparse[name] = array
    event(assert_strict_matches_reference(network.with_arrays(sparse), tokens, parse_format(spec)))


@pytest.mark.parametrize("spec", ["float:3,4", "fp16", "fixed:6,8"])
def test_strict_matches_mpfr_reference_on_the_composition_network(spec):
    network = witness.compile("composition", L=2, m=2, n=[2])
    tokens = network.task.random_tokens(np.random.default_rng(0), 2)
    assert assert_strict_matches_reference(network, tokens, parse_format(spec)) == "finite logits"
