"""What every check does with the inputs it runs: judge a batch, re-run a failure with a trace, confirm a failure
by a fresh run, and turn what a run found into its `Result`.

    wrong_rows(network, batch, arith)       which inputs of a batch are answered wrongly (a tie counts as wrong)
    confirm_failure(network, tokens, arith) the gate: an input re-run from scratch, a Counterexample if wrong again
    Findings(network, arith, max_failures)  the failures a check met: counted, the first one traced, the first
                                            `max_failures` confirmed by the gate
    verdict(...)                            the Result: FALSIFIED on any failure, VERIFIED only when the inputs run
                                            were as many as the family has, else UNKNOWN

Under `theory` semantics the executor stands in float64 for the exact arithmetic inside each block, so a verdict
from running is about those runs: every such Result says so in `detail["rests_on"]` (a proof under exact
arithmetic inside the block comes from `verify.certify`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from verify.result import Counterexample, Result, Status
from witness.arith import Arithmetic
from witness.errors import OverflowInFormat, ParameterError
from witness.execute import run
from witness.generate import answer_ids, generated_count
from witness.ir import Network
from witness.tasks.base import check_int

#: Inputs per executor call: keeps (batch x prompt x d_model) floats near this many.
BATCH_ELEMENTS = 1 << 22
#: What a run-based verdict under `theory` rests on.
THEORY_RUNS = ("float64 inside each block in place of the exact arithmetic theory semantics means: a verdict about "
               "these runs, not a proof (verify.certify proves under exact arithmetic)")


def rests_on(arith: Arithmetic, detail: dict) -> dict:
    return {**detail, "rests_on": THEORY_RUNS} if arith.semantics == "theory" else detail


def task_of(network: Network):
    """The task the network names; a ParameterError when it names none (nothing to check it against)."""
    task = network.task
    if task is None:
        raise ParameterError("the network names no task, so there is nothing to check it against")
    return task


def batch_size(network: Network) -> int:
    return max(1, BATCH_ELEMENTS // (network.n_ctx * network.d_model))


def wrong_rows(network: Network, batch: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """Which inputs of `batch` the network answers wrongly (a tie counts as wrong; a network whose task asks for
    generated tokens is judged on all of them, `witness.generate.answer_ids`); raises OverflowInFormat."""
    expected = task_of(network).answers(batch).reshape(batch.shape[0], -1)
    return ~(answer_ids(network, batch, arith) == expected).all(axis=1)


def first_overflowing_row(network: Network, batch: np.ndarray, arith: Arithmetic) -> int:
    """The first row whose run overflows, for a batch whose run does (bisection on prefixes: rows are independent,
    so a prefix overflows exactly when it contains an overflowing row)."""
    low, high = 0, batch.shape[0] - 1  # invariant: batch[:low] runs, batch[:high + 1] overflows
    while low < high:
        middle = (low + high) // 2
        try:
            answer_ids(network, batch[:middle + 1], arith)
            low = middle + 1
        except OverflowInFormat:
            high = middle
    return low


def wrong_rows_until_overflow(network: Network, batch: np.ndarray,
                              arith: Arithmetic) -> tuple[np.ndarray, str | None]:
    """`wrong_rows` for the rows up to and including the first one whose run overflows (counted wrong), and the
    overflow message (None when nothing overflowed: then every row is covered)."""
    try:
        return wrong_rows(network, batch, arith), None
    except OverflowInFormat as exc:
        row = first_overflowing_row(network, batch, arith)
        before = wrong_rows(network, batch[:row], arith) if row else np.zeros(0, dtype=bool)
        return np.append(before, True), str(exc)


def counterexample_for(network: Network, tokens: np.ndarray, arith: Arithmetic) -> Counterexample:
    """Re-run one input with a trace; the trace keeps each layer's residual stream at the read positions.

    When the run overflows, the output is the overflow message and there is no trace. A traced run computes every
    position of the last layer too (docs/conventions.md §3), so it can overflow where the plain run does not: then
    the plain run gives the output, and there is no trace. (Where both run, their values are the same.)
    """
    task = task_of(network)
    tokens = [int(t) for t in tokens]
    if generated_count(network):
        return generation_counterexample(network, tokens, arith)
    expected = task.answers(tokens).reshape(1, -1)[0].tolist()
    if network.readout.read == "last":
        expected = expected[0]
    try:
        outputs = run(network, np.array(tokens), arith, trace=True)
        read = list(outputs.read_positions)
        trace = {name: value[0][read].tolist() for name, value in outputs.trace.items() if "resid" in name}
    except OverflowInFormat:
        try:
            outputs, trace = run(network, np.array(tokens), arith), {}
        except OverflowInFormat as exc:
            return Counterexample(tokens, expected, f"overflow: {exc}", {})
    output = outputs.predictions[0].tolist()
    if network.readout.read == "last":
        output = output[0]
    return Counterexample(tokens, expected, output, trace)


def generation_counterexample(network: Network, tokens: list[int], arith: Arithmetic) -> Counterexample:
    """A generating network's answer on one input: the tokens it generated against its task's answers, and the
    trace (at the step's last position) of the first step that went wrong (the last step, where none did), run on
    the prompt and the right tokens before it; an overflowing generation is its message, with no trace."""
    expected = task_of(network).answers(np.asarray([tokens]))[0]
    try:
        generated = answer_ids(network, np.asarray([tokens]), arith)[0]
    except OverflowInFormat as exc:
        return Counterexample(tokens, plain_answer(expected), f"overflow: {exc}", {})
    wrong = np.flatnonzero(generated != expected)
    step = int(wrong[0]) if wrong.size else expected.size - 1
    try:
        outputs = run(network, np.concatenate([tokens, expected[:step]]), arith, trace=True)
        trace = {name: value[0][list(outputs.read_positions)].tolist() for name, value in outputs.trace.items()
                 if "resid" in name}
    except OverflowInFormat:
        trace = {}
    return Counterexample(tokens, plain_answer(expected), plain_answer(generated), trace)


def plain_answer(value: Any) -> Any:
    """An answer or output as JSON-ready ints: one int (read at the last position) or a list (read everywhere, or
    generated)."""
    array = np.asarray(value).reshape(-1)
    return int(array[0]) if array.size == 1 else [int(v) for v in array]


def fresh_output(network: Network, tokens: list[int], arith: Arithmetic) -> Any:
    """The network's answer on one input, run on its own; an input that overflows a fixed-point format answers
    nothing (None)."""
    try:
        return plain_answer(answer_ids(network, np.asarray([tokens]), arith)[0])
    except OverflowInFormat:
        return None


def confirm_failure(network: Network, tokens, arith: Arithmetic) -> Counterexample | None:
    """A `Counterexample` (`output` None: the run overflowed) if the network, re-run from scratch under `arith`,
    answers `tokens` wrongly; else None. The gate every failure a check keeps passes (`Findings`), and with
    `verify.search.report.confirm_pair` every finding a search reports."""
    tokens = [int(t) for t in tokens]
    expected = plain_answer(task_of(network).answers(np.asarray([tokens]))[0])
    output = fresh_output(network, tokens, arith)
    return None if output == expected else Counterexample(tokens, expected, output)


class Findings:
    """The failing inputs a check meets, in the order it runs them: `failures` counts them, `counterexample` is the
    first re-run with a trace, `kept` the first `max_failures` that `confirm_failure` confirms. With `distinct`,
    an input met again is not counted again (a search that walks near its failures meets them more than once)."""

    def __init__(self, network: Network, arith: Arithmetic, max_failures: int = 0, distinct: bool = False):
        self.network, self.arith = network, arith
        self.max_failures = check_int("max_failures", max_failures, 0)
        self.seen: set[tuple[int, ...]] | None = set() if distinct else None
        self.failures = 0
        self.counterexample: Counterexample | None = None
        self.kept: list[Counterexample] = []

    def add(self, rows: Iterable[np.ndarray]) -> None:
        """Failing inputs of one batch: at most `max_failures` minus those already kept are sent to the gate, so
        a batch costs a bounded number of fresh runs however many of its inputs fail."""
        rows = [np.asarray(row) for row in rows]
        if self.seen is not None:
            new = []
            for row in rows:
                key = tuple(int(t) for t in row)
                if key not in self.seen:
                    self.seen.add(key)
                    new.append(row)
            rows = new
        if rows and self.counterexample is None:
            self.counterexample = counterexample_for(self.network, rows[0], self.arith)
        for row in rows[:self.max_failures - len(self.kept)]:
            confirmed = confirm_failure(self.network, row, self.arith)
            if confirmed is not None:
                self.kept.append(confirmed)
        self.failures += len(rows)

    def result(self, method: str, checked: int, *, family_size: int | None = None,
               detail: dict[str, Any] | None = None, stopped_by_overflow: str | None = None) -> Result:
        return verdict(method, self.arith, checked, self.failures, self.counterexample, self.kept,
                       family_size=family_size, detail=detail, stopped_by_overflow=stopped_by_overflow)


def verdict(method: str, arith: Arithmetic, checked: int, failures: int, counterexample: Counterexample | None,
            kept: Iterable[Counterexample] = (), *, family_size: int | None = None,
            detail: dict[str, Any] | None = None, stopped_by_overflow: str | None = None) -> Result:
    """FALSIFIED on any failure; VERIFIED only when `family_size` is given (the inputs were the family's, each at
    most once) and exactly that many inputs ran without one; else UNKNOWN. Counting the inputs run, not trusting a
    flag, means a stream that lost inputs on the way can never verify."""
    if failures:
        status = Status.FALSIFIED
    else:
        status = Status.VERIFIED if family_size is not None and checked == family_size else Status.UNKNOWN
    detail = dict(detail or {})
    if stopped_by_overflow is not None:
        detail["stopped_by_overflow"] = stopped_by_overflow
    return Result(status, method, arith.describe(), checked, failures, counterexample, rests_on(arith, detail),
                  tuple(kept))
