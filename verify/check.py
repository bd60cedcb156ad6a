"""Checking a network against its task by running it: on every input (exhaustive), on seeded random samples, or
by a Hypothesis search that shrinks a failure to a minimal failing input.

Only `exhaustive` can return VERIFIED; a sample or a search that finds no failure is UNKNOWN, with the count checked.
An input on which a fixed-point run overflows is a failure: the network does not answer it in that format.

Under `theory` semantics the executor stands in float64 for the exact arithmetic inside each block, so a verdict
from running is about those runs: every such Result says so in `detail["rests_on"]` (a proof under exact
arithmetic inside the block comes from `verify.certify`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from verify.result import Counterexample, Result, Status
from witness.progress import bar
from witness import strategies
from witness.arith import FLOAT64, Arithmetic
from witness.errors import OverflowInFormat, ParameterError
from witness.execute import run
from witness.ir import Network

#: Inputs per executor call: keeps (batch x prompt x d_model) floats near this many.
BATCH_ELEMENTS = 1 << 22
#: Inputs a Hypothesis search generates unless told otherwise.
DEFAULT_MAX_EXAMPLES = 200
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


def check_batches(network: Network, batches: Iterable[np.ndarray], arith: Arithmetic, method: str,
                  complete: bool, total: int | None = None, detail: dict | None = None) -> Result:
    """Run every batch; the first wrong input becomes the counterexample. `complete`: the batches are all inputs.

    An overflow ends the check: the overflowing input is a failure, and `checked` counts the inputs run so far.
    """
    checked = failures = 0
    counterexample = None
    detail = dict(detail or {})
    with bar(total=total, desc=method, unit="input") as progress:
        for batch in batches:
            wrong, overflow = wrong_rows_until_overflow(network, batch, arith)
            if overflow is not None:
                detail["stopped_by_overflow"] = overflow
            if wrong.any() and counterexample is None:
                counterexample = counterexample_for(network, batch[int(np.argmax(wrong))], arith)
            checked += wrong.size
            failures += int(wrong.sum())
            progress.update(wrong.size)
            if "stopped_by_overflow" in detail:
                break
    if failures:
        status = Status.FALSIFIED
    else:
        status = Status.VERIFIED if complete else Status.UNKNOWN
    return Result(status, method, arith.describe(), checked, failures, counterexample, rests_on(arith, detail))


def counterexample_for(network: Network, tokens: np.ndarray, arith: Arithmetic) -> Counterexample:
    """Re-run one input with a trace; the trace keeps each layer's residual stream at the read positions.

    When the run overflows, the output is the overflow message and there is no trace.
    """
    task = task_of(network)
    tokens = [int(t) for t in tokens]
    expected = task.answers(tokens).reshape(1, -1)[0].tolist()
    if network.readout.read == "last":
        expected = expected[0]
    try:
        outputs = run(network, np.array(tokens), arith, trace=True)
    except OverflowInFormat as exc:
        return Counterexample(tokens, expected, f"overflow: {exc}", {})
    read = list(outputs.read_positions)
    trace = {name: value[0][read].tolist() for name, value in outputs.trace.items() if "resid" in name}
    output = outputs.predictions[0].tolist()
    if network.readout.read == "last":
        output = output[0]
    return Counterexample(tokens, expected, output, trace)


def sampled(network: Network, count: int, seed: int, arith: Arithmetic = FLOAT64) -> Result:
    """`count` seeded random inputs. UNKNOWN when none fails: a sample is not a proof."""
    task = task_of(network)
    size = batch_size(network)
    rng = np.random.default_rng(seed)
    batches = (task.random_tokens(rng, min(size, count - start)) for start in range(0, count, size))
    return check_batches(network, batches, arith, "sampled", complete=False, total=count, detail={"seed": seed})


def exhaustive(network: Network, arith: Arithmetic = FLOAT64, limit: int = 10**7) -> Result:
    """Every input of the network's task family (refused above `limit` inputs)."""
    task = task_of(network)
    batches = task.enumerate_tokens(batch_size(network), limit)
    return check_batches(network, batches, arith, "exhaustive", complete=True, total=task.count())


def _one_input(task):
    """One valid input of `task`, drawn position by position (witness.strategies) so it shrinks token by token."""
    batches = {"composition": strategies.composition_tokens, "two_sum": strategies.two_sum_tokens}[task.name]
    return batches(task, max_batch=1).map(lambda batch: batch[0])


def hypothesis_search(network: Network, arith: Arithmetic = FLOAT64, max_examples: int = DEFAULT_MAX_EXAMPLES,
                      seed: int = 0) -> Result:
    """Hypothesis looks for an input the network gets wrong and shrinks it to a minimal one.

    FALSIFIED with that minimal input as the counterexample, or UNKNOWN (never VERIFIED) after `max_examples`
    generated inputs. `checked` counts every input run, shrinking steps included; the same seed gives the same run.
    """
    task = task_of(network)
    max_examples = int(max_examples)
    if max_examples < 1:
        raise ParameterError(f"max_examples must be at least 1, got {max_examples}")
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
    detail = rests_on(arith, {"seed": seed, "max_examples": max_examples})
    try:
        minimal = find(_one_input(task), fails, settings=search, random=random.Random(seed))
    except NoSuchExample:
        return Result(Status.UNKNOWN, "hypothesis", arith.describe(), checked, 0, None, detail)
    return Result(Status.FALSIFIED, "hypothesis", arith.describe(), checked, failures,
                  counterexample_for(network, minimal, arith), detail)
