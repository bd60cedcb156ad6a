"""verify.search.sparse: `search_sparse` and `witness search sparse` on (B,k)-sparse 2-Sum networks.

Every answer comes from the brute-force reference in reference_tasks.py and every output from a fresh executor run;
the search is trusted for nothing it reports.
"""

from __future__ import annotations

import pytest

import witness
from cli.main import main
from tests.cli.test_cli import single_json
from tests.oracles.reference_tasks import two_sum_answer
from tests.verify.search.test_collisions import FP16, SHAPE, TASK, assert_pair_proves_failure, outputs
from verify.search.sparse import search_sparse
from witness.arith import arithmetic, parse_format
from witness.errors import ParameterError
from witness.tasks import TwoSum


def test_search_sparse_report_and_replay(tmp_path, capsys):
    path = tmp_path / "net.npz"
    argv = ["search", "sparse", "--n", "16", "--M", "8", "--t", "0", "--block", "4", "--k", "1", "--H", "1",
            "--d-head", "2", "--d-model", "4", "--format", "fp16", "--semantics", "strict", "--weights", "natural",
            "--seed", "0", "--save-network", str(path), "--json"]
    assert main(argv) == 1  # docs/conventions.md §7: exit 1 when a failure was found
    payload = single_json(capsys)
    assert set(payload) == {"network", "format", "semantics", "semantics_meaning", "budget", "failures", "pairs",
                            "searched"}
    assert payload["network"] == str(path) and payload["format"] == "fp16"
    assert payload["semantics_meaning"] == "every operation rounded to the format, sums in index order"
    assert {"H", "d_head", "d_model", "d", "p", "Hdp", "block", "k", "B_log2_n"} <= set(payload["budget"])
    assert payload["budget"]["B_log2_n"] == 16.0  # B log2 n = 4 * 4
    assert payload["failures"] and payload["pairs"]
    assert {"sampled", "margin", "hypothesis_margin", "hypothesis", "summary_collisions"} == {
        p["method"] for p in payload["searched"]["probes"]}
    failure = payload["failures"][0]
    assert set(failure) == {"tokens", "expected", "output", "trace"}
    assert failure["expected"] == two_sum_answer(failure["tokens"], 8, 0, False) != failure["output"]
    tokens = ",".join(map(str, failure["tokens"]))
    assert main(["run", str(path), "--tokens", tokens, "--format", "fp16", "--semantics", "strict", "--json"]) == 0
    assert single_json(capsys) == {"output": failure["output"]}
    pair = payload["pairs"][0]
    assert set(pair) == {"a", "b", "expected_a", "expected_b", "output"}
    for tokens, expected in ((pair["a"], pair["expected_a"]), (pair["b"], pair["expected_b"])):
        assert expected == two_sum_answer(tokens, 8, 0, False)
        assert main(["run", str(path), "--tokens", ",".join(map(str, tokens)), "--format", "fp16", "--semantics",
                     "strict", "--json"]) == 0
        assert single_json(capsys) == {"output": pair["output"]}


def test_bad_input_is_one_line(capsys):
    argv = ["search", "sparse", "--n", "16", "--M", "8", "--block", "4", "--k", "1", "--H", "1", "--d-head", "2",
            "--d-model", "4", "--weights", "no/such/file.npz"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("witness: error:") and len(err.strip().splitlines()) == 1
    assert main(argv[:-2] + ["--weights", "natural", "--t", "9"]) == 2
    assert "t must be in [0, M)" in capsys.readouterr().err


def test_random_weights_at_low_precision(tmp_path):
    low = arithmetic(parse_format("float:3,4"), "strict")  # p = 8, Hdp = H d p = 1 * 4 * 8
    path = tmp_path / "random.npz"
    report = search_sparse(TASK, block=4, k=1, **SHAPE, arith=low, weights="random", seed=0,
                           save_network=str(path), samples=200, hypothesis_examples=20, collision_attempts=2)
    assert report.budget["Hdp"] == 1 * 4 * 8 and report.budget["B_log2_n"] == 16.0
    assert report.searched["weights"] == {"source": "random"}
    assert report.failures
    network = witness.load(path)
    for failure in report.failures:
        assert failure.expected == two_sum_answer(failure.tokens, 8, 0, False) != failure.output
        assert outputs(network, failure.tokens, low) == failure.output
    for pair in report.pairs:
        assert_pair_proves_failure(network, pair, low, 4)
    # The saved file is a valid FILE source for the same architecture, and refused for another one.
    again = search_sparse(TASK, block=4, k=1, **SHAPE, arith=low, weights=str(path), samples=10,
                          hypothesis_examples=5, collision_attempts=1)
    assert again.searched["weights"] == {"source": str(path)}
    with pytest.raises(ParameterError, match=r"\(4,1\)-sparse attention, not \(4,2\)"):
        search_sparse(TASK, block=4, k=2, **SHAPE, arith=low, weights=str(path))
    with pytest.raises(ParameterError, match="d_head"):
        search_sparse(TASK, block=4, k=1, H=1, d_head=3, d_model=4, arith=low, weights=str(path))


def test_trained_weights_keep_the_best_seed():
    report = search_sparse(TASK, block=4, k=1, **SHAPE, arith=FP16, weights="trained", seed=0, train_seeds=2,
                           train_steps=5, samples=50, hypothesis_examples=5,
                           collision_attempts=1)
    training = report.searched["weights"]["training"]
    assert [run["seed"] for run in training] in ([0, 1], [1, 0])
    assert report.searched["weights"]["best_accuracy"] == max(run["accuracy"] for run in training)


def test_search_refuses_before_probing():
    with pytest.raises(ParameterError, match="keeps every block"):
        search_sparse(TwoSum(n=12, M=4, t=0), block=4, k=2, **SHAPE, arith=FP16, weights="natural")
    with pytest.raises(ParameterError, match="2-Sum"):
        search_sparse(object(), block=4, k=1, **SHAPE, arith=FP16)
