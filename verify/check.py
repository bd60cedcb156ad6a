"""Checking a network against its task by running it: on every input (exhaustive), on seeded random samples, or
by a Hypothesis search that shrinks a failure to a minimal failing input (docs/conventions.md §5).

One loop runs every batch-wise check, `check_batches`; it returns a `Tally` of what the run found, and both a
verdict (`Tally.result`, a `Result`) and a search's record (`verify.search.probes.Probe.of`) are read off that
one tally. The three input streams are built once each, for the verifier, the search, the chunked sweeps and
the command line alike:

    sampled_tally(network, count, seed, arith, ...)      `count` seeded random inputs
    exhaustive_tally(network, arith, limit, ...)         every input of a small family, in enumeration order
    hypothesis_tally(network, arith, max_examples, seed)  Hypothesis, the failure shrunk to a minimal input

`sampled`, `exhaustive` and `hypothesis_search` are their verdicts. Only `exhaustive` can return VERIFIED; a
sample or a search that finds no failure is UNKNOWN, with the count checked. An input on which a fixed-point run
overflows is a failure: the network does not answer it in that format; a verdict stops there, a search's tally
(`stop_at_overflow=False`) runs on past it.

Under `theory` semantics the executor stands in float64 for the exact arithmetic inside each block, so a verdict
from running is about those runs: every such Result says so in `detail["rests_on"]` (a proof under exact
arithmetic inside the block comes from `verify.certify`).
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from verify.defaults import DEFAULT_MAX_EXAMPLES  # inputs a Hypothesis search generates unless told otherwise
from verify.result import Counterexample, Result, Status
from witness.progress import bar
from witness.arith import FLOAT64, Arithmetic
from witness.errors import OverflowInFormat, ParameterError
from witness.execute import run
from witness.ir import Network
from witness.tasks import record_of
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
    """Which inputs of `batch` the network answers wrongly (a tie counts as wrong); raises OverflowInFormat."""
    expected = task_of(network).answers(batch).reshape(batch.shape[0], -1)
    predicted = run(network, batch, arith).predictions
    return ~(predicted == expected).all(axis=1)


def first_overflowing_row(network: Network, batch: np.ndarray, arith: Arithmetic) -> int:
    """The first row whose run overflows, for a batch whose run does (bisection on prefixes: rows are independent,
    so a prefix overflows exactly when it contains an overflowing row)."""
    low, high = 0, batch.shape[0] - 1  # invariant: batch[:low] runs, batch[:high + 1] overflows
    while low < high:
        middle = (low + high) // 2
        try:
            run(network, batch[:middle + 1], arith)
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


def plain_answer(value: Any) -> Any:
    """An answer or output as JSON-ready ints: one int (read at the last position) or a list (read everywhere)."""
    array = np.asarray(value).reshape(-1)
    return int(array[0]) if array.size == 1 else [int(v) for v in array]


def fresh_output(network: Network, tokens: list[int], arith: Arithmetic) -> Any:
    """The network's answer on one input, run on its own; an input that overflows a fixed-point format answers
    nothing (None)."""
    try:
        return plain_answer(run(network, np.asarray([tokens]), arith).predictions[0])
    except OverflowInFormat:
        return None


def confirm_failure(network: Network, tokens, arith: Arithmetic) -> Counterexample | None:
    """A `Counterexample` (`output` None: the run overflowed) if the network, re-run from scratch under `arith`,
    answers `tokens` wrongly; else None. The gate every failure a search reports passes (verify.search.report)."""
    tokens = [int(t) for t in tokens]
    expected = plain_answer(task_of(network).answers(np.asarray([tokens]))[0])
    output = fresh_output(network, tokens, arith)
    return None if output == expected else Counterexample(tokens, expected, output)


@dataclass(frozen=True)
class Tally:
    """What one check run found: `checked` inputs run and the `failures` among them (an input whose run
    overflows is one), the first wrong input re-run with a trace (`counterexample`), the first failures that
    `confirm_failure` confirmed (`kept`, at most the run's `max_failures`), the overflow that ended the run
    (`stopped_by_overflow`, None when it did not stop at one), the method's `settings` (seed, ...), the `seconds`
    it took, and whether its inputs were the whole family (`complete`)."""

    method: str
    arith: Arithmetic
    complete: bool
    checked: int
    failures: int
    counterexample: Counterexample | None
    kept: tuple[Counterexample, ...]
    stopped_by_overflow: str | None
    settings: dict[str, Any]
    seconds: float

    def result(self) -> Result:
        """The verdict: FALSIFIED on any failure, VERIFIED only for a complete run without one, else UNKNOWN."""
        if self.failures:
            status = Status.FALSIFIED
        else:
            status = Status.VERIFIED if self.complete else Status.UNKNOWN
        detail = dict(self.settings)
        if self.stopped_by_overflow is not None:
            detail["stopped_by_overflow"] = self.stopped_by_overflow
        return Result(status, self.method, self.arith.describe(), self.checked, self.failures, self.counterexample,
                      rests_on(self.arith, detail))


def check_batches(network: Network, batches: Iterable[np.ndarray], arith: Arithmetic, method: str, *,
                  complete: bool = False, total: int | None = None, settings: dict[str, Any] | None = None,
                  stop_at_overflow: bool = True, max_failures: int = 0) -> Tally:
    """Run every batch: count every input and every failure, re-run the first wrong input with a trace, and keep
    the first `max_failures` failures `confirm_failure` confirms. `complete`: the batches are all inputs.

    An overflow ends the run when `stop_at_overflow` (`checked` then counts the inputs up to and including the
    overflowing one); otherwise the rest of its batch, and every later batch, still run.
    """
    max_failures = check_int("max_failures", max_failures, 0)
    start = time.perf_counter()
    checked = failures = 0
    counterexample, kept, stopped = None, [], None
    with bar(total=total, desc=method, unit="input") as progress:
        for batch in batches:
            while batch.shape[0] and stopped is None:
                wrong, overflow = wrong_rows_until_overflow(network, batch, arith)
                rows = np.flatnonzero(wrong)
                if rows.size and counterexample is None:
                    counterexample = counterexample_for(network, batch[rows[0]], arith)
                for row in rows[:max_failures - len(kept)]:
                    confirmed = confirm_failure(network, batch[row], arith)
                    if confirmed is not None:
                        kept.append(confirmed)
                checked += wrong.size
                failures += rows.size
                progress.update(wrong.size)
                batch = batch[wrong.size:]
                if stop_at_overflow:
                    stopped = overflow
            if stopped is not None:
                break
    return Tally(method, arith, complete, checked, failures, counterexample, tuple(kept), stopped,
                 dict(settings or {}), time.perf_counter() - start)


def sampled_tally(network: Network, count: int, seed: int, arith: Arithmetic, *, stop_at_overflow: bool = True,
                  max_failures: int = 0) -> Tally:
    """`count` uniformly random inputs of the network's task, drawn from `seed` (the same seed, the same inputs)."""
    task = task_of(network)
    count, seed = check_int("count", count, 1), check_int("seed", seed, 0)
    size = batch_size(network)
    rng = np.random.default_rng(seed)
    batches = (task.random_tokens(rng, min(size, count - begin)) for begin in range(0, count, size))
    return check_batches(network, batches, arith, "sampled", total=count, settings={"seed": seed},
                         stop_at_overflow=stop_at_overflow, max_failures=max_failures)


def exhaustive_tally(network: Network, arith: Arithmetic, limit: int, *, stop_at_overflow: bool = True,
                     max_failures: int = 0) -> Tally:
    """Every input of the network's task family, in enumeration order (refused above `limit` inputs)."""
    task = task_of(network)
    batches = task.enumerate_tokens(batch_size(network), limit)
    return check_batches(network, batches, arith, "exhaustive", complete=True, total=task.count(),
                         stop_at_overflow=stop_at_overflow, max_failures=max_failures)


def one_input(task):
    """A Hypothesis strategy for one valid input of `task`: its record's token strategy, which shrinks token by
    token (Hypothesis is imported by the strategy, where a search runs, not by every command that samples)."""
    return record_of(task).tokens_strategy(task, max_batch=1).map(lambda batch: batch[0])


def hypothesis_tally(network: Network, arith: Arithmetic, max_examples: int, seed: int, *,
                     max_failures: int = 0) -> Tally:
    """Hypothesis looks for an input the network gets wrong and shrinks it to a minimal one (`counterexample`,
    and in `kept` when confirmed and `max_failures` > 0). `checked` counts every input run, shrinking steps
    included; the same seed gives the same run."""
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import HypothesisDeprecationWarning, NoSuchExample

    task = task_of(network)
    max_examples = int(max_examples)
    if max_examples < 1:
        raise ParameterError(f"max_examples must be at least 1, got {max_examples}")
    max_failures = check_int("max_failures", max_failures, 0)
    start = time.perf_counter()
    checked = failures = 0

    def fails(tokens: np.ndarray) -> bool:
        nonlocal checked, failures
        checked += 1
        try:
            wrong = bool(wrong_rows(network, tokens[None, :], arith)[0])
        except OverflowInFormat:
            wrong = True
        failures += wrong
        return wrong

    search = settings(max_examples=max_examples, database=None, deadline=None, derandomize=False,
                      phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
    counterexample, kept = None, ()
    try:
        with warnings.catch_warnings():
            # `find` with a seeded random.Random is what makes this search replayable from `seed`; Hypothesis
            # warns about a Random in strategies in general, and would print that into every search's output
            warnings.simplefilter("ignore", HypothesisDeprecationWarning)
            minimal = find(one_input(task), fails, settings=search, random=random.Random(seed))
    except NoSuchExample:
        pass
    else:
        counterexample = counterexample_for(network, minimal, arith)
        confirmed = confirm_failure(network, minimal, arith) if max_failures else None
        kept = () if confirmed is None else (confirmed,)
    return Tally("hypothesis", arith, False, checked, failures, counterexample, kept, None,
                 {"seed": seed, "max_examples": max_examples}, time.perf_counter() - start)


def sampled(network: Network, count: int, seed: int, arith: Arithmetic = FLOAT64) -> Result:
    """`count` seeded random inputs. UNKNOWN when none fails: a sample is not a proof."""
    return sampled_tally(network, count, seed, arith).result()


def exhaustive(network: Network, arith: Arithmetic = FLOAT64, limit: int = 10**7) -> Result:
    """Every input of the network's task family (refused above `limit` inputs)."""
    return exhaustive_tally(network, arith, limit).result()


def hypothesis_search(network: Network, arith: Arithmetic = FLOAT64, max_examples: int = DEFAULT_MAX_EXAMPLES,
                      seed: int = 0) -> Result:
    """FALSIFIED with Hypothesis's minimal failing input as the counterexample, or UNKNOWN (never VERIFIED) after
    `max_examples` generated inputs."""
    return hypothesis_tally(network, arith, max_examples, seed).result()
