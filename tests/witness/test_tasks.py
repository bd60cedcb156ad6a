"""Tasks (conventions §1) against the literal references in reference_tasks.py and against hand-computed values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.oracles.reference_tasks import (
    all_composition_inputs,
    composition_alphabets,
    composition_answer_from_tokens,
    composition_chain,
    composition_token_list,
    parse_composition_tokens,
    two_sum_answer,
)
from witness import Composition, InputError, ParameterError, TwoSum
from lab import strategies as ws
from witness.tasks import CompositionInstance, task_from_params

FEW = settings(max_examples=40, deadline=None)


# -- hand-computed examples ---------------------------------------------------------------------------------
def test_composition_tokens_by_hand_L2():
    # N_0 = 2, N_1 = 4, V = 4. i_0 = 1, i_1 = z_1(1) = 0, i_2 = z_2(w_1 * N_0 + i_1) = z_2(2) = 1.
    task = Composition(2, 2, (2,))
    inst = CompositionInstance(z0=1, tables=((1, 0), (3, 2, 1, 0)), w=(1,))
    assert task.tokens(inst).tolist() == [3, 2, 1, 0, 1, 0, 1, 5]
    assert Composition(2, 2, (2,), "forward").tokens(inst).tolist() == [5, 1, 1, 0, 3, 2, 1, 0]
    assert task.answer(inst) == 1
    assert task.prompt_length == 8 and task.vocab_size == 6


def test_composition_tokens_by_hand_L3_mixed_radix_query():
    # N = (1, 2, 6), V = 6; w = (1, 2): enc = 1 + 2 * 2 = 5, so the query id is 11 and the vocabulary has 12 ids.
    # i_0 = 0, i_1 = z_1(0) = 0, i_2 = z_2(1 * 1 + 0) = 0, i_3 = z_3(2 * 2 + 0) = z_3(4) = 1.
    task = Composition(3, 1, (2, 3))
    inst = CompositionInstance(z0=0, tables=((0,), (1, 0), (5, 4, 3, 2, 1, 0)), w=(1, 2))
    assert task.tokens(inst).tolist() == [5, 4, 3, 2, 1, 0, 1, 0, 0, 0, 11]
    assert Composition(3, 1, (2, 3), "forward").tokens(inst).tolist() == [11, 0, 0, 1, 0, 5, 4, 3, 2, 1, 0]
    assert task.answer(inst) == 1
    assert task.vocab_size == 12 and task.prompt_length == 11 and task.read_positions == (10,)


def test_plain_composition_when_every_n_is_one():
    # n_l = 1: z_3(z_2(z_1(z_0))) on [3]; z_0 = 2 -> z_1: 0 -> z_2: 2 -> z_3: 1.
    task = Composition(3, 3, (1, 1))
    inst = CompositionInstance(z0=2, tables=((1, 2, 0), (2, 0, 1), (0, 0, 1)), w=(0, 0))
    assert task.answer(inst) == 1
    assert task.tokens(inst).tolist()[-1] == 3  # V = 3, enc = 0


def test_two_sum_by_hand():
    # M = 5, t = 3, x = (1, 2, 4, 4): 1 + 2 = 3 and 4 + 4 = 8 = 3 (mod 5).
    x = [1, 2, 4, 4]
    assert TwoSum(4, 5, 3).answer(x) == (1, 1, 1, 1)
    assert TwoSum(4, 5, 3, causal=True).answer(x) == (0, 1, 0, 1)
    # x_0 = 4 would match itself (4 + 4 = 3 mod 5) but j != i is required.
    assert TwoSum(4, 5, 3).answer([4, 0, 0, 0]) == (0, 0, 0, 0)


# -- answers and tokens against the literal reference --------------------------------------------------------
@FEW
@given(st.data())
def test_composition_matches_reference(data):
    task = data.draw(ws.tasks("composition", max_L=4, max_m=4, max_n=3, layout=None))
    batch = data.draw(ws.tokens(task))
    expected = [composition_answer_from_tokens(task.m, task.n, row, task.layout) for row in batch]
    assert task.answers(batch).tolist() == expected
    for row, answer in zip(batch, expected):
        inst = task.instance(row)
        z0, tables, w = parse_composition_tokens(task.m, task.n, row, task.layout)
        assert (inst.z0, inst.tables, inst.w) == (z0, tables, w)
        assert task.answer(inst) == answer
        assert task.tokens(inst).tolist() == composition_token_list(task.m, task.n, z0, tables, w, task.layout)


@FEW
@given(st.data())
def test_two_sum_matches_brute_force(data):
    task = data.draw(ws.tasks("two_sum", max_n=7, max_M=6))
    batch = data.draw(ws.tokens(task))
    expected = [two_sum_answer(row, task.M, task.t, task.causal) for row in batch]
    assert task.answers(batch).tolist() == expected
    assert [list(task.answer(row)) for row in batch] == expected


@FEW
@given(st.data())
def test_strategies_draw_valid_inputs(data):
    task = data.draw(ws.tasks("composition", max_L=3, layout="forward"))
    assert task.layout == "forward" and 1 <= task.L <= 3
    batch = data.draw(ws.tokens(task, max_batch=2))
    assert batch.shape[0] in (1, 2) and batch.shape[1] == task.prompt_length
    task.check_tokens(batch)
    two_sum = data.draw(ws.tasks("two_sum", causal=True))
    assert two_sum.causal
    two_sum.check_tokens(data.draw(ws.tokens(two_sum)))


# -- counts and enumeration ----------------------------------------------------------------------------------
@pytest.mark.parametrize("m, n", [(1, ()), (3, ()), (2, (1,)), (2, (2,)), (1, (2, 2)), (2, (1, 2))])
@pytest.mark.parametrize("layout", ["paper", "forward"])
def test_enumeration_yields_every_input_once(m, n, layout):
    task = Composition(len(n) + 1, m, n, layout)
    expected = set(all_composition_inputs(m, n, layout))
    seen = [tuple(row) for batch in task.enumerate_tokens(batch_size=7) for row in batch.tolist()]
    assert len(seen) == len(set(seen)) == len(expected) == task.count()
    assert set(seen) == expected


@pytest.mark.parametrize("layout", ["paper", "forward"])
def test_position_alphabets(layout):
    task = Composition(3, 2, (3, 2), layout)
    radices, offsets = task.position_alphabets()
    assert [range(o, o + r) for o, r in zip(offsets.tolist(), radices.tolist())] == composition_alphabets(
        2, (3, 2), layout)


@pytest.mark.parametrize("causal", [False, True])
def test_two_sum_enumeration(causal):
    task = TwoSum(3, 4, 1, causal)
    seen = [tuple(row) for batch in task.enumerate_tokens(batch_size=5) for row in batch.tolist()]
    assert len(seen) == len(set(seen)) == 64 == task.count()
    assert set(seen) == set(itertools.product(range(4), repeat=3))


def test_counts_by_closed_form():
    assert Composition(2, 2, (2,)).count() == 4096  # 2 * 2^2 * 4^4 * 2
    assert Composition(1, 5).count() == 5**6
    # N = (10, 100, 1000, 10000): 10 * 10^10 * 100^100 * 1000^1000 * 10000^10000 * 10^3 = 10^(1+10+200+3000+40000+3)
    huge = Composition(4, 10, (10, 10, 10)).count()
    assert isinstance(huge, int) and huge == 10**43214
    assert TwoSum(1000, 7, 3).count() == 7**1000


def test_enumeration_refuses_large_families():
    with pytest.raises(ParameterError, match="enumeration limit"):
        Composition(2, 2, (2,)).enumerate_tokens(limit=4095)
    with pytest.raises(ParameterError, match="enumeration limit"):
        TwoSum(30, 7, 0).enumerate_tokens()


# -- seeded randomness ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", [Composition(3, 3, (2, 3)), Composition(3, 3, (2, 3), "forward"),
                                  TwoSum(6, 5, 2), TwoSum(6, 5, 2, causal=True)])
def test_random_tokens_reproducible_and_valid(task):
    first, again = task.random_tokens(seed=11, count=400), task.random_tokens(seed=11, count=400)
    assert np.array_equal(first, again)
    assert not np.array_equal(first, task.random_tokens(seed=12, count=400))
    task.check_tokens(first)
    # every allowed id shows up at every position: the generator covers each position's whole alphabet
    if isinstance(task, Composition):
        alphabets = composition_alphabets(task.m, task.n, task.layout)
    else:
        alphabets = [range(task.M)] * task.n
    for position, alphabet in enumerate(alphabets):
        assert set(first[:, position].tolist()) == set(alphabet)


def test_random_instances_follow_random_tokens():
    task = Composition(2, 3, (2,))
    instances = task.random_instances(seed=3, count=5)
    assert instances == task.random_instances(seed=3, count=5)
    tokens = task.random_tokens(seed=3, count=5)
    for inst, row in zip(instances, tokens):
        assert task.tokens(inst).tolist() == row.tolist()
        assert task.answer(inst) == composition_chain(3, (2,), inst.z0, inst.tables, inst.w)[-1]


def test_zero_random_tokens():
    assert Composition(1, 2).random_tokens(seed=0, count=0).shape == (0, 4)


# -- validation ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    ((0, 2, ()), "L must be >= 1"),
    ((1, 0, ()), "m must be >= 1"),
    ((2, 2, ()), "n must have L-1 = 1 entries"),
    ((1, 2, (2,)), "n must have L-1 = 0 entries"),
    ((3, 2, (2, 0)), "n_2 must be >= 1"),
    ((2, 2, (1.5,)), "n_1 must be an integer"),
    ((True, 2, ()), "L must be an integer"),
    ((2, "2", (2,)), "m must be an integer"),
    ((2, 2, 2), "n must be a list"),
])
def test_composition_parameter_errors(args, message):
    with pytest.raises(ParameterError, match=message):
        Composition(*args)


def test_composition_layout_error():
    with pytest.raises(ParameterError, match="layout must be one of"):
        Composition(1, 2, (), "backward")


@pytest.mark.parametrize("args, message", [
    ((1, 2, 0), "n must be >= 2"),
    ((3, 1, 0), "M must be >= 2"),
    ((3, 4, 4), r"t must be in \[0, M\)"),
    ((3, 4, -1), "t must be >= 0"),
    ((3, 4, 1, "yes"), "causal must be a bool"),
])
def test_two_sum_parameter_errors(args, message):
    with pytest.raises(ParameterError, match=message):
        TwoSum(*args)


@pytest.mark.parametrize("tokens, message", [
    ([3, 2, 1, 0, 1, 0, 1], "expected 8 tokens"),           # one short
    ([3, 2, 1, 0, 1, 0, 1, 6], "position 7 is outside"),    # query id beyond the vocabulary
    ([3, 2, 1, 0, 1, 0, 1, 3], "position 7 is outside"),    # a value id where the query belongs
    ([4, 2, 1, 0, 1, 0, 1, 5], "position 0 is outside"),    # z_2 value 4 >= N_1
    ([3, 2, 1, 0, 2, 0, 1, 5], "position 4 is outside"),    # z_1 value 2 >= m
    ([3, 2, 1, 0, 1, 0, -1, 5], "position 6 is outside"),   # negative seed
    ([3.0, 2, 1, 0, 1, 0, 1, 5], "must be integers"),
    ([[3, 2], [1]], "tokens"),                               # ragged
])
def test_composition_token_errors(tokens, message):
    task = Composition(2, 2, (2,))
    with pytest.raises(InputError, match=message):
        task.answers(tokens)


def test_composition_instance_errors():
    task = Composition(2, 2, (2,))
    with pytest.raises(InputError, match="seed"):
        task.answer(CompositionInstance(2, ((0, 0), (0, 0, 0, 0)), (0,)))
    with pytest.raises(InputError, match="table z_2"):
        task.answer(CompositionInstance(0, ((0, 0), (0, 0, 0, 4)), (0,)))
    with pytest.raises(InputError, match="table z_1"):
        task.tokens(CompositionInstance(0, ((0,), (0, 0, 0, 0)), (0,)))
    with pytest.raises(InputError, match="w_1"):
        task.answer(CompositionInstance(0, ((0, 0), (0, 0, 0, 0)), (2,)))
    with pytest.raises(InputError, match="instance has 1 tables"):
        task.answer(CompositionInstance(0, ((0, 0),), ()))
    for bad in (CompositionInstance("a", ((0, 0), (0, 0, 0, 0)), (0,)),
                CompositionInstance(1.5, ((0, 0), (0, 0, 0, 0)), (0,)),
                CompositionInstance(0, ((0, 0.5), (0, 0, 0, 0)), (0,)),
                CompositionInstance(0, ((0, 0), (0, 0, 0, 0)), (True,))):
        with pytest.raises(InputError, match="must be integers"):
            task.answer(bad)


def test_two_sum_token_errors():
    task = TwoSum(3, 4, 1)
    with pytest.raises(InputError, match="position 2 is outside"):
        task.answers([0, 1, 4])
    with pytest.raises(InputError, match="expected 3 tokens"):
        task.answers([0, 1])
    with pytest.raises(InputError, match="one input"):
        task.answer([[0, 1, 2], [0, 1, 2]])


def test_task_from_params_round_trip():
    for task in (Composition(3, 2, (2, 3), "forward"), TwoSum(5, 3, 2, causal=True)):
        assert task_from_params(task.name, task.params()) == task
    with pytest.raises(ParameterError, match="unknown task"):
        task_from_params("three_sum", {})
    with pytest.raises(ParameterError, match="bad parameters for task composition"):
        task_from_params("composition", {"L": 1, "m": 2, "depth": 3})


@pytest.mark.parametrize("L, m, n, layout", [(1, 5, (), "paper"), (2, 3, (2,), "forward"), (3, 2, (2, 3), "paper")])
def test_every_hop_and_the_position_it_reads_follow_the_reference_chain(L, m, n, layout):
    task = Composition(L=L, m=m, n=n, layout=layout)
    tokens = task.random_tokens(np.random.default_rng(7), 200)
    positions = task.hop_positions(tokens)
    for row, where in zip(tokens, positions):
        z0, tables, w = parse_composition_tokens(m, n, row, layout)
        assert list(row[where]) == composition_chain(m, n, z0, tables, w)[1:]
    assert np.array_equal(task.hop_answers(tokens), np.take_along_axis(tokens, positions, axis=1))
