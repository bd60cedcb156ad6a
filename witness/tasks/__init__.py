"""The tasks, each a module with its parameter class and its registration record (`witness.tasks.record`).

Every task object is a frozen, validated parameter set offering `answers` (batched), `random_tokens`,
`enumerate_tokens`, `count`, `params` and the rest listed in `witness.tasks.record`; `task_from_params` rebuilds one
from a file header. Registering a task is its line in `RECORDS` below.
"""

from typing import Any

from witness.errors import ParameterError
from witness.tasks import composition, composition_cot, composition_cot_pairs, two_sum
from witness.tasks.composition import Composition, CompositionInstance
from witness.tasks.composition_cot import CompositionCoT
from witness.tasks.composition_cot_pairs import CompositionCoTPairs
from witness.tasks.record import Parameter, TaskRecord
from witness.tasks.two_sum import TwoSum

RECORDS: dict[str, TaskRecord] = {record.name: record for record in (
    composition.RECORD,
    two_sum.RECORD,
    composition_cot.RECORD,
    composition_cot_pairs.RECORD,
)}


def record_of(task_or_name: Any) -> TaskRecord:
    """The registration record of a task object or task name; a ParameterError lists the known tasks."""
    name = task_or_name if isinstance(task_or_name, str) else getattr(task_or_name, "name", None)
    if name not in RECORDS:
        raise ParameterError(f"unknown task {name!r}; known: {', '.join(RECORDS)}")
    return RECORDS[name]


def task_from_params(name: str, params: dict[str, Any]):
    """The task called `name` with keyword parameters `params` (as written by `task.params()`)."""
    record = record_of(name)
    try:
        return record.task(**params)
    except TypeError as exc:
        raise ParameterError(f"bad parameters for task {name}: {exc}") from None


__all__ = ["Composition", "CompositionCoT", "CompositionCoTPairs", "CompositionInstance", "TwoSum", "RECORDS",
           "Parameter", "TaskRecord", "record_of", "task_from_params"]
