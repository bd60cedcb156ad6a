"""verify.search.sparse: summary collisions on (B,k)-sparse 2-Sum networks and `witness search sparse`.

Every answer comes from the brute-force reference in reference_tasks.py and every output from a fresh executor run;
the search is trusted for nothing it reports: each pair is re-run here, and its colliding block summaries and kept
blocks are read back from the executor's own trace.
"""

from __future__ import annotations

import numpy as np
import pytest

import witness
from constructions import two_sum_sparse
from tests.oracles.reference_tasks import two_sum_answer
from tests.cli.test_cli import single_json
from verify.search import sparse
from verify.search.sparse import collision_pairs, search_sparse
from witness.arith import arithmetic, parse_format
from cli.main import main
from witness.errors import ParameterError
from witness.execute import run
from witness.registry import compile
from witness.tasks import TwoSum

FP16 = arithmetic(parse_format("fp16"), "strict")
TASK = TwoSum(n=16, M=8, t=0)  # blocks of 4: 4 blocks; M^2 = 64 contents per collision attempt
SHAPE = {"H": 1, "d_head": 2, "d_model": 4}


def outputs(network, tokens, arith) -> list[int]:
    return [int(v) for v in run(network, np.asarray([tokens]), arith).predictions[0]]


def assert_pair_proves_failure(network, pair, arith, block: int) -> None:
    """The pair's answers differ (reference), both runs give its output, and the two inputs differ only inside the
    first block, whose summaries are equal in the run's trace, so every query outside it keeps the same blocks."""
    task = network.task
    assert pair.expected_a == two_sum_answer(pair.a, task.M, task.t, task.causal)
    assert pair.expected_b == two_sum_answer(pair.b, task.M, task.t, task.causal)
    assert pair.expected_a != pair.expected_b
    assert outputs(network, pair.a, arith) == outputs(network, pair.b, arith) == pair.output
    a, b = np.array(pair.a), np.array(pair.b)
    assert (a[block:] == b[block:]).all() and (a[:block] != b[:block]).any()
    trace = run(network, np.stack([a, b]), arith, trace=True).trace
    summaries = trace["blocks.0.attn.hook_block_summary"][:, :, 0]
    assert np.array_equal(summaries[0], summaries[1])
    kept = trace["blocks.0.attn.hook_selected_blocks"][:, :, block:]  # queries after the first block
    assert np.array_equal(kept[0], kept[1])


@pytest.fixture(scope="module")
def natural():
    return two_sum_sparse.natural(TASK.n, TASK.M, TASK.t, block=4, k=1)


def test_natural_network_yields_confirmed_collision_pairs(natural):
    pairs, searched = collision_pairs(natural, FP16, attempts=6, seed=0, max_pairs=3)
    assert searched["candidates"] == 6 * 64 or len(pairs) == 3
    assert searched["colliding"] >= searched["buckets"] > 0
    assert len(pairs) == searched["confirmed"] > 0
    for pair in pairs:
        assert_pair_proves_failure(natural, pair, FP16, 4)


def test_causal_variant():
    task = TwoSum(n=16, M=8, t=3, causal=True)
    network = two_sum_sparse.natural(task.n, task.M, task.t, block=4, k=1, causal=True)
    pairs, _ = collision_pairs(network, FP16, attempts=6, seed=1, max_pairs=2)
    assert pairs
    for pair in pairs:
        assert_pair_proves_failure(network, pair, FP16, 4)


def test_collisions_are_equal_summaries_of_different_contents(natural):
    rng = np.random.default_rng(3)
    collisions, counts = sparse.colliding_contents(natural, FP16, rng)
    assert counts["candidates"] == 64 and collisions
    contents = np.array([[c.a, c.b] for c in collisions])  # [collisions, 2, B]
    assert (contents[:, 0] != contents[:, 1]).any(axis=1).all()
    # Summaries by an independent route: each content run as a whole prompt (its first block), not as a batch of B.
    prompts = np.concatenate([contents.reshape(-1, 4), np.zeros((2 * len(collisions), 12), np.int64)], axis=1)
    summary = run(natural, prompts, FP16, trace=True).trace["blocks.0.attn.hook_block_summary"][:, :, 0]
    summary = summary.reshape(len(collisions), 2, -1)
    assert np.array_equal(summary[:, 0], summary[:, 1])


def test_full_attention_network_is_refused():
    network = compile("two_sum", n=8, M=4, t=0)
    with pytest.raises(ParameterError, match="block-sparse"):
        collision_pairs(network, FP16)


def test_attention_that_keeps_every_block_is_refused():
    with pytest.raises(ParameterError, match="keeps every block"):
        collision_pairs(two_sum_sparse.natural(12, 4, 0, block=4, k=2), FP16)


def test_search_sparse_report_and_replay(tmp_path, capsys):
    path = tmp_path / "net.npz"
    argv = ["search", "sparse", "--n", "16", "--M", "8", "--t", "0", "--block", "4", "--k", "1", "--H", "1",
            "--d-head", "2", "--d-model", "4", "--format", "fp16", "--semantics", "strict", "--weights", "natural",
            "--seed", "0", "--save-network", str(path), "--json"]
    assert main(argv) == 1  # docs/conventions.md §7: exit 1 when a failure was found
    payload = single_json(capsys)
    assert set(payload) == {"network", "format", "semantics", "budget", "failures", "pairs", "searched"}
    assert payload["network"] == str(path) and payload["format"] == "fp16"
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


def test_rich_summary_construction_yields_no_pair():
    """The control: two_sum_sparse's summaries count every value class, so its collisions are contents with the same
    multiset of tokens; fills with different answers exist and reach the gate, and the gate passes none."""
    network = two_sum_sparse.build(TASK.n, TASK.M, TASK.t, block=4, k=1)
    pairs, searched = collision_pairs(network, FP16, attempts=6, seed=0)
    assert searched["colliding"] > 0 and searched["tried"] > 0
    assert pairs == []


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


def test_collision_count_matches_a_plain_count(natural):
    """The natural network's keys are the ±1 bit codes of the tokens, so (in fp16, exactly) two contents collide
    when the varied tokens' bits sum alike at every bit position; count those pairs with a plain loop."""
    def bit_sums(u: int, v: int) -> tuple[int, ...]:
        return tuple(((u >> bit) & 1) + ((v >> bit) & 1) for bit in range(3))

    assignments = [(u, v) for u in range(8) for v in range(8)]
    expected = sum(1 for i, x in enumerate(assignments) for y in assignments[i + 1:] if bit_sums(*x) == bit_sums(*y))
    for seed in range(3):
        _, counts = sparse.colliding_contents(natural, FP16, np.random.default_rng(seed))
        assert counts["candidates"] == 64 and counts["colliding"] == expected


def test_search_refuses_before_probing():
    with pytest.raises(ParameterError, match="keeps every block"):
        search_sparse(TwoSum(n=12, M=4, t=0), block=4, k=2, **SHAPE, arith=FP16, weights="natural")
    with pytest.raises(ParameterError, match="2-Sum"):
        search_sparse(object(), block=4, k=1, **SHAPE, arith=FP16)
