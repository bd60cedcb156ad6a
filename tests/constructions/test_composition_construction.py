"""The (L+1)-layer composition network (docs/conventions.md §4.1) answers every input it is claimed to, in float64.

Expected answers come from the literal reference in reference_tasks.py, never from the task code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

import witness
from tests.oracles.reference_tasks import (
    all_composition_inputs,
    composition_answer_from_tokens,
    composition_chain,
    parse_composition_tokens,
)
from verify import check
from verify.result import Status
from witness.execute import run


def reference_answers(task, batch) -> list[int]:
    return [composition_answer_from_tokens(task.m, task.n, row, task.layout) for row in batch]


# (L, m, n, number of inputs): 2 * 2^2 * 4^4 * 2 = 4096 for L = 2; m * m^m for L = 1.
@pytest.mark.parametrize("L, m, n, count", [(2, 2, [2], 4096)] + [(1, m, [], m ** (m + 1)) for m in range(1, 6)])
def test_exhaustive_small_families(L, m, n, count):
    net = witness.compile("composition", L=L, m=m, n=n)
    result = check.exhaustive(net)
    assert result.status == Status.VERIFIED
    assert result.failures == 0 and result.checked == count
    # the same claim, checked without the verifier or the task code: every input, the reference's answer
    inputs = np.array(list(all_composition_inputs(m, tuple(n))), dtype=np.int64)
    assert len(inputs) == result.checked
    assert net.run(inputs) == reference_answers(net.task, inputs)


@pytest.mark.parametrize("L, m, n", [
    (1, 7, []), (2, 3, [5]), (3, 3, [3, 5]), (3, 4, [2, 4]), (4, 2, [3, 1, 2]), (5, 3, [1, 2, 1, 3]),
    (6, 2, [2, 2, 2, 2, 2]), (6, 1, [3, 1, 2, 1, 2]),
])
def test_random_inputs(L, m, n):
    net = witness.compile("composition", L=L, m=m, n=n)
    assert len(net.layers) == L + 1
    tokens = net.task.random_tokens(seed=L * 100 + m, count=300)
    assert net.run(tokens) == reference_answers(net.task, tokens)


def test_prompt_of_ten_thousand_tokens():
    net = witness.compile("composition", L=2, m=100, n=[99])
    assert net.task.prompt_length == 10_002
    for tokens in net.task.random_tokens(seed=7, count=2):  # one at a time: each run is ~3 s
        assert net.run(tokens) == reference_answers(net.task, [tokens])[0]


def test_slots_hold_exact_pm1_codes_of_the_chain():
    net = witness.compile("composition", L=3, m=3, n=[3, 5])
    task = net.task
    tokens = task.random_tokens(seed=1, count=40)
    trace = run(net, tokens, trace=True).trace
    for row, sequence in enumerate(tokens):
        chain = composition_chain(task.m, task.n, *parse_composition_tokens(task.m, task.n, sequence, "paper"))
        for l in range(task.L + 1):
            stream = trace[f"blocks.{l}.hook_resid_post"][row, -1]
            slot = stream[net.basis.group(f"R{l}")]
            code = [1.0 if (chain[l] >> k) & 1 else -1.0 for k in range(slot.size)]
            assert slot.tolist() == code, (l, chain)  # exact ±1, no tolerance
            assert not stream[net.basis.group(f"R{l + 1}")].any()  # later slots untouched so far
            assert not stream[net.basis.group("fetch")].any()  # the MLP cleared its scratch exactly


def test_slot_width_covers_the_value_vocabulary():
    net = witness.compile("composition", L=3, m=3, n=[3, 5])
    assert len(net.basis.group("R3")) == (45 - 1).bit_length()


def test_refuses_forward_layout():
    with pytest.raises(witness.ParameterError, match="layout 'forward' is not supported"):
        witness.compile("composition", L=2, m=2, n=[2], layout="forward")


@pytest.mark.parametrize("params, message", [
    ({"L": 0, "m": 2}, "L must be >= 1"),
    ({"L": 2, "m": 2}, "n must have L-1 = 1 entries"),
    ({"L": 1, "m": 2, "depth": 2}, "bad parameters for construction composition"),
    ({"m": 2}, "bad parameters for construction composition"),
])
def test_bad_parameters(params, message):
    with pytest.raises(witness.ParameterError, match=message):
        witness.compile("composition", **params)


def test_unknown_construction():
    with pytest.raises(witness.ParameterError, match="unknown construction"):
        witness.compile("no_such_construction", L=1, m=2)


def test_metadata_and_budget():
    net = witness.compile("composition", L=3, m=4, n=[2, 4])
    assert net.meta.task == "composition" and net.meta.construction == "composition"
    assert net.task == witness.Composition(3, 4, (2, 4))
    budget = net.budget()
    d_head = net.layers[0].mixer.d_head
    assert (budget.H, budget.d_head, budget.d_model, budget.p) == (1, d_head, net.d_model, 64)
    assert budget.Hdp == 1 * max(d_head, net.d_model) * 64
