"""verify.search.report: the gate every reported pair passes, and the report's JSON object."""

from __future__ import annotations

import numpy as np

import witness
from tests.oracles.reference_tasks import composition_answer_from_tokens
from verify.result import Counterexample
from verify.search.report import Pair, SearchReport, confirm_pair
from witness.arith import FLOAT64, arithmetic


def answer(tokens) -> int:
    return composition_answer_from_tokens(3, (), np.asarray(tokens))


def test_a_pair_is_reported_only_when_a_fresh_run_gives_one_output_on_two_answers():
    construction = witness.compile("composition", L=1, m=3)
    W_U = np.zeros_like(np.asarray(construction.state_dict()["unembed.W_U"]))
    blind = construction.with_arrays({"unembed.W_U": W_U})  # the readout ignores the stream: one output for all
    inputs = construction.task.random_tokens(0, 300)
    by_answer = {a: next(row for row in inputs if answer(row) == a) for a in (0, 1, 2)}
    output = int(blind.run(by_answer[1]))
    pair = confirm_pair(blind, by_answer[1], by_answer[2], FLOAT64)
    assert pair == Pair([int(t) for t in by_answer[1]], [int(t) for t in by_answer[2]], 1, 2, output)
    assert confirm_pair(blind, by_answer[1], by_answer[1], FLOAT64) is None  # the same answer proves nothing
    assert confirm_pair(construction, by_answer[1], by_answer[2], FLOAT64) is None  # different outputs


def test_a_pair_whose_run_overflows_is_not_reported():
    construction = witness.compile("composition", L=1, m=3)
    tight = arithmetic("fixed:1,3", "strict")  # the weights do not fit: every run overflows, so no output is equal
    inputs = construction.task.random_tokens(1, 300)
    a = inputs[0]
    b = next(row for row in inputs if answer(row) != answer(a))
    assert confirm_pair(construction, a, b, tight) is None


def test_the_report_is_plain_json_data():
    report = SearchReport("net.npz", "fp16", "strict", {"H": 1}, [Counterexample([0, 1], 1, 0)],
                          [Pair([0], [1], 0, 1, 0)], {"probes": [], "inputs": 0, "seconds": 0.0})
    assert report.as_dict() == {"network": "net.npz", "format": "fp16", "semantics": "strict", "budget": {"H": 1},
                                "failures": [{"tokens": [0, 1], "expected": 1, "output": 0, "trace": {}}],
                                "pairs": [{"a": [0], "b": [1], "expected_a": 0, "expected_b": 1, "output": 0}],
                                "searched": {"probes": [], "inputs": 0, "seconds": 0.0}}
