"""witness.tasks.record: each registered task's record builds its task from its schema (defaults filled in, unknown
and missing parameters refused by name), its strategies draw valid tasks and inputs, and a malformed record is
refused when it is made."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import strategies as ws
from witness.errors import ParameterError
from witness.tasks import RECORDS, Composition, Parameter, TaskRecord, TwoSum, record_of, task_from_params


def test_the_registry_holds_the_papers_tasks_by_their_class_names():
    assert RECORDS["composition"].task is Composition and RECORDS["two_sum"].task is TwoSum
    assert record_of(TwoSum(4, 5, 0)) is RECORDS["two_sum"] and record_of("composition") is RECORDS["composition"]
    with pytest.raises(ParameterError, match="unknown task 'parity'; known: composition, two_sum"):
        record_of("parity")


def test_build_fills_in_defaults_and_names_what_is_wrong():
    two_sum = RECORDS["two_sum"]
    assert two_sum.build(n=4, M=5) == TwoSum(4, 5, 0, False)
    assert two_sum.build(n=4, M=5, t=None, causal=True) == TwoSum(4, 5, 0, True)
    assert RECORDS["composition"].build(L=1, m=3) == Composition(1, 3, (), "paper")
    with pytest.raises(ParameterError, match="two_sum needs M"):
        two_sum.build(n=4)
    with pytest.raises(ParameterError, match="not L"):
        two_sum.build(n=4, M=5, L=2)
    with pytest.raises(ParameterError, match="t must be in"):
        two_sum.build(n=4, M=5, t=7)


def test_every_schema_names_exactly_the_keywords_its_task_writes():
    for task in (Composition(2, 3, (2,)), TwoSum(4, 5, 1, True)):
        name, record = task.name, record_of(task)
        assert [parameter.name for parameter in record.parameters] == list(task.params())
        assert record.build(**task.params()) == task == task_from_params(name, task.params())


@settings(max_examples=30, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(RECORDS)))
def test_the_strategies_draw_valid_tasks_and_inputs(data, name):
    task = data.draw(ws.tasks(name))
    batch = data.draw(ws.tokens(task, max_batch=3))
    assert 1 <= len(batch) <= 3 and np.array_equal(task.check_tokens(batch), batch)
    assert task.answers(batch).shape[0] == len(batch)


def test_a_malformed_record_is_refused_when_it_is_made():
    with pytest.raises(ParameterError, match="kind must be one of"):
        Parameter("n", "float", "a length")
    with pytest.raises(ParameterError, match="choices go with kind 'choice'"):
        Parameter("n", "int", "a length", choices=("a",))
    with pytest.raises(ParameterError, match="its class is named 'two_sum'"):
        TaskRecord("sum", TwoSum, "", (), RECORDS["two_sum"].tasks_strategy)
    with pytest.raises(ParameterError, match="listed twice"):
        TaskRecord("two_sum", TwoSum, "", (Parameter("n", "int", ""), Parameter("n", "int", "")),
                   RECORDS["two_sum"].tasks_strategy)
