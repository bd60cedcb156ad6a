"""The tasks of the paper: L-sequential function composition and 2-Sum.

Every task object is a frozen, validated parameter set offering `answer`, `tokens`, `answers` (batched),
`random_tokens`, `enumerate_tokens`, `count` and `params`; `task_from_params` rebuilds one from a file header.
"""

from typing import Any

from witness.errors import ParameterError
from witness.tasks.composition import Composition, CompositionInstance
from witness.tasks.two_sum import TwoSum

Task = Composition | TwoSum
TASKS: dict[str, type] = {Composition.name: Composition, TwoSum.name: TwoSum}


def task_from_params(name: str, params: dict[str, Any]) -> Task:
    """The task called `name` with keyword parameters `params` (as written by `Task.params()`)."""
    if name not in TASKS:
        raise ParameterError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    try:
        return TASKS[name](**params)
    except TypeError as exc:
        raise ParameterError(f"bad parameters for task {name}: {exc}") from None


__all__ = ["Composition", "CompositionInstance", "TwoSum", "Task", "TASKS", "task_from_params"]
