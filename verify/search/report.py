"""What a search reports (docs/conventions.md §6), and the one gate every reported failure and pair passes through.

A search may be as clever as it likes about *finding* a failing input or an indistinguishable pair; nothing it
finds is reported until `verify.check.confirm_failure` / `confirm_pair` has re-run it in the plain executor
(`witness.execute.run`, the same run `witness run` and `verify.check` use) at the report's format and semantics and
compared the output with the task's own answer. So every entry of a `SearchReport` is replayable with
`witness run FILE --tokens ... --format FMT --semantics SEM`, and a search bug can only lose findings, never invent
them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from verify.check.runs import fresh_output, plain_answer, task_of
from verify.result import Counterexample
from witness.arith import Arithmetic
from witness.ir import Network

#: Pairs a pair search keeps before it stops.
DEFAULT_MAX_PAIRS = 5


@dataclass(frozen=True)
class Pair:
    """Two inputs with different answers on which the network gives the same `output`: one of them is wrong."""

    a: list[int]
    b: list[int]
    expected_a: Any
    expected_b: Any
    output: Any


@dataclass(frozen=True)
class SearchReport:
    """The JSON object of `witness search ...`: `network` is the saved file (None if not saved), `budget` the
    budget table (H, d_head, d_model, d, p, Hdp, state bits), `searched` what was tried, on how many inputs, in
    how many seconds. `format` and `semantics` are those every failure and pair was confirmed under.

    Not a verdict: a search runs many checks (each a `verify.result.Result`) and pair probes on one network, and
    its report joins their confirmed findings, distinct, with one record per probe; it never says verified."""

    network: str | None
    format: str
    semantics: str
    budget: dict[str, Any]
    failures: list[Counterexample] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    searched: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def confirm_pair(network: Network, a, b, arith: Arithmetic) -> Pair | None:
    """`Pair` if both inputs, re-run from scratch, get the same output while their answers differ; else None."""
    a, b = [int(t) for t in a], [int(t) for t in b]
    answers = task_of(network).answers(np.asarray([a, b]))
    expected_a, expected_b = plain_answer(answers[0]), plain_answer(answers[1])
    output_a, output_b = fresh_output(network, a, arith), fresh_output(network, b, arith)
    if expected_a == expected_b or output_a is None or output_a != output_b:
        return None
    return Pair(a, b, expected_a, expected_b, output_a)
