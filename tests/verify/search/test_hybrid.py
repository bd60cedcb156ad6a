"""verify.search.hybrid: the searched architectures, `search_hybrid` / `search_full` and `witness search hybrid|full`.

Every expected answer comes from the plain reference in reference_tasks.py, every output from a fresh executor run;
the search code is trusted for nothing it reports.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import witness
from cli.main import main
from lab import architectures
from tests.cli.test_cli import single_json
from tests.verify.search.test_pairs import LOW, TASK, assert_replayable_failure, output, reference
from verify.search import pairs
from verify.search.hybrid import search_full, search_hybrid
from witness.errors import ParameterError
from witness.tasks import Composition


def test_full_architecture_and_file_weights_must_match(tmp_path):
    network = architectures.full(TASK, layers=2, H=1, d_head=4, d_model=8, seed=3)
    assert architectures.layer_kinds(network) == ["attention", "attention"]
    assert all(layer.mlp is not None and layer.mlp.d_mlp == 32 for layer in network.layers)
    path = tmp_path / "full.npz"
    network.save(path)
    loaded, source = architectures.network(architectures.full_architecture(2, 1, 4, 8), TASK, str(path))
    assert source.source == str(path) and loaded.state_dict().keys() == network.state_dict().keys()
    with pytest.raises(ParameterError, match="requested architecture"):
        architectures.network(architectures.full_architecture(3, 1, 4, 8), TASK, str(path))
    with pytest.raises(ParameterError, match="not for"):
        architectures.network(architectures.full_architecture(2, 1, 4, 8), Composition(L=2, m=3, n=(4,)), str(path))


def test_gap_lengths():
    assert architectures.gap_lengths(2, 3) == (3, 3, 3)
    assert architectures.gap_lengths(1, [1, 0]) == (1, 0)
    with pytest.raises(ParameterError, match="gaps"):
        architectures.gap_lengths(1, [1, 2, 3])


def test_trained_weights_keep_the_best_seed():
    architecture = architectures.full_architecture(1, 1, 4, 8)
    task = Composition(L=1, m=3)
    network, source = architectures.network(architecture, task, "trained", seed=0, train_seeds=2, train_steps=20)
    accuracies = [report["accuracy"] for report in source.as_dict()["training"]]
    assert sorted({r["seed"] for r in source.training}) == [0, 1]
    assert accuracies[0] == max(accuracies) == source.as_dict()["best_accuracy"]
    inputs = np.concatenate(list(task.enumerate_tokens()))
    correct = np.mean([network.run(row) == reference(task, row) for row in inputs])
    assert correct == accuracies[0]  # the reported accuracy is the float64 executor's, on every input


def test_search_full_report(tmp_path):
    path = str(tmp_path / "net.npz")
    report = search_full(TASK, layers=1, H=1, d_head=4, d_model=8, arith=LOW, seed=0, save_network=path,
                         samples=300, hypothesis_examples=20)
    saved = witness.load(path)
    assert report.network == path and report.failures and report.pairs
    assert report.budget["Hdp"] == 1 * 8 * 5
    for failure in report.failures:
        assert_replayable_failure(saved, failure, LOW)
    methods = [p["method"] for p in report.searched["probes"]]
    assert methods == ["sampled", "margin", "hypothesis_margin", "hypothesis", "boundary_pairs"]
    assert report.searched["inputs"] == sum(p["inputs"] for p in report.searched["probes"])


def test_cli_search_full_json_and_replay(tmp_path, capsys):
    path = str(tmp_path / "net.npz")
    argv = ["search", "full", "--L", "2", "--m", "4", "--n", "4", "--layers", "1", "--H", "1", "--d-head", "4",
            "--d-model", "8", "--format", "float:1,3", "--semantics", "strict", "--weights", "random", "--seed", "0",
            "--save-network", path, "--samples", "300", "--pair-prefixes", "256", "--json"]
    assert main(argv) == 1  # docs/conventions.md §7: exit 1 when a failure was found
    payload = single_json(capsys)
    assert {"network", "budget", "failures", "pairs", "searched"} <= set(payload)
    assert payload["network"] == path
    assert {"H", "d", "p", "Hdp"} <= set(payload["budget"]) and payload["budget"]["p"] == 5
    assert payload["failures"] and payload["pairs"]
    assert set(payload["failures"][0]) == {"tokens", "expected", "output", "trace"}
    assert set(payload["pairs"][0]) == {"a", "b", "expected_a", "expected_b", "output"}
    assert {"probes", "inputs", "seconds"} <= set(payload["searched"])
    for failure in payload["failures"]:
        tokens = ",".join(map(str, failure["tokens"]))
        assert main(["run", path, "--tokens", tokens, "--format", "float:1,3", "--semantics", "strict", "--json"]) == 0
        replayed = single_json(capsys)["output"]
        assert replayed == failure["output"] != reference(TASK, failure["tokens"])


@pytest.mark.parametrize("extra, message", [
    (["--mixer", "nonsense"], "mixer"),
    (["--mixer", "attention"], "mixer"),
    (["--mixer", "linear", "--weights", "missing.npz"], "missing.npz"),
    (["--mixer", "linear", "--format", "fp7"], "format"),
])
def test_cli_search_bad_input_is_one_line_and_exit_2(capsys, extra, message):
    argv = ["search", "hybrid", "--L", "2", "--m", "2", "--n", "2", "--full-layers", "1", "--linear-per-gap", "1",
            "--H", "1", "--d-head", "4", "--d-model", "8", *extra]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and message in captured.err


def test_hybrid_layers_alternate_gaps_and_full_layers():
    network = architectures.hybrid(TASK, L_full=2, linear_per_gap=[1, 0, 2], mixer="gla", H=1, d_head=4, d_model=8)
    assert architectures.layer_kinds(network) == ["gla", "attention", "attention", "gla", "gla"]
    assert all(layer.mlp is not None for layer in network.layers)
    with pytest.raises(ParameterError, match="recurrent kind"):
        architectures.hybrid(TASK, L_full=1, linear_per_gap=1, mixer="block_sparse", H=1, d_head=4, d_model=8)


def test_search_hybrid_pairs_cross_the_recurrent_state_equally(tmp_path):
    path = str(tmp_path / "hybrid.npz")
    report = search_hybrid(TASK, full_layers=1, linear_per_gap=1, mixer="rnn", H=1, d_head=4, d_model=8, arith=LOW,
                           seed=0, save_network=path, samples=200, hypothesis_examples=10, pair_prefixes=256)
    saved = witness.load(path)
    assert architectures.layer_kinds(saved) == ["rnn", "attention", "rnn"]
    assert report.budget["state_bits"] == 2 * 1 * 4 * 5  # two rnn layers, H d_state p each
    assert report.pairs
    for pair in report.pairs:
        assert pair.expected_a == reference(TASK, pair.a) != pair.expected_b == reference(TASK, pair.b)
        assert output(saved, pair.a, LOW) == output(saved, pair.b, LOW) == pair.output
        digest_a, digest_b = pairs.crossings(saved, np.array([pair.a, pair.b]), 16, LOW)
        assert digest_a == digest_b


def test_cli_search_hybrid_json_shape(tmp_path, capsys):
    path = str(tmp_path / "net.npz")
    argv = ["search", "hybrid", "--L", "2", "--m", "2", "--n", "2", "--full-layers", "1", "--linear-per-gap", "2",
            "--mixer", "deltanet", "--H", "1", "--d-head", "4", "--d-model", "8", "--format", "fp16",
            "--semantics", "strict", "--weights", "random", "--seed", "0", "--save-network", path, "--json"]
    status = main(argv)
    payload = single_json(capsys)
    assert status == (1 if payload["failures"] or payload["pairs"] else 0)
    assert payload["network"] == path
    assert {"H", "d", "p", "Hdp", "state_bits"} <= set(payload["budget"]) and payload["budget"]["Hdp"] == 8 * 16
    assert payload["searched"]["architecture"]["layers"] == ["deltanet"] * 2 + ["attention"] + ["deltanet"] * 2
    assert payload["searched"]["weights"] == {"source": "random"}
    # m = 2, n = 2: 4096 inputs, all of them run
    assert payload["searched"]["probes"][0]["method"] == "exhaustive"
    assert payload["searched"]["probes"][0]["inputs"] == 4096


def test_cli_search_text_names_what_was_found(tmp_path, capsys):
    argv = ["search", "full", "--L", "2", "--m", "4", "--n", "4", "--layers", "1", "--H", "1", "--d-head", "4",
            "--d-model", "8", "--format", "float:1,3", "--samples", "100"]
    assert main(argv) == 1
    text = capsys.readouterr().out
    counted = re.match(r"(\d+) of (\d+) inputs failed \(sampled (\d+)/100, margin (\d+)/100, "
                       r"hypothesis_margin (\d+)/\d+, hypothesis (\d+)/\d+; (\d+) kept below", text)
    assert counted and int(counted[1]) >= int(counted[7]) == 5 and int(counted[2]) > int(counted[1])
    assert int(counted[1]) == sum(int(counted[k]) for k in (3, 4, 5, 6))
    assert "Hdp 40" in text
    assert "failure: tokens " in text and "pair: " in text
