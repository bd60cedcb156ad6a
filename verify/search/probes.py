"""Generic probes (docs/conventions.md §6): look for inputs that any IR network with a task answers wrongly.

Each probe returns a `Probe`: the failures it found, every one re-run through `verify.search.report.confirm_failure`
(so each is replayable with `witness run`), and a `searched` record saying what was tried, on how many inputs and
for how long. A probe that finds nothing has searched, not proved: its record is the "none found in N inputs".

    sampled(network, arith, count=10_000, seed=0)   seeded random inputs of the network's task
    exhaustive(network, arith)                       every input of a small family
    hypothesis(network, arith, max_examples=200)     Hypothesis search, the failure shrunk to a minimal input
    probe_batches(network, batches, arith, ...)      any stream of token batches (targeted inputs of other probes)

For a network right on nearly every input, `verify.search.margin` has probes that walk the logit margin down to
its failures (same `Probe`, inputs counted in the unit of `sampled`'s count):

    margin_search(network, arith, runs, seed=0)             greedy descent by single-token edits, restarted
    hypothesis_margin(network, arith, max_examples, seed)   Hypothesis targeted at small margins

The batching, overflow handling and Hypothesis machinery are `verify.check`'s; this module only keeps more than one
failure and turns them into confirmed `Counterexample`s.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verify import check
from verify.result import Counterexample
from verify.search.report import confirm_failure
from witness.progress import bar
from witness.arith import Arithmetic
from witness.ir import Network
from witness.tasks.base import check_int

#: Failures a probe keeps (it still counts every failing input it runs).
DEFAULT_MAX_FAILURES = 5


@dataclass(frozen=True)
class Probe:
    """What one probe found: confirmed `failures` (at most its `max_failures`) and its `searched` record: `method`,
    `inputs` run, `failing` inputs among them, `seconds`, plus the method's own settings (seed, ...)."""

    failures: tuple[Counterexample, ...]
    searched: dict[str, Any] = field(default_factory=dict)


def probe_batches(network: Network, batches: Iterable[np.ndarray], arith: Arithmetic, method: str,
                  total: int | None = None, max_failures: int = DEFAULT_MAX_FAILURES,
                  detail: dict[str, Any] | None = None) -> Probe:
    """Run every batch, keep the first `max_failures` failing inputs (each confirmed by a fresh run).

    An input whose run overflows a fixed-point format is a failure (it is not answered); the rest of its batch is
    still run."""
    max_failures = check_int("max_failures", max_failures, 0)
    start = time.perf_counter()
    inputs = failing = 0
    failures: list[Counterexample] = []
    with bar(total=total, desc=method, unit="input") as progress:
        for batch in batches:
            while batch.shape[0]:
                wrong, _ = check.wrong_rows_until_overflow(network, batch, arith)
                for row in np.flatnonzero(wrong)[:max(0, max_failures - len(failures))]:
                    confirmed = confirm_failure(network, batch[row], arith)
                    if confirmed is not None:
                        failures.append(confirmed)
                inputs += wrong.size
                failing += int(wrong.sum())
                progress.update(wrong.size)
                batch = batch[wrong.size:]
    searched = {"method": method, "inputs": inputs, "failing": failing,
                "seconds": round(time.perf_counter() - start, 3), **(detail or {})}
    return Probe(tuple(failures), searched)


def sampled(network: Network, arith: Arithmetic, count: int = 10_000, seed: int = 0,
            max_failures: int = DEFAULT_MAX_FAILURES) -> Probe:
    """`count` uniformly random inputs of the network's task, drawn from `seed`."""
    task, count = check.task_of(network), check_int("count", count, 1)
    size = check.batch_size(network)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    batches = (task.random_tokens(rng, min(size, count - begin)) for begin in range(0, count, size))
    return probe_batches(network, batches, arith, "sampled", count, max_failures, {"seed": seed})


def exhaustive(network: Network, arith: Arithmetic, limit: int = 10**6,
               max_failures: int = DEFAULT_MAX_FAILURES) -> Probe:
    """Every input of the network's task family; refused (ParameterError) when there are more than `limit`."""
    task = check.task_of(network)
    batches = task.enumerate_tokens(check.batch_size(network), limit)
    return probe_batches(network, batches, arith, "exhaustive", task.count(), max_failures,
                         {"family_size": task.count()})


def hypothesis(network: Network, arith: Arithmetic, max_examples: int = check.DEFAULT_MAX_EXAMPLES,
               seed: int = 0) -> Probe:
    """`verify.check.hypothesis_search`: at most one failure, shrunk to a minimal failing input."""
    start = time.perf_counter()
    result = check.hypothesis_search(network, arith, max_examples, seed)
    failures = ()
    if result.counterexample is not None:
        confirmed = confirm_failure(network, result.counterexample.tokens, arith)
        failures = () if confirmed is None else (confirmed,)
    searched = {"method": "hypothesis", "inputs": result.checked, "failing": result.failures,
                "seconds": round(time.perf_counter() - start, 3), "seed": seed, "max_examples": max_examples}
    return Probe(failures, searched)


def failing_and_tried(searched: dict[str, Any]) -> tuple[int, int]:
    """Failing inputs and inputs run, over every probe of a `searched` summary that runs inputs one by one (a pair
    search's inputs are counted apart: a pair is a finding about two inputs, not a failing input)."""
    records = [record for record in searched.get("probes", []) if "failing" in record]
    return sum(record["failing"] for record in records), sum(record["inputs"] for record in records)


def searched_summary(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The `searched` object of a report: each probe's record, and the inputs and seconds over all of them."""
    records = list(records)
    return {"probes": records, "inputs": sum(r["inputs"] for r in records),
            "seconds": round(sum(r["seconds"] for r in records), 3)}


__all__ = ["Probe", "probe_batches", "sampled", "exhaustive", "hypothesis", "searched_summary", "failing_and_tried", "DEFAULT_MAX_FAILURES"]
