"""verify.search.pairs: composition's indistinguishable pairs across the layout boundary, the counting argument,
and the pairs it forces.

Every expected answer comes from the plain reference in reference_tasks.py, every output from a fresh executor run;
the search code is trusted for nothing it reports.
"""

from __future__ import annotations

import numpy as np
import pytest

import witness
from lab import architectures
from tests.oracles.reference_tasks import composition_answer_from_tokens
from verify.search import pairs
from verify.search.pairs import counting
from witness.arith import arithmetic, parse_format
from witness.errors import ParameterError
from witness.execute import run
from witness.tasks import Composition, TwoSum

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


def test_a_hash_that_collides_everything_still_reports_no_false_pair(small_construction, monkeypatch):
    """The confirm gate, not the hash, decides: with every crossing digest equal, the search tries many candidates
    on the correct construction and reports none of them."""
    monkeypatch.setattr(pairs, "crossings", lambda network, tokens, boundary, arith: [b"same"] * len(tokens))
    found, record = pairs.boundary_pairs(small_construction, arithmetic(parse_format("fp16"), "strict"),
                                         suffixes=2, prefixes=16, seed=0)
    assert found == [] and record["candidates"] > 0 and record["confirmed"] == 0


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


def test_only_a_prompt_that_opens_with_its_table_has_a_default_boundary():
    assert pairs.has_default_boundary(TASK) and pairs.default_boundary(TASK) == TASK.segment("z2").stop
    forward = Composition(L=2, m=4, n=(4,), layout="forward")
    for task in (forward, TwoSum(n=8, M=4, t=0)):
        assert not pairs.has_default_boundary(task)
        with pytest.raises(ParameterError, match="no default boundary"):
            pairs.default_boundary(task)
    network = architectures.full(forward, layers=1, H=1, d_head=4, d_model=8, seed=0)
    with pytest.raises(ParameterError, match="paper layout"):
        pairs.targeted_pairs(network, LOW, runs=10)
