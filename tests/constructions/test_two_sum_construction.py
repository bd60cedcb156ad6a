"""The one-layer 2-Sum network (conventions §4.3) answers every position of every input it is claimed to, in float64.

Expected bits come from `reference_bits`, a literal double loop over pairs written here, never from the task code
under test; exactness is checked as equality of bits, and the stated readout margin on the logits themselves.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import witness
from constructions import two_sum
from verify import check
from verify.result import Status
from lab import strategies
from cli.main import main
from witness.execute import run


def reference_bits(tokens, M: int, t: int, causal: bool) -> list[int]:
    """y_i = 1 iff some j != i (causal: j < i) has x_i + x_j = t mod M: the definition, pair by pair."""
    tokens = [int(x) for x in tokens]
    bits = []
    for i, x_i in enumerate(tokens):
        partners = range(i) if causal else [j for j in range(len(tokens)) if j != i]
        bits.append(int(any((x_i + tokens[j]) % M == t for j in partners)))
    return bits


def readout_margins(net, batch) -> np.ndarray:
    """|logit_1 - logit_0| at every position: the construction claims at least 1/4 minus its float64 error."""
    logits = run(net, np.asarray(batch)).logits
    return np.abs(logits[..., 1] - logits[..., 0])


def claimed_margin(net) -> float:
    return two_sum.MARGIN - net.meta.notes["float64_error_bound"]


@pytest.mark.parametrize("n, M", list(itertools.product(range(2, 6), range(2, 6))))
def test_every_input_of_small_families(n, M):
    inputs = np.array(list(itertools.product(range(M), repeat=n)), dtype=np.int64)
    for t in range(M):
        for causal in (False, True):
            net = witness.compile("two_sum", n=n, M=M, t=t, causal=causal)
            result = check.exhaustive(net)
            assert result.status == Status.VERIFIED, (t, causal, result.counterexample)
            assert result.checked == M**n and result.failures == 0
            # the same claim without the verifier or the task code
            expected = [reference_bits(row, M, t, causal) for row in inputs]
            assert net.run(inputs) == expected, (t, causal)
            assert readout_margins(net, inputs).min() >= claimed_margin(net)


@pytest.mark.parametrize("n, M, t, causal, count", [
    (64, 64, 0, False, 200), (64, 64, 0, True, 200), (64, 64, 17, False, 200), (64, 64, 63, True, 200),
    (256, 300, 123, False, 40), (256, 7, 3, True, 40), (256, 64, 32, False, 40), (100, 2, 0, False, 40),
])
def test_random_inputs_of_larger_families(n, M, t, causal, count):
    net = witness.compile("two_sum", n=n, M=M, t=t, causal=causal)
    batch = np.random.default_rng(n * 1000 + M + t).integers(0, M, size=(count, n))
    assert net.run(batch) == [reference_bits(row, M, t, causal) for row in batch]
    assert readout_margins(net, batch).min() >= claimed_margin(net)


@pytest.mark.parametrize("causal", [False, True])
def test_self_matches_and_lone_matches_at_n_256(causal):
    """The cases that need the position codes: x_i with 2 x_i = t alone, in pairs, and among near misses."""
    n, M, t = 256, 64, 10
    net = witness.compile("two_sum", n=n, M=M, t=t, causal=causal)
    rng = np.random.default_rng(5)
    filler = 40  # 40 + 40 != 10 and 40 + 5 != 10 and 40 + 37 != 10 (mod 64): no match with anything used here
    rows = []
    for self_matches in (0, 1, 2, 3):
        for near_miss in (False, True):
            row = np.full(n, filler)
            spots = rng.choice(n, size=self_matches + 2, replace=False)
            row[spots[:self_matches]] = 5 if self_matches != 3 else 37  # 2*5 = 10, 2*37 = 74 = 10 (mod 64)
            if near_miss:
                row[spots[-2:]] = [4, 7]  # partners 6 and 3: absent, but codes within one bit of 5's partner
            rows.append(row)
    rows.append(np.r_[5, np.full(n - 1, filler)])  # position 0 holds the only self-match
    rows.append(np.r_[np.full(n - 1, filler), 5])  # the last position does
    batch = np.array(rows)
    predicted = net.run(batch)
    assert predicted == [reference_bits(row, M, t, causal) for row in batch]
    assert sum(map(sum, predicted)) > 0  # the family does contain positive bits
    assert readout_margins(net, batch).min() >= claimed_margin(net)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_hypothesis_small_tasks(data):
    task = data.draw(strategies.tasks("two_sum", max_n=9, max_M=12))
    batch = data.draw(strategies.tokens(task, max_batch=4))
    net = witness.compile("two_sum", n=task.n, M=task.M, t=task.t, causal=task.causal)
    assert net.run(batch) == [reference_bits(row, task.M, task.t, task.causal) for row in batch]


# -- the argument's constants --------------------------------------------------------------------------------
@pytest.mark.parametrize("n, M", [(2, 2), (5, 3), (64, 64), (256, 300), (1000, 17), (2**24, 2**24)])
def test_scale_meets_the_off_match_mass_bound(n, M):
    b_n, b_M = math.ceil(math.log2(n)), math.ceil(math.log2(M))
    lam = two_sum.attention_scale(n, b_n, b_M)
    eps = 1 / (8 * (b_n + 1) * (b_M + 1))
    assert (n - 1) * math.exp(-2 * lam) <= eps
    assert lam == 1 or (n - 1) * math.exp(-2 * (lam - 1)) > eps  # and it is the smallest such integer
    # the float64 error stays far inside the margin over the whole accepted range (docstring: below 2^-16)
    assert two_sum.float64_error_bound(n, b_n, b_M, b_n + 1) < 2.0**-16


@pytest.mark.parametrize("n, M", [(2, 2), (5, 3), (64, 64), (256, 300), (3, 1025)])
def test_budget(n, M):
    net = witness.compile("two_sum", n=n, M=M, t=1)
    b_n, b_M = math.ceil(math.log2(n)), math.ceil(math.log2(M))
    budget = net.budget()
    assert (budget.n_layers, budget.H) == (1, 1)
    assert budget.d_head == b_M + b_n
    assert budget.d_model == 3 * b_M + 2 * b_n + 1
    assert net.layers[0].mlp.d_mlp == 2 * (b_M + b_n)
    assert net.readout.read == "all" and net.d_vocab_out == 2
    assert net.meta.task == "two_sum" and net.meta.construction == "two_sum"
    assert net.task == witness.TwoSum(n, M, 1)


def test_causal_flag_sets_the_mask():
    assert not witness.compile("two_sum", n=4, M=4, t=0).layers[0].mixer.causal
    assert witness.compile("two_sum", n=4, M=4, t=0, causal=True).layers[0].mixer.causal


# -- each part of the argument is needed: remove it and some input fails ---------------------------------------
def test_without_the_position_test_a_lone_self_match_is_answered_wrongly():
    net = witness.compile("two_sum", n=4, M=4, t=2)
    W_out = np.array(net.layers[0].mlp.W_out)
    W_out[W_out > 0] = 0.0  # drop the +P_i term, keep -beta D_i - 1/2
    broken = net.with_arrays({"blocks.0.mlp.W_out": W_out})
    result = check.exhaustive(broken)
    assert result.status == Status.FALSIFIED
    assert result.counterexample.expected != result.counterexample.output


def test_with_too_small_a_scale_the_network_fails():
    net = witness.compile("two_sum", n=5, M=5, t=1)
    broken = net.with_arrays({"blocks.0.attn.W_Q": np.array(net.layers[0].mixer.W_Q) / net.meta.notes["lambda"] / 8})
    assert check.exhaustive(broken).status == Status.FALSIFIED


# -- refusals ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("params, message", [
    ({"n": 1, "M": 4, "t": 0}, "n must be >= 2"),
    ({"n": 4, "M": 1, "t": 0}, "M must be >= 2"),
    ({"n": 4, "M": 4, "t": 4}, r"t must be in \[0, M\)"),
    ({"n": 4, "M": 4, "t": -1}, "t must be >= 0"),
    ({"n": 2.5, "M": 4, "t": 0}, "n must be an integer"),
    ({"n": 4, "M": 4, "t": 0, "causal": "yes"}, "causal must be a bool"),
    ({"n": 2**24 + 1, "M": 4, "t": 0}, "needs n <= 2\\^24"),
    ({"n": 4, "M": 2**24 + 1, "t": 0}, "needs M <= 2\\^24"),
    ({"n": 4, "M": 4}, "bad parameters for construction two_sum"),
])
def test_bad_parameters(params, message):
    with pytest.raises(witness.ParameterError, match=message):
        witness.compile("two_sum", **params)


# -- command line -----------------------------------------------------------------------------------------------
def test_cli_compile_and_run_prints_bits(tmp_path, capsys):
    path = str(tmp_path / "net.npz")
    assert main(["compile", "two_sum", "--n", "64", "--M", "64", "--t", "0", "-o", path]) == 0
    capsys.readouterr()
    tokens = np.random.default_rng(3).integers(0, 64, size=64)
    expected = reference_bits(tokens, 64, 0, False)
    assert main(["run", path, "--tokens", ",".join(map(str, tokens))]) == 0
    assert capsys.readouterr().out.split() == [str(bit) for bit in expected]
    assert main(["run", path, "--tokens", ",".join(map(str, tokens)), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"output": expected}


def test_cli_causal_flag(tmp_path, capsys):
    path = str(tmp_path / "causal.npz")
    assert main(["compile", "two_sum", "--n", "5", "--M", "6", "--t", "2", "--causal", "-o", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params"] == {"n": 5, "M": 6, "t": 2, "causal": True}
    tokens = [1, 1, 4, 3, 5]
    assert main(["run", path, "--tokens", ",".join(map(str, tokens)), "--json"]) == 0
    # 1+1 = 2 (position 1 sees 0), 4: partner 4 not earlier, 3: partner 5 not earlier, 5: partner 3 earlier
    assert json.loads(capsys.readouterr().out) == {"output": [0, 1, 0, 0, 1]}


@pytest.mark.parametrize("argv, message", [
    (["compile", "two_sum", "--n", "1", "--M", "4", "--t", "0"], "n must be >= 2"),
    (["compile", "two_sum", "--n", "4", "--M", "4"], "--t"),
    (["compile", "two_sum", "--n", "4", "--M", "4", "--t", "9"], "t must be in [0, M)"),
])
def test_cli_refuses_bad_parameters(tmp_path, capsys, argv, message):
    assert main(argv + ["-o", str(tmp_path / "x.npz")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
