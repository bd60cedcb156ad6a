"""Generic probes (docs/conventions.md §6): look for inputs that any IR network with a task answers wrongly.

Each probe returns a `Probe`: the failures it found, every one re-run through `verify.check.confirm_failure`
(so each is replayable with `witness run`), and a `searched` record saying what was tried, on how many inputs and
for how long. A probe that finds nothing has searched, not proved: its record is the "none found in N inputs".

    sampled(network, arith, count=10_000, seed=0)   seeded random inputs of the network's task
    exhaustive(network, arith)                       every input of a small family
    hypothesis(network, arith, max_examples=200)     Hypothesis search, the failure shrunk to a minimal input

For a network right on nearly every input, `verify.search.margin` has probes that walk the logit margin down to
its failures (same `Probe`, inputs counted in the unit of `sampled`'s count):

    margin_search(network, arith, runs, seed=0)             greedy descent by single-token edits, restarted
    hypothesis_margin(network, arith, max_examples, seed)   Hypothesis targeted at small margins

The first three are `verify.check`'s own runs (the ones the verifier's verdicts come from, on the same inputs for
the same seed), read as a search record: `Probe.of` a `verify.check.Tally`. Unlike a verdict, a probe does not
stop at an input whose run overflows a fixed-point format: that input is a failure, and the rest are still run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from verify import check
from verify.result import Counterexample
from witness.arith import Arithmetic
from witness.ir import Network

#: Failures a probe keeps (it still counts every failing input it runs).
DEFAULT_MAX_FAILURES = 5


@dataclass(frozen=True)
class Probe:
    """What one probe found: confirmed `failures` (at most its `max_failures`) and its `searched` record: `method`,
    `inputs` run, `failing` inputs among them, `seconds`, plus the method's own settings (seed, ...)."""

    failures: tuple[Counterexample, ...]
    searched: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, tally: check.Tally, **settings: Any) -> Probe:
        """The search record of a check run: its kept failures, counts and settings (plus `settings`)."""
        searched = {"method": tally.method, "inputs": tally.checked, "failing": tally.failures,
                    "seconds": round(tally.seconds, 3), **tally.settings, **settings}
        return cls(tally.kept, searched)


def sampled(network: Network, arith: Arithmetic, count: int = 10_000, seed: int = 0,
            max_failures: int = DEFAULT_MAX_FAILURES) -> Probe:
    """`count` uniformly random inputs of the network's task, drawn from `seed`."""
    return Probe.of(check.sampled_tally(network, count, seed, arith, stop_at_overflow=False,
                                        max_failures=max_failures))


def exhaustive(network: Network, arith: Arithmetic, limit: int = 10**6,
               max_failures: int = DEFAULT_MAX_FAILURES) -> Probe:
    """Every input of the network's task family; refused (ParameterError) when there are more than `limit`."""
    tally = check.exhaustive_tally(network, arith, limit, stop_at_overflow=False, max_failures=max_failures)
    return Probe.of(tally, family_size=check.task_of(network).count())


def hypothesis(network: Network, arith: Arithmetic, max_examples: int = check.DEFAULT_MAX_EXAMPLES,
               seed: int = 0) -> Probe:
    """`verify.check.hypothesis_tally`: at most one failure, shrunk to a minimal failing input."""
    return Probe.of(check.hypothesis_tally(network, arith, max_examples, seed, max_failures=1))


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


__all__ = ["Probe", "sampled", "exhaustive", "hypothesis", "searched_summary", "failing_and_tried",
           "DEFAULT_MAX_FAILURES"]
