"""The checks that run a stream of inputs: every input of a small family (`exhaustive`, in this process or in
chunks on a `lab.sweep.Engine`), seeded random inputs (`sampled`), and Hypothesis (`hypothesis_search`).

The first two are one loop, `check_batches`, over a different stream of batches; Hypothesis chooses its inputs one
at a time. All three return a `Result`, and keep the first `max_failures` failures the fresh-run gate confirms.
An input on which a fixed-point run overflows is a failure: the network does not answer it in that format. A
verdict stops there (`stop_at_overflow`, the default); a search runs on past it and counts every failing input.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterable
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np

from verify.check.runs import Findings, batch_size, task_of, verdict, wrong_rows, wrong_rows_until_overflow
from verify.defaults import DEFAULT_MAX_EXAMPLES
from verify.result import Result
from witness.arith import FLOAT64, Arithmetic
from witness.errors import OverflowInFormat, ParameterError
from witness.ir import Network
from witness.progress import bar
from witness.tasks import record_of
from witness.tasks.base import check_int

if TYPE_CHECKING:
    from lab.sweep import Engine

#: Largest family `exhaustive` enumerates unless told otherwise (a search sets its own, smaller limit).
ENUMERATION_LIMIT = 10**7
#: Jobs a chunked exhaustive check makes unless told otherwise: enough to keep a few workers busy, few enough that
#: each job does real work.
DEFAULT_CHUNKS = 16


def check_batches(network: Network, batches: Iterable[np.ndarray], arith: Arithmetic, method: str, *,
                  family_size: int | None = None, total: int | None = None, detail: dict[str, Any] | None = None,
                  stop_at_overflow: bool = True, max_failures: int = 0) -> Result:
    """Run every batch and judge every input (`Findings`). `family_size`: the batches are the whole family, which
    has that many inputs (the only way to VERIFIED); `total`: inputs expected, for the progress bar.

    An overflow ends the run when `stop_at_overflow` (`checked` then counts the inputs up to and including the
    overflowing one); otherwise the rest of its batch, and every later batch, still run.
    """
    findings = Findings(network, arith, max_failures)
    checked, stopped = 0, None
    with bar(total=total, desc=method, unit="input") as progress:
        for batch in batches:
            while batch.shape[0] and stopped is None:
                wrong, overflow = wrong_rows_until_overflow(network, batch, arith)
                findings.add(batch[np.flatnonzero(wrong)])
                checked += wrong.size
                progress.update(wrong.size)
                batch = batch[wrong.size:]
                if stop_at_overflow:
                    stopped = overflow
            if stopped is not None:
                break
    return findings.result(method, checked, family_size=family_size, detail=detail, stopped_by_overflow=stopped)


def exhaustive(network: Network, arith: Arithmetic = FLOAT64, limit: int = ENUMERATION_LIMIT, *,
               engine: Engine | None = None, chunks: int | None = None, stop_at_overflow: bool = True,
               max_failures: int = 0) -> Result:
    """Every input of the network's task family, in enumeration order (refused above `limit` inputs): VERIFIED
    when every one is answered. With `engine`, the enumeration is cut into `chunks` (default DEFAULT_CHUNKS) runs
    of consecutive batches, each a job of a `lab.sweep` (in-process, a local cluster or an existing scheduler), and
    joined into the Result this process would give (plus `detail["chunks"]`; an overflow's message then locates
    the value in its chunk's batch)."""
    task = task_of(network)
    if engine is None:
        if chunks is not None:
            raise ParameterError("chunks go with an engine: the enumeration is cut into jobs only to run them there")
        return check_batches(network, task.enumerate_tokens(batch_size(network), limit), arith, "exhaustive",
                             family_size=task.count(), total=task.count(), stop_at_overflow=stop_at_overflow,
                             max_failures=max_failures)
    chunks = DEFAULT_CHUNKS if chunks is None else chunks
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ParameterError(f"chunks must be a positive integer, got {chunks!r}")
    max_failures = check_int("max_failures", max_failures, 0)  # here, not in a job on a worker
    from lab.sweep import sweep  # dask: imported only where a sweep runs

    count = task.count()
    next(iter(task.enumerate_tokens(1, limit)))  # refuses a family over the limit, with the task's own message
    size = min(batch_size(network), -(-count // chunks))  # small enough that every chunk gets a batch
    batches = -(-count // size)
    edges = [batches * i // chunks for i in range(chunks + 1)]
    jobs = [(network, arith, size, first, stop, limit, stop_at_overflow, max_failures)
            for first, stop in zip(edges, edges[1:]) if stop > first]
    return _joined(sweep(_chunk, jobs, engine), arith, count, max_failures, {"chunks": len(jobs)})


def _chunk(job: tuple) -> Result:
    """Batches [first, stop) of `size` inputs of the family's enumeration, run as the serial check runs them (a
    module-level function: a sweep's workers import it)."""
    network, arith, size, first, stop, limit, stop_at_overflow, max_failures = job
    batches = islice(network.task.enumerate_tokens(size, limit), first, stop)
    return check_batches(network, batches, arith, "exhaustive", stop_at_overflow=stop_at_overflow,
                         max_failures=max_failures)


def _joined(parts: list[Result], arith: Arithmetic, family_size: int, max_failures: int,
            detail: dict[str, Any]) -> Result:
    """Consecutive chunks of one enumeration as the serial run: counts summed up to and including the first chunk
    that stopped at an overflow (the serial check never reaches the chunks after it), the first chunk's
    counterexample, the first kept failures."""
    checked = failures = 0
    counterexample = stopped = None
    kept = []
    for part in parts:
        checked, failures = checked + part.checked, failures + part.failures
        counterexample = counterexample or part.counterexample
        kept += part.kept
        stopped = part.detail.get("stopped_by_overflow")
        if stopped is not None:
            break
    return verdict("exhaustive", arith, checked, failures, counterexample, kept[:max_failures],
                   family_size=family_size, detail=detail, stopped_by_overflow=stopped)


def sampled(network: Network, count: int, seed: int, arith: Arithmetic = FLOAT64, *, stop_at_overflow: bool = True,
            max_failures: int = 0) -> Result:
    """`count` uniformly random inputs of the network's task, drawn from `seed` (the same seed, the same inputs).
    UNKNOWN when none fails: a sample is not a proof."""
    task = task_of(network)
    count, seed = check_int("count", count, 1), check_int("seed", seed, 0)
    size = batch_size(network)
    rng = np.random.default_rng(seed)
    batches = (task.random_tokens(rng, min(size, count - begin)) for begin in range(0, count, size))
    return check_batches(network, batches, arith, "sampled", total=count, detail={"seed": seed},
                         stop_at_overflow=stop_at_overflow, max_failures=max_failures)


def one_input(task):
    """A Hypothesis strategy for one valid input of `task`: its record's token strategy, which shrinks token by
    token (Hypothesis is imported by the strategy, where a search runs, not by every command that samples)."""
    return record_of(task).tokens_strategy(task, max_batch=1).map(lambda batch: batch[0])


def hypothesis_search(network: Network, arith: Arithmetic = FLOAT64, max_examples: int = DEFAULT_MAX_EXAMPLES,
                      seed: int = 0, *, max_failures: int = 0) -> Result:
    """Hypothesis looks for an input the network gets wrong and shrinks it to a minimal one: FALSIFIED with it as
    the counterexample (and in `kept` when confirmed and `max_failures` > 0), or UNKNOWN (never VERIFIED) after
    `max_examples` generated inputs. `checked` counts every input run, shrinking steps included, and `failures`
    every failing run among them; the same seed gives the same run."""
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import HypothesisDeprecationWarning, NoSuchExample

    task = task_of(network)
    max_examples = int(max_examples)
    if max_examples < 1:
        raise ParameterError(f"max_examples must be at least 1, got {max_examples}")
    findings = Findings(network, arith, max_failures)
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
    try:
        with warnings.catch_warnings():
            # `find` with a seeded random.Random is what makes this search replayable from `seed`; Hypothesis
            # warns about a Random in strategies in general, and would print that into every search's output
            warnings.simplefilter("ignore", HypothesisDeprecationWarning)
            minimal = find(one_input(task), fails, settings=search, random=random.Random(seed))
    except NoSuchExample:
        pass
    else:
        findings.add([minimal])  # the shrunk input is the one shown and kept, not the first failure met
    return verdict("hypothesis", arith, checked, failures, findings.counterexample, findings.kept,
                   detail={"seed": seed, "max_examples": max_examples})
