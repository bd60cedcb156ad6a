"""Checking a network against its task by running it (docs/conventions.md §5). Every check returns a
`verify.result.Result`:

    exhaustive(network, arith, limit, engine=None, chunks=None)  every input of a small family, in enumeration
                                                    order; with a `lab.sweep.Engine`, in chunks run as its jobs
    sampled(network, count, seed, arith)            `count` seeded random inputs
    hypothesis_search(network, arith, max_examples, seed)   Hypothesis, the failure shrunk to a minimal input
    margin_search(network, arith, runs, seed)       greedy descent on the logit margin (`margin`)
    hypothesis_margin(network, arith, max_examples, seed)   Hypothesis steered towards small margins

Only `exhaustive` can return VERIFIED, and only when as many inputs ran as the family has, each answered; a check
of some inputs that finds no failure is UNKNOWN, with the count checked. Each takes `max_failures`: how many of
its failures to confirm by a fresh run (`confirm_failure`) and keep in `Result.kept`, the replayable failures a
search reports (`verify.search.probes`). The batch checks stop at the first input whose fixed-point run overflows
unless `stop_at_overflow=False`, as a search asks.

`runs` has what they share (judging a batch, the counterexample's traced re-run, the fresh-run gate, the verdict);
`checks` the exhaustive, sampled and Hypothesis checks over one batch loop; `margin_guided` the margin-guided ones.
"""

from verify.check.checks import DEFAULT_CHUNKS, ENUMERATION_LIMIT, check_batches, exhaustive, hypothesis_search, sampled
from verify.check.margin_guided import hypothesis_margin, margin, margin_search, single_token_edits
from verify.check.runs import (THEORY_RUNS, Findings, batch_size, confirm_failure, counterexample_for, task_of,
                               verdict, wrong_rows)
from verify.defaults import DEFAULT_MAX_EXAMPLES

__all__ = ["exhaustive", "sampled", "hypothesis_search", "margin_search", "hypothesis_margin", "margin",
           "single_token_edits", "check_batches", "Findings", "verdict", "confirm_failure", "counterexample_for",
           "task_of", "batch_size", "wrong_rows", "THEORY_RUNS", "DEFAULT_CHUNKS", "ENUMERATION_LIMIT",
           "DEFAULT_MAX_EXAMPLES"]
