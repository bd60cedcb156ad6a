"""verify.search.probes: the generic checks every search runs, the registry of task probes the task records name,
`search_network`, and the `searched` record.

Every expected answer comes from the plain reference in reference_tasks.py, every output from a fresh executor run;
the search code is trusted for nothing it reports.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import witness
from lab import architectures
from tests.oracles.reference_tasks import all_composition_inputs
from tests.verify.search.test_pairs import LOW, TASK, assert_replayable_failure, reference
from verify import check
from verify.search import probes
from verify.result import Status
from verify.search.probes import PROBES, Effort, search_network
from verify.search.report import Pair
from witness.arith import arithmetic, parse_format
from witness.errors import ParameterError
from witness.execute import run
from witness.tasks import RECORDS, record_of

FP64 = arithmetic(parse_format("fp64"), "strict")
FP16 = arithmetic(parse_format("fp16"), "strict")


@pytest.fixture(scope="module")
def small_construction():
    return witness.compile("composition", L=2, m=2, n=[2])


def broken(network):
    """Layer 1's block indicator in the query zeroed: the construction then misreads many inputs."""
    W_Q = np.array(network.state_dict()["blocks.1.attn.W_Q"])
    W_Q[0, 0, 0] = 0.0
    return network.with_arrays({"blocks.1.attn.W_Q": W_Q})


def without_seconds(searched: dict) -> dict:
    return {**searched, "seconds": 0, "probes": [{**record, "seconds": 0} for record in searched["probes"]]}


# -- the generic checks ---------------------------------------------------------------------------------------------
def test_a_small_family_is_run_whole_and_counted_as_a_plain_loop_counts(small_construction):
    network = broken(small_construction)
    inputs = np.array(list(all_composition_inputs(2, (2,))))
    outputs = run(network, inputs, FP64).predictions[:, 0]
    wrong = sum(int(out) != reference(network.task, row) for out, row in zip(outputs, inputs))
    assert wrong > 0
    checks = probes.generic_checks(network, FP64, Effort(max_failures=3))
    assert [record["method"] for _, record in checks] == ["exhaustive", "hypothesis"]
    (result, record), _ = checks
    assert {key: record[key] for key in ("method", "inputs", "failing", "family_size")} == {
        "method": "exhaustive", "inputs": len(inputs), "failing": wrong, "family_size": len(inputs)}
    assert record["inputs"] == result.checked and record["failing"] == result.failures
    assert len(result.kept) == 3
    for failure in result.kept:
        assert_replayable_failure(network, failure, FP64)


def test_a_large_family_is_sampled_with_the_margin_checks_beside_the_samples():
    network = architectures.full(TASK, layers=1, H=1, d_head=4, d_model=8, seed=0)
    checks = probes.generic_checks(network, LOW, Effort(samples=150, hypothesis_examples=10, seed=2))
    records = [record for _, record in checks]
    assert [r["method"] for r in records] == ["sampled", "margin", "hypothesis_margin", "hypothesis"]
    assert [r["inputs"] for r in records[:3]] == [150, 150, 10] and all(r["seed"] == 2 for r in records)
    for result, _ in checks:
        assert result.status is not Status.VERIFIED
        for failure in result.kept:
            assert_replayable_failure(network, failure, LOW)


def test_the_checks_find_nothing_on_the_correct_construction(small_construction):
    checks = probes.generic_checks(small_construction, FP64, Effort())
    assert all(result.kept == () and record["failing"] == 0 for result, record in checks)
    assert checks[0][0].status is Status.VERIFIED  # a search's exhaustive check is still a full check


def test_a_record_is_the_checks_counts_and_settings_without_what_a_theory_run_rests_on(small_construction):
    theory = arithmetic(parse_format("fp16"), "theory")
    result = check.sampled(small_construction, 20, 3, theory)
    assert "rests_on" in result.detail
    assert probes.record(result, 0.12345, extra=1) == {"method": "sampled", "inputs": 20, "failing": 0,
                                                       "seconds": 0.123, "seed": 3, "extra": 1}


