"""The one verdict every run-based check and every certificate returns: a status, how much was checked, and
replayable counterexamples.

`Result` is frozen and its `as_dict()` is the JSON object the command line prints from. A search over many checks
reports a `verify.search.report.SearchReport` and a precision search a `verify.precision.PrecisionResult`: each is
an aggregate of many `Result`s, not another kind of verdict.
"""

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
    """An input the network gets wrong: replay it with `witness run FILE --tokens ...`. `output` is None (or an
    `overflow: ...` message) when the run overflowed a fixed-point format."""

    tokens: list[int]
    expected: Any
    output: Any
    trace: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    """`status` is VERIFIED only when `method` covers every input of the family (exhaustive, or a certificate the
    trusted checker confirmed); a check of some inputs without a failure is UNKNOWN, one with a failure FALSIFIED.

    `checked` inputs were run and `failures` of them were answered wrongly (an input whose run overflows is one);
    `counterexample` is the first of them re-run with a trace; `kept` holds the first failures (at most the
    check's `max_failures`) that a fresh run confirmed (`verify.check.confirm_failure`), the ones a search
    reports. `detail` holds the method's settings (seed, ...), the overflow that stopped a check, what a `theory`
    run rests on, and for certify the certificate or the reason it was refused."""

    status: Status
    method: str
    arithmetic: dict[str, Any]
    checked: int
    failures: int
    counterexample: Counterexample | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    kept: tuple[Counterexample, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status.value
        out["kept"] = list(out["kept"])
        return out
