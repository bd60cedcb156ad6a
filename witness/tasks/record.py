"""What a task tells the rest of witness about itself: one frozen `TaskRecord` per task, registered in
`witness.tasks.RECORDS`.

Everything that is not about one task's mathematics asks the record instead of naming the task: the command line
generates a task's options from `parameters` (and its help from `summary`), checks draw inputs from
`tokens_strategy`, and the searches run the probes `probes` names. Adding a task is its module (the parameter
class and its record) plus one line in `witness/tasks/__init__.py`; certifying its constructions adds a proof
inside the trusted checker.

The task class itself is a frozen, validated parameter set offering `name`, `answers(batch)`, `check_tokens`,
`random_tokens(seed, count)`, `enumerate_tokens()`, `count()`, `position_alphabets()`, `read_positions`,
`prompt_length`, `vocab_size` and `params()` (`witness.tasks.base` has the shared pieces).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from witness.errors import ParameterError
from witness.tasks.base import alphabet_tokens

#: `Parameter.kind`: an int; a list of ints; a flag (absent means False); one of `choices`.
KINDS = ("int", "ints", "flag", "choice")


class Required:
    """The default of a parameter that has none (a sentinel with a readable repr)."""

    def __repr__(self) -> str:
        return "required"


REQUIRED = Required()


@dataclass(frozen=True)
class Parameter:
    """One parameter of a task: the keyword its class takes, what it is, and its default (`REQUIRED` if none)."""

    name: str
    kind: str
    help: str
    default: Any = REQUIRED
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ParameterError(f"parameter {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if (self.kind == "choice") != bool(self.choices):
            raise ParameterError(f"parameter {self.name}: choices go with kind 'choice' and only with it")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class TaskRecord:
    """A task's registration: its name and class, a one-line summary, its parameter schema, its Hypothesis
    strategies, and the probes that apply to its networks.

    `tasks_strategy(**bounds)` draws task objects (bounds such as `max_n` are the task's own); `tokens_strategy(task,
    max_batch)` draws a batch [1..max_batch, prompt_length] of valid inputs, shrinking towards small ids (by default
    `alphabet_tokens`, position by position over `position_alphabets()`). Both import Hypothesis when called, so the
    core does not. `probes` names entries of `verify.search.probes.PROBES`."""

    name: str
    task: type
    summary: str
    parameters: tuple[Parameter, ...]
    tasks_strategy: Callable[..., Any]
    tokens_strategy: Callable[..., Any] = alphabet_tokens
    probes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if getattr(self.task, "name", None) != self.name:
            raise ParameterError(f"task record {self.name!r}: its class is named {getattr(self.task, 'name', None)!r}")
        names = [parameter.name for parameter in self.parameters]
        if len(set(names)) != len(names):
            raise ParameterError(f"task record {self.name!r}: a parameter is listed twice in {names}")

    def build(self, **values: Any):
        """The task with these parameter values, each one left out (or None) taking its default; a ParameterError
        names what is missing or unknown."""
        known = {parameter.name for parameter in self.parameters}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ParameterError(f"{self.name} takes {', '.join(sorted(known))}; not {', '.join(unknown)}")
        missing = [p.name for p in self.parameters if p.required and values.get(p.name) is None]
        if missing:
            raise ParameterError(f"{self.name} needs {', '.join(missing)}")
        given = {p.name: p.default if values.get(p.name) is None else values[p.name] for p in self.parameters}
        try:
            return self.task(**given)
        except TypeError as exc:
            raise ParameterError(f"bad parameters for task {self.name}: {exc}") from None


__all__ = ["KINDS", "REQUIRED", "Parameter", "TaskRecord"]
