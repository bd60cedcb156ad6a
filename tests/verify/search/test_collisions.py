"""verify.search.collisions: summary collisions on (B,k)-sparse 2-Sum networks.

Every answer comes from the brute-force reference in reference_tasks.py and every output from a fresh executor run;
the search is trusted for nothing it reports: each pair is re-run here, and its colliding block summaries and kept
blocks are read back from the executor's own trace.
"""

from __future__ import annotations

import numpy as np
import pytest

from constructions import two_sum_sparse
from tests.oracles.reference_tasks import two_sum_answer
from verify.search.collisions import colliding_contents, collision_pairs
from witness.arith import arithmetic, parse_format
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
    collisions, counts = colliding_contents(natural, FP16, rng)
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


def test_rich_summary_construction_yields_no_pair():
    """The control: two_sum_sparse's summaries count every value class, so its collisions are contents with the same
    multiset of tokens; fills with different answers exist and reach the gate, and the gate passes none."""
    network = two_sum_sparse.build(TASK.n, TASK.M, TASK.t, block=4, k=1)
    pairs, searched = collision_pairs(network, FP16, attempts=6, seed=0)
    assert searched["colliding"] > 0 and searched["tried"] > 0
    assert pairs == []


def test_collision_count_matches_a_plain_count(natural):
    """The natural network's keys are the ±1 bit codes of the tokens, so (in fp16, exactly) two contents collide
    when the varied tokens' bits sum alike at every bit position; count those pairs with a plain loop."""
    def bit_sums(u: int, v: int) -> tuple[int, ...]:
        return tuple(((u >> bit) & 1) + ((v >> bit) & 1) for bit in range(3))

    assignments = [(u, v) for u in range(8) for v in range(8)]
    expected = sum(1 for i, x in enumerate(assignments) for y in assignments[i + 1:] if bit_sums(*x) == bit_sums(*y))
    for seed in range(3):
        _, counts = colliding_contents(natural, FP16, np.random.default_rng(seed))
        assert counts["candidates"] == 64 and counts["colliding"] == expected
