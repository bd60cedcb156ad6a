"""verify.search probes, architectures, boundary pairs and `witness search hybrid|full`.

Every expected answer comes from the plain reference in reference_tasks.py, every output from a fresh executor run;
the search code is trusted for nothing it reports.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import witness
from tests.oracles.reference_tasks import all_composition_inputs, composition_answer_from_tokens
from tests.cli.test_cli import single_json
from verify.search import pairs, probes
from lab import architectures
from verify.search.hybrid import counting, search_full, search_hybrid
from witness.arith import arithmetic, parse_format
from cli.main import main
from witness.errors import ParameterError
from witness.execute import run
from witness.tasks import Composition

TASK = Composition(L=2, m=4, n=(4,))
# p = 5: small enough for random prefixes to collide (with the initialisation's score temperature they stop
# colliding at p = 8)
LOW = arithmetic(parse_format("float:1,3"), "strict")


def reference(task: Composition, tokens) -> int:
    return composition_answer_from_tokens(task.m, task.n, np.asarray(tokens), task.layout)


def output(network, tokens, arith) -> int:
    return int(run(network, np.asarray([tokens]), arith).predictions[0, 0])


def assert_replayable_failure(network, failure, arith) -> None:
    expected = reference(network.task, failure.tokens)
    assert failure.expected == expected
    assert failure.output == output(network, failure.tokens, arith) != expected


@pytest.fixture(scope="module")
def small_construction():
    return witness.compile("composition", L=2, m=2, n=[2])


def broken(network):
    """Layer 1's block indicator in the query zeroed: the construction then misreads many inputs."""
    W_Q = np.array(network.state_dict()["blocks.1.attn.W_Q"])
    W_Q[0, 0, 0] = 0.0
    return network.with_arrays({"blocks.1.attn.W_Q": W_Q})


# -- probes ---------------------------------------------------------------------------------------------------------
def test_exhaustive_probe_counts_what_a_plain_loop_counts(small_construction):
    network, arith = broken(small_construction), arithmetic(parse_format("fp64"), "strict")
    inputs = np.array(list(all_composition_inputs(2, (2,))))
    outputs = run(network, inputs, arith).predictions[:, 0]
    wrong = sum(int(out) != reference(network.task, row) for out, row in zip(outputs, inputs))
    assert wrong > 0
    probe = probes.exhaustive(network, arith, max_failures=3)
    assert (probe.searched["method"], probe.searched["inputs"], probe.searched["failing"]) == \
        ("exhaustive", len(inputs), wrong)
    assert len(probe.failures) == 3
    for failure in probe.failures:
        assert_replayable_failure(network, failure, arith)


def test_probes_find_nothing_on_the_correct_construction(small_construction):
    arith = arithmetic(parse_format("fp64"), "strict")
    assert probes.exhaustive(small_construction, arith).failures == ()
    sampled = probes.sampled(small_construction, arith, count=300, seed=4)
    assert sampled.failures == () and sampled.searched["inputs"] == 300 and sampled.searched["seed"] == 4


def test_sampled_and_hypothesis_probes_confirm_their_failures(small_construction):
    network, arith = broken(small_construction), arithmetic(parse_format("fp16"), "strict")
    sampled = probes.sampled(network, arith, count=200, seed=0)
    found = probes.hypothesis(network, arith, max_examples=50, seed=0)
    assert sampled.failures and len(found.failures) == 1
    for failure in sampled.failures + found.failures:
        assert_replayable_failure(network, failure, arith)
    summary = probes.searched_summary([sampled.searched, found.searched])
    assert summary["inputs"] == sampled.searched["inputs"] + found.searched["inputs"]


# -- architectures ----------------------------------------------------------------------------------------------------
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


# -- indistinguishable pairs ----------------------------------------------------------------------------------------
def test_boundary_pairs_are_real_and_cross_the_boundary_equally():
    network = architectures.full(TASK, layers=1, H=1, d_head=4, d_model=8, seed=0)
    found, record = pairs.boundary_pairs(network, LOW, seed=0)
    boundary = TASK.segment("z2").stop
    assert found and record["boundary"] == boundary == 16
    for pair in found:
        a, b = np.array(pair.a), np.array(pair.b)
        assert (a[boundary:] == b[boundary:]).all() and (a[:boundary] != b[:boundary]).any()
        assert (pair.expected_a, pair.expected_b) == (reference(TASK, a), reference(TASK, b))
        assert pair.expected_a != pair.expected_b
        assert output(network, a, LOW) == output(network, b, LOW) == pair.output
        digest_a, digest_b = pairs.crossings(network, np.array([a, b]), boundary, LOW)
        assert digest_a == digest_b


def test_crossings_separate_inputs_the_construction_tells_apart(small_construction):
    """The (L+1)-layer construction answers every input, so no two inputs with different answers may cross the
    boundary equally: the pair search must come back empty (and a collision would be refused by confirm_pair)."""
    arith = arithmetic(parse_format("fp16"), "strict")
    found, record = pairs.boundary_pairs(small_construction, arith, suffixes=4, prefixes=16, seed=1)
    assert found == [] and record["candidates"] == 0 and record["inputs"] > 0