# -- the registry -----------------------------------------------------------------------------------------------------
def test_every_task_names_only_registered_probes_and_the_searches_name_no_task():
    assert RECORDS["composition"].probes == ("boundary_pairs", "targeted_pairs")
    assert RECORDS["two_sum"].probes == ("summary_collisions",)
    assert all(name in PROBES for record in RECORDS.values() for name in record.probes)
    generic = [Path(probes.__file__), *Path(check.__file__).parent.glob("*.py")]
    for path in generic:  # what a search runs on a task comes from its record, not from its name
        text = path.read_text(encoding="utf-8")
        assert '"composition"' not in text and '"two_sum"' not in text and "task.name ==" not in text, path


def test_the_search_runs_the_probes_the_record_names_in_order(small_construction, monkeypatch):
    network = broken(small_construction)
    named = search_network(network, FP16, hypothesis_examples=10, pair_prefixes=16, pair_suffixes=1)
    assert [r["method"] for r in named.searched["probes"]] == ["exhaustive", "hypothesis", "boundary_pairs"]
    assert named.searched["counting"] == {"applies": False, "table_bits": 8.0, "state_bits": 0, "forced": False}
    composition = record_of("composition")
    monkeypatch.setitem(RECORDS, "composition", dataclasses.replace(composition, probes=()))
    bare = search_network(network, FP16, hypothesis_examples=10)
    assert [r["method"] for r in bare.searched["probes"]] == ["exhaustive", "hypothesis"]
    assert "counting" not in bare.searched and bare.pairs == []
    assert bare.failures == named.failures  # the generic checks do not depend on the task's probes
    monkeypatch.setitem(RECORDS, "composition", dataclasses.replace(composition, probes=("no_such_probe",)))
    with pytest.raises(ParameterError, match="no_such_probe"):
        search_network(network, FP16)


def test_a_later_probe_does_not_report_a_pair_an_earlier_one_found(small_construction, monkeypatch):
    pair = Pair([0], [1], 0, 1, 0)
    monkeypatch.setitem(PROBES, "first", lambda network, arith, effort: probes.Found((pair,), ({"method": "first",
                                                                                              "inputs": 2,
                                                                                              "seconds": 0.0},)))
    monkeypatch.setitem(PROBES, "second", lambda network, arith, effort: probes.Found(
        (pair, pair), ({"method": "second", "inputs": 2, "seconds": 0.0},), {"note": 1}))
    monkeypatch.setitem(RECORDS, "composition", dataclasses.replace(record_of("composition"),
                                                                    probes=("first", "second")))
    report = search_network(small_construction, FP16, hypothesis_examples=5)
    assert report.pairs == [pair] and report.searched["note"] == 1
    assert [r["method"] for r in report.searched["probes"]][-2:] == ["first", "second"]


def test_collisions_are_skipped_with_the_reason_on_a_network_without_a_sparse_layer():
    network = witness.compile("two_sum", n=8, M=4, t=0)  # full attention
    report = search_network(network, FP16, samples=50, hypothesis_examples=5)
    skipped = report.searched["probes"][-1]
    assert skipped["method"] == "summary_collisions" and "block-sparse" in skipped["skipped"]
    assert skipped["inputs"] == 0 and report.pairs == []


def test_the_same_seed_gives_the_same_report():
    network = architectures.full(TASK, layers=1, H=1, d_head=4, d_model=8, seed=0)
    first, second = (search_network(network, LOW, seed=1, samples=100, hypothesis_examples=10, pair_prefixes=32)
                     for _ in range(2))
    assert first.failures == second.failures and first.pairs == second.pairs
    assert without_seconds(first.searched) == without_seconds(second.searched)
    assert first.failures and len(first.failures) <= probes.DEFAULT_MAX_FAILURES


def test_failing_and_tried_counts_only_the_checks():
    searched = {"probes": [{"method": "sampled", "inputs": 10, "failing": 3, "seconds": 0.0},
                           {"method": "boundary_pairs", "inputs": 50, "seconds": 0.0},
                           {"method": "hypothesis", "inputs": 4, "failing": 4, "seconds": 0.0}]}
    assert probes.failing_and_tried(searched) == (7, 14)
    assert probes.searched_summary(searched["probes"])["inputs"] == 64
    assert probes.failing_and_tried({}) == (0, 0)


def test_the_search_refuses_unknown_effort(small_construction):
    with pytest.raises(TypeError):
        search_network(small_construction, FP16, sampels=10)
    assert Effort().samples == probes.SAMPLES  # the defaults are the module's constants
