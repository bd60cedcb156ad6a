"""The probes a search runs on one network, and the `searched` record of what it tried (docs/conventions.md §6).

`search_network(network, arith, **effort)` is the one search: it runs

* the generic checks of `verify.check`, on every task: every input when the family has at most `exhaustive_limit`
  of them; else seeded uniform samples and, beside them at the same number of inputs, the margin descent and
  Hypothesis steered by the margin; then a Hypothesis search that shrinks a failure to a minimal input;
* the task's own probes: the entries of `PROBES` that its record names (`witness.tasks.record_of(task).probes`),
  in that order -- composition's boundary and counting-targeted pairs (`verify.search.pairs`), 2-Sum's summary
  collisions (`verify.search.collisions`);

and returns a `SearchReport`: the failures the checks kept (each confirmed by a fresh run, each input once, at most
`max_failures`), the pairs the probes confirmed (`verify.search.report.confirm_pair`), and `searched`: one record
per probe (`method`, `inputs` run, `failing` inputs among them for a check, `seconds`, its settings), the totals,
and what a probe adds beside its record (composition's `counting`). A probe that finds nothing has searched, not
proved: its record is the "none found in N inputs".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from verify import check
from verify.defaults import PAIR_PREFIXES, SEARCH_SAMPLES
from verify.result import Result
from verify.search import collisions, pairs
from verify.search.report import DEFAULT_MAX_PAIRS, Pair, SearchReport
from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.ir import Network
from witness.tasks import record_of

#: Default effort of a search: sampled inputs (SEARCH_SAMPLES is defined in verify.defaults, which the command line
#: reads without this module), Hypothesis examples, the largest family run whole, failures kept; for composition's
#: pairs the suffixes fixed and the random prefixes run under each; for 2-Sum's summary collisions the attempts.
SAMPLES = SEARCH_SAMPLES
HYPOTHESIS_EXAMPLES = 100
EXHAUSTIVE_LIMIT = 20_000
DEFAULT_MAX_FAILURES = 5
PAIR_SUFFIXES = 4
COLLISION_ATTEMPTS = 4


@dataclass(frozen=True)
class Effort:
    """How hard a search tries. Every check reads `seed`, `max_failures` and its own count (`samples`,
    `hypothesis_examples`, `exhaustive_limit`); every pair probe `seed` and `max_pairs`; `boundary` (None: the
    layout's own), `pair_suffixes` and `pair_prefixes` are composition's, `collision_attempts` 2-Sum's."""

    seed: int = 0
    samples: int = SAMPLES
    hypothesis_examples: int = HYPOTHESIS_EXAMPLES
    exhaustive_limit: int = EXHAUSTIVE_LIMIT
    max_failures: int = DEFAULT_MAX_FAILURES
    max_pairs: int = DEFAULT_MAX_PAIRS
    boundary: int | None = None
    pair_suffixes: int = PAIR_SUFFIXES
    pair_prefixes: int = PAIR_PREFIXES
    collision_attempts: int = COLLISION_ATTEMPTS


@dataclass(frozen=True)
class Found:
    """What one task probe found: `pairs`, each confirmed by `confirm_pair`; one `records` entry per search it ran
    (or one saying why it skipped); `searched`: entries for the report's `searched` beside the records."""

    pairs: tuple[Pair, ...] = ()
    records: tuple[dict[str, Any], ...] = ()
    searched: dict[str, Any] = field(default_factory=dict)


def skipped(method: str, reason: str) -> Found:
    return Found(records=({"method": method, "inputs": 0, "seconds": 0.0, "skipped": reason},))


def boundary_probe(network: Network, arith: Arithmetic, effort: Effort) -> Found:
    """Indistinguishable pairs across the layout boundary (`pairs.boundary_pairs`), where the prompt has one."""
    if effort.boundary is None and not pairs.has_default_boundary(network.task):
        return skipped("boundary_pairs", f"no layout boundary for {network.task}")
    found, record = pairs.boundary_pairs(network, arith, effort.boundary, effort.pair_suffixes, effort.pair_prefixes,
                                         effort.seed, effort.max_pairs)
    return Found(tuple(found), (record,))


def targeted_probe(network: Network, arith: Arithmetic, effort: Effort) -> Found:
    """Where counting says pairs must exist (`pairs.counting`, always reported), look for them by walking two
    crossings together (`pairs.targeted_pairs`) at the boundary search's budget of inputs; each pair found is
    marked as one counting forced."""
    counted = pairs.counting(network.task, network.budget(arith.bits).state_bits)
    if not (counted["forced"] and effort.boundary is None and pairs.has_default_boundary(network.task)):
        return Found(searched={"counting": counted})
    found, record = pairs.targeted_pairs(network, arith, effort.pair_suffixes * effort.pair_prefixes, effort.seed,
                                         max_pairs=effort.max_pairs)
    return Found(tuple(found), ({**record, "forced_by_counting": True},), {"counting": counted})


def collision_probe(network: Network, arith: Arithmetic, effort: Effort) -> Found:
    """Summary-collision pairs of a block-sparse layer (`collisions.collision_pairs`), where the network has one
    that drops some block."""
    try:
        collisions.sparse_layer(network)
    except ParameterError as exc:
        return skipped("summary_collisions", str(exc))
    found, record = collisions.collision_pairs(network, arith, attempts=effort.collision_attempts, seed=effort.seed,
                                               max_pairs=effort.max_pairs)
    return Found(tuple(found), (record,))


#: The task probes a task's record may name (`TaskRecord.probes`), by the `method` of the records they write.
PROBES: dict[str, Callable[[Network, Arithmetic, Effort], Found]] = {
    "boundary_pairs": boundary_probe,
    "targeted_pairs": targeted_probe,
    "summary_collisions": collision_probe,
}


def record(result: Result, seconds: float, **extra: Any) -> dict[str, Any]:
    """A check's entry in `searched`: its method, inputs run, failing inputs, seconds and settings (its detail but
    `rests_on`: what a theory run rests on is the report's semantics, said once), then `extra`."""
    settings = {key: value for key, value in result.detail.items() if key != "rests_on"}
    return {"method": result.method, "inputs": result.checked, "failing": result.failures,
            "seconds": round(seconds, 3), **settings, **extra}


def timed(run: Callable[[], Result], **extra: Any) -> tuple[Result, dict[str, Any]]:
    """Run one check: its Result and its `searched` record (the seconds are the call's, so a verdict stays free of
    timings and two runs of one check compare equal)."""
    start = time.perf_counter()
    result = run()
    return result, record(result, time.perf_counter() - start, **extra)


def generic_checks(network: Network, arith: Arithmetic, effort: Effort) -> list[tuple[Result, dict[str, Any]]]:
    """The checks every task gets (module docstring), run past overflows: a search counts every failing input."""
    family = check.task_of(network).count()
    keep = effort.max_failures
    if family <= effort.exhaustive_limit:
        runs = [(partial(check.exhaustive, network, arith, effort.exhaustive_limit, stop_at_overflow=False,
                         max_failures=keep), {"family_size": family})]
    else:  # uniform samples, and the margin-guided checks at the same number of inputs beside them
        runs = [(partial(check.sampled, network, effort.samples, effort.seed, arith, stop_at_overflow=False,
                         max_failures=keep), {}),
                (partial(check.margin_search, network, arith, effort.samples, effort.seed, max_failures=keep), {}),
                (partial(check.hypothesis_margin, network, arith, effort.hypothesis_examples, effort.seed,
                         max_failures=keep), {})]
    # Hypothesis keeps its one shrunk failure: the smallest input a search reports
    runs.append((partial(check.hypothesis_search, network, arith, effort.hypothesis_examples, effort.seed,
                         max_failures=1), {}))
    return [timed(run, **extra) for run, extra in runs]


def search_network(network: Network, arith: Arithmetic, *, save_network: str | None = None,
                   budget: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
                   **effort: Any) -> SearchReport:
    """Every probe on one network (module docstring); `effort`: the fields of `Effort`; `budget`: the report's
    budget table (default the network's at arith's p); `extra` goes into `searched` (the architecture, where the
    weights came from). With `save_network` the network is written to that file, so each finding replays with
    `witness run FILE --tokens ... --format FMT --semantics SEM`."""
    effort = Effort(**effort)
    task = check.task_of(network)
    names = record_of(task).probes
    unknown = [name for name in names if name not in PROBES]
    if unknown:
        raise ParameterError(f"task {task.name} names probes {unknown}, which verify.search.probes.PROBES lacks")
    checks = generic_checks(network, arith, effort)
    failures = list({tuple(f.tokens): f for result, _ in checks for f in result.kept}.values())  # each input once
    records = [entry for _, entry in checks]
    found_pairs: list[Pair] = []
    beside: dict[str, Any] = {}
    for name in names:
        found = PROBES[name](network, arith, effort)
        # a later probe does not report again a pair an earlier one did (a probe's own pairs are each its finding)
        known = {(tuple(pair.a), tuple(pair.b)) for pair in found_pairs}
        found_pairs += [pair for pair in found.pairs if (tuple(pair.a), tuple(pair.b)) not in known]
        records += found.records
        beside.update(found.searched)
    if save_network is not None:
        network.save(save_network)
    searched = {**searched_summary(records), **(extra or {}), **beside}
    budget = network.budget(arith.bits).as_dict() if budget is None else budget
    return SearchReport(save_network, arith.format_name, arith.semantics, budget, failures[:effort.max_failures],
                        found_pairs, searched)


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


__all__ = ["PROBES", "Effort", "Found", "search_network", "generic_checks", "record", "timed", "searched_summary",
           "failing_and_tried", "DEFAULT_MAX_FAILURES"]