def test_pairs_refuse_a_bidirectional_network_and_a_bad_boundary():
    network = architectures.full(TASK, layers=1, H=1, d_head=4, d_model=8, seed=0)
    with pytest.raises(ParameterError, match="boundary"):
        pairs.crossings(network, TASK.random_tokens(0, 2), 0, LOW)
    bidirectional = architectures.full_architecture(1, 1, 4, 8)
    layers = bidirectional.layers
    open_layers = tuple(type(spec)(causal=False, d_mlp=spec.d_mlp) for spec in layers)
    open_network = type(bidirectional)(1, 4, 8, open_layers).initial_network(TASK, 0)
    with pytest.raises(ParameterError, match="bidirectional"):
        pairs.crossings(open_network, TASK.random_tokens(0, 2), 16, LOW)


# -- search_full / search_hybrid and the CLI --------------------------------------------------------------------------
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


def test_a_hash_that_collides_everything_still_reports_no_false_pair(small_construction, monkeypatch):
    """The confirm gate, not the hash, decides: with every crossing digest equal, the search tries many candidates
    on the correct construction and reports none of them."""
    monkeypatch.setattr(pairs, "crossings", lambda network, tokens, boundary, arith: [b"same"] * len(tokens))
    found, record = pairs.boundary_pairs(small_construction, arithmetic(parse_format("fp16"), "strict"),
                                         suffixes=2, prefixes=16, seed=0)
    assert found == [] and record["candidates"] > 0 and record["confirmed"] == 0


# -- hybrids ------------------------------------------------------------------------------------------------------
def test_hybrid_layers_alternate_gaps_and_full_layers():
    network = architectures.hybrid(TASK, L_full=2, linear_per_gap=[1, 0, 2], mixer="gla", H=1, d_head=4, d_model=8)
    assert architectures.layer_kinds(network) == ["gla", "attention", "attention", "gla", "gla"]
    assert all(layer.mlp is not None for layer in network.layers)
    with pytest.raises(ParameterError, match="recurrent kind"):
        architectures.hybrid(TASK, L_full=1, linear_per_gap=1, mixer="block_sparse", H=1, d_head=4, d_model=8)


def test_crossings_of_a_recurrent_layer_are_its_state_at_the_boundary():
    """A single recurrent layer: two inputs cross the boundary equally exactly when the state leaving the prefix is
    equal (read from the executor's trace here, independently of the crossing code)."""
    network = architectures.hybrid(TASK, L_full=0, linear_per_gap=1, mixer="rnn", H=1, d_head=4, d_model=8, seed=2)
    boundary = TASK.segment("z2").stop
    batch = TASK.random_tokens(5, 40)
    batch[1::2, boundary:] = batch[0::2, boundary:]  # pairs of inputs sharing a suffix
    batch[1::4] = batch[0::4]  # some of them identical
    digests = pairs.crossings(network, batch, boundary, LOW)
    states = run(network, batch, LOW, trace=True).trace["blocks.0.attn.hook_state"][:, :, boundary - 1]
    for row in range(0, 40, 2):
        same_state = np.array_equal(states[row], states[row + 1])
        assert (digests[row] == digests[row + 1]) == same_state
    assert any(digests[r] == digests[r + 1] for r in range(0, 40, 4))
    assert any(digests[r] != digests[r + 1] for r in range(2, 40, 4))


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


def test_counting_says_when_pairs_are_forced():
    assert counting(Composition(L=1, m=8), 20) == {"applies": True, "table_bits": 24.0, "state_bits": 20,
                                                   "forced": True}
    assert not counting(Composition(L=1, m=8), 24)["forced"]  # the state holds exactly the table's 8 * 3 bits
    assert not counting(Composition(L=1, m=8), 0)["applies"]  # full attention carries no state


def test_targeted_pairs_where_counting_forces_them():
    """m = 16: the table holds 16 log2 16 = 64 bits; two deltanet layers of H 1, d_head 2 carry 2 (4 + 2) = 12
    numbers, 60 bits at p = 5, so counting forces pairs. Each reported pair shares its suffix, has two different
    answers (the reference's) and one output (a fresh run), and crosses the boundary with equal values."""
    task = Composition(L=1, m=16)
    network = architectures.hybrid(task, 0, 2, "deltanet", H=1, d_head=2, d_model=8, seed=0)
    assert counting(task, network.budget(LOW.bits).state_bits)["forced"]
    found, record = pairs.targeted_pairs(network, LOW, runs=2000, seed=0)
    assert found and record["inputs"] <= 2000 and record["confirmed"] == len(found)
    boundary = task.segment("z1").stop
    for pair in found:
        a, b = np.array(pair.a), np.array(pair.b)
        assert (a[boundary:] == b[boundary:]).all()
        assert reference(task, a) != reference(task, b) and (pair.expected_a, pair.expected_b) == (
            reference(task, a), reference(task, b))
        assert output(network, a, LOW) == output(network, b, LOW) == pair.output
        vectors = pairs.crossing_vectors(network, np.array([a, b]), boundary, LOW)
        assert np.array_equal(vectors[0], vectors[1])


def test_crossing_distance_is_zero_exactly_on_equal_crossings():
    target = np.array([1.0, np.inf, -np.inf, 0.0])
    rows = np.array([[1.0, np.inf, -np.inf, -0.0], [1.0, np.inf, np.inf, 0.0], [np.nan, np.inf, -np.inf, 0.0],
                     [1.5, np.inf, -np.inf, 0.0]])
    assert pairs.crossing_distance(rows, target).tolist() == [0.0, np.inf, np.inf, 0.5]
