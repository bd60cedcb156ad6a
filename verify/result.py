"""The verdicts every checker returns: a status, how much was checked, and a replayable counterexample."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Status(str, Enum):
    VERIFIED = "verified"
    FALSIFIED = "falsified"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Counterexample:
    """An input the network gets wrong: replay it with `witness run FILE --tokens ...`."""

    tokens: list[int]
    expected: Any
    output: Any
    trace: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    """`status` is VERIFIED only when `method` covers every input of the family (e.g. exhaustive)."""

    status: Status
    method: str
    arithmetic: dict[str, Any]
    checked: int
    failures: int
    counterexample: Counterexample | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status.value
        return out
