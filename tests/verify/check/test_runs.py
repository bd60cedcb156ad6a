"""verify.check.runs: judging a batch, the counterexample's traced re-run, the fresh-run gate and the verdict."""

from __future__ import annotations

import numpy as np
import pytest

import witness
from tests.oracles.reference_tasks import composition_answer_from_tokens
from verify.check import runs
from verify.result import Counterexample, Status
from witness.arith import FLOAT64, arithmetic
from witness.errors import ParameterError
from witness.execute import run


@pytest.fixture(scope="module")
def construction():
    return witness.compile("composition", L=1, m=3)


def answer(tokens) -> int:
    return composition_answer_from_tokens(3, (), np.asarray(tokens))


def test_the_verdict_is_verified_only_for_as_many_inputs_as_the_family_has():
    fp16 = arithmetic("fp16", "strict")
    example = Counterexample([0], 1, 2)
    assert runs.verdict("exhaustive", fp16, 81, 0, None, family_size=81).status is Status.VERIFIED
    assert runs.verdict("exhaustive", fp16, 80, 0, None, family_size=81).status is Status.UNKNOWN
    assert runs.verdict("exhaustive", fp16, 82, 0, None, family_size=81).status is Status.UNKNOWN
    assert runs.verdict("sampled", fp16, 81, 0, None).status is Status.UNKNOWN
    assert runs.verdict("exhaustive", fp16, 81, 1, example, family_size=81).status is Status.FALSIFIED
    stopped = runs.verdict("exhaustive", fp16, 3, 1, example, family_size=81, stopped_by_overflow="overflow")
    assert stopped.detail == {"stopped_by_overflow": "overflow"}


def test_a_theory_verdict_says_what_it_rests_on():
    theory = arithmetic("fp16", "theory")
    result = runs.verdict("sampled", theory, 5, 0, None, detail={"seed": 1})
    assert result.detail == {"seed": 1, "rests_on": runs.THEORY_RUNS}
    assert "rests_on" not in runs.verdict("sampled", arithmetic("fp16", "strict"), 5, 0, None).detail


def test_confirm_failure_reruns_from_scratch(construction):
    W_U = np.array(construction.state_dict()["unembed.W_U"])
    W_U[:, 0] = 0.0  # answer 0 can no longer win
    network = construction.with_arrays({"unembed.W_U": W_U})
    tokens = next(row for row in construction.task.random_tokens(0, 200) if answer(row) == 0)
    confirmed = runs.confirm_failure(network, tokens, FLOAT64)
    assert confirmed == Counterexample([int(t) for t in tokens], 0,
                                       int(run(network, np.asarray(tokens), FLOAT64).predictions[0, 0]))
    assert runs.confirm_failure(construction, tokens, FLOAT64) is None


def test_the_gate_drops_a_failure_a_fresh_run_does_not_confirm(construction):
    """Findings trusts nothing the caller says about a row: handed inputs the network answers rightly, it counts
    them (the caller's judgement) but keeps none, since the fresh run finds them answered."""
    rows = construction.task.random_tokens(1, 4)
    findings = runs.Findings(construction, FLOAT64, max_failures=4)
    findings.add(rows)
    assert (findings.failures, findings.kept) == (4, [])
    assert findings.counterexample.tokens == [int(t) for t in rows[0]]


def test_findings_keep_at_most_max_failures_and_count_distinct_inputs_once(construction):
    W_U = np.array(construction.state_dict()["unembed.W_U"])
    W_U[:, :] = 0.0  # every logit ties: every input is wrong
    network = construction.with_arrays({"unembed.W_U": W_U})
    rows = construction.task.random_tokens(2, 6)
    counted = runs.Findings(network, FLOAT64, max_failures=2)
    counted.add(rows)
    counted.add(rows)
    assert counted.failures == 12 and [f.tokens for f in counted.kept] == [[int(t) for t in r] for r in rows[:2]]
    distinct = runs.Findings(network, FLOAT64, max_failures=10, distinct=True)
    distinct.add(np.concatenate([rows, rows]))
    distinct.add(rows[:3])
    assert distinct.failures == len({tuple(r) for r in rows.tolist()})
    result = distinct.result("margin", 100, detail={"seed": 0})
    assert (result.status, result.checked, result.failures, result.detail) == (Status.FALSIFIED, 100,
                                                                              distinct.failures, {"seed": 0})
    with pytest.raises(ParameterError, match="max_failures"):
        runs.Findings(network, FLOAT64, max_failures=-1)


def test_wrong_rows_until_overflow_covers_the_rows_up_to_the_first_overflow(construction):
    W_E = np.array(construction.state_dict()["embed.W_E"], dtype=np.float64)
    W_E[2, construction.basis.labels.index("one")] = 15.0  # token 2 overflows fixed:4,4
    network = construction.with_arrays({"embed.W_E": W_E})
    arith = arithmetic("fixed:4,4", "strict")
    batch = np.array([[0, 0, 0, 0, 3], [0, 0, 0, 1, 3], [0, 0, 0, 2, 3], [0, 0, 1, 0, 3]])
    wrong, overflow = runs.wrong_rows_until_overflow(network, batch, arith)
    assert wrong.tolist() == [False, False, True] and overflow.startswith("fixed:4,4 overflow")
    assert runs.first_overflowing_row(network, batch, arith) == 2
    wrong, overflow = runs.wrong_rows_until_overflow(network, batch[:2], arith)
    assert wrong.tolist() == [False, False] and overflow is None


def test_a_counterexample_whose_traced_run_overflows_comes_from_the_plain_run():
    # composition L = 1, m = 2 (4 tokens), d_model 1: position 0 holds 4 and an MLP doubles it, 8, outside fixed:3,2
    # ([-8, 7.75]); the readout reads the last position, which holds 0. The plain run never computes position 0's
    # MLP (docs/conventions.md §3) and answers; the traced run computes it and overflows.
    from witness.ir import MLP, Basis, Embedding, Layer, Meta, Network, Readout
    from witness.mixers import Attention
    from witness.tasks import Composition

    task = Composition(L=1, m=2)
    zero = np.zeros((1, 1, 1))
    positions = np.zeros((task.prompt_length, 1))
    positions[0] = 4.0
    network = Network(Embedding(np.zeros((task.vocab_size, 1)), positions),
                      (Layer(Attention.zeros_bias(zero, zero, zero, zero),
                             MLP(np.array([[2.0]]), np.zeros(1), np.array([[1.0]]), np.zeros(1))),),
                      Readout(np.array([[1.0, -1.0]]), np.array([0.0, 0.25])), Basis(("x[0]",)),
                      Meta(task="composition", params=task.params()))
    arith = arithmetic("fixed:3,2", "strict")
    tokens = task.random_tokens(np.random.default_rng(0), 1)[0]
    with pytest.raises(witness.errors.OverflowInFormat):
        run(network, tokens, arith, trace=True)
    found = runs.counterexample_for(network, tokens, arith)
    assert found.output == 1 and found.trace == {}
    assert found.expected == int(task.answers(tokens).reshape(-1)[0])


def test_a_network_without_a_task_has_nothing_to_be_checked_against(construction):
    from witness.ir import Meta, Network

    bare = Network(construction.embedding, construction.layers, construction.readout, construction.basis, Meta())
    with pytest.raises(ParameterError, match="names no task"):
        runs.task_of(bare)
