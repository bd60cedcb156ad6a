"""Checks that follow the logit margin down to the inputs a nearly right network answers wrongly.

A network right on 99.6% of its inputs shows uniform sampling one failure in 250 draws. The margin -- the right
answer's logit minus the best other logit -- says how nearly an input fails, so a check can walk down it: inputs
next to a low-margin input tend to have low margins too, and the failures lie where it crosses zero.

    margin(network, tokens, arith)                          per input: right logit minus best other (<= 0: wrong)
    margin_search(network, arith, runs, seed=0)             seeded greedy descent by single-token edits, restarted
    hypothesis_margin(network, arith, max_examples, seed)   Hypothesis targeted at driving the margin down

Both checks return a `Result` (never VERIFIED) whose `checked` counts every input they ran, in the unit of
`sampled`'s count, so "failures / checked" compares with uniform sampling at the same budget; `failures` counts
distinct failing inputs, since a walk near its failures meets them more than once. Every failure they keep passed
the fresh-run gate (`runs.Findings`), so a wrong margin can lose a failure, never invent one.
"""

from __future__ import annotations

import sys

import numpy as np

from verify.check.checks import one_input
from verify.check.runs import Findings, batch_size, first_overflowing_row, task_of
from verify.defaults import DEFAULT_MAX_EXAMPLES
from verify.result import Result
from witness.arith import Arithmetic
from witness.errors import OverflowInFormat, ParameterError
from witness.execute import logit_margins, run
from witness.generate import generated_count
from witness.ir import Network
from witness.progress import bar
from witness.tasks.base import check_int

#: Descents `margin_search` runs side by side: their candidates share one executor run.
DEFAULT_CHAINS = 32
#: Single-token edits of its current input a descent tries per step.
DEFAULT_EDITS = 16


def margin(network: Network, tokens, arith: Arithmetic) -> np.ndarray:
    """The margin of each input of `tokens` (one sequence or a batch) under `arith`: `logit_margins` of the
    executor's logits. An input whose run overflows a fixed-point format is not answered: -inf. Rows are run in
    batches of `batch_size`, and an overflow costs only its own row (the rows after it are run again)."""
    task = task_of(network)
    if generated_count(network):
        raise ParameterError(f"a margin is of one run's logits; a network of task {task.name} answers by the tokens "
                             "it generates, which the exhaustive, sampled and Hypothesis checks judge")
    batch = task.check_tokens(tokens)
    answers = task.answers(batch).reshape(batch.shape[0], -1)
    margins = np.full(batch.shape[0], -np.inf)
    size = batch_size(network)
    begin = 0
    while begin < batch.shape[0]:
        logits, overflowed = _logits_until_overflow(network, batch[begin:begin + size], arith)
        done = 0 if logits is None else logits.shape[0]
        if done:
            margins[begin:begin + done] = logit_margins(logits, answers[begin:begin + done])
        begin += done + overflowed  # the overflowing row keeps its -inf
    return margins


def _logits_until_overflow(network: Network, rows: np.ndarray,
                           arith: Arithmetic) -> tuple[np.ndarray | None, bool]:
    """The logits of `rows`, and False; when their run overflows, the logits of the rows before the first
    overflowing one (rows are independent, so those run alike on their own; None when there are none, as weights
    that overflow the format do not run even on no rows), and True."""
    try:
        return run(network, rows, arith).logits, False
    except OverflowInFormat:
        first = first_overflowing_row(network, rows, arith)
        return (run(network, rows[:first], arith).logits if first else None), True


def single_token_edits(tokens: np.ndarray, radices: np.ndarray, offsets: np.ndarray, count: int,
                       rng: np.random.Generator) -> np.ndarray:
    """`count` distinct inputs (all of them when there are fewer) that differ from `tokens` at exactly one
    position, by another legal token there: edit k at position p, of the radices[p] - 1 there, adds k + 1 to the
    token modulo the position's alphabet."""
    alternatives = radices - 1
    ends = np.cumsum(alternatives)
    picks = rng.choice(int(ends[-1]), size=min(count, int(ends[-1])), replace=False)
    positions = np.searchsorted(ends, picks, side="right")
    shift = picks - (ends[positions] - alternatives[positions]) + 1
    edited = np.repeat(tokens[None, :], picks.size, axis=0)
    low = offsets[positions]
    edited[np.arange(picks.size), positions] = low + (tokens[positions] - low + shift) % radices[positions]
    return edited


def margin_search(network: Network, arith: Arithmetic, runs: int, seed: int = 0, chains: int = DEFAULT_CHAINS,
                  edits: int = DEFAULT_EDITS, max_failures: int = 0) -> Result:
    """Greedy descent on the margin, for exactly `runs` inputs run, from `seed`.

    `chains` descents run side by side. A descent starts from the least-margin one of `edits` uniformly random
    inputs of the task (a random input's margin already says how near it is to failing); each step runs `edits`
    random single-token edits of its current input (`single_token_edits`) and moves to the one with the least
    margin if that is below the current one. A descent starts afresh once it has run a failing input (all failing
    inputs it ran are recorded) or when no edit it tried lowers the margin. Every candidate of every descent goes
    into one executor run per step, and every input run counts against `runs`.

    `detail["starts"]` counts the descents begun."""
    task = task_of(network)
    runs, chains = check_int("runs", runs, 1), check_int("chains", chains, 1)
    edits = check_int("edits", edits, 1)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    findings = Findings(network, arith, max_failures, distinct=True)
    radices, offsets = task.position_alphabets()
    # A family of one input has no edits: every step is then a fresh start, i.e. sampling.
    can_edit = bool((radices > 1).any())
    current = np.zeros((chains, task.prompt_length), dtype=np.int64)
    current_margin = np.full(chains, np.inf)
    fresh = np.ones(chains, dtype=bool)
    used = starts = 0
    with bar(total=runs, desc="margin", unit="input") as progress:
        while used < runs:
            proposals = [task.random_tokens(rng, edits) if fresh[c]
                         else single_token_edits(current[c], radices, offsets, edits, rng) for c in range(chains)]
            owners = np.repeat(np.arange(chains), [len(p) for p in proposals])[:runs - used]
            batch = np.concatenate(proposals)[:runs - used]
            margins = margin(network, batch, arith)
            used += batch.shape[0]
            progress.update(batch.shape[0])
            for c in np.unique(owners):
                rows, values = batch[owners == c], margins[owners == c]
                starting = bool(fresh[c])
                starts += starting
                if (values <= 0).any():
                    findings.add(rows[values <= 0])
                    fresh[c] = True
                elif starting or values.min() < current_margin[c]:
                    best = int(np.argmin(values))
                    current[c], current_margin[c], fresh[c] = rows[best], values[best], not can_edit
                else:
                    fresh[c] = True
    return findings.result("margin", used, detail={"seed": seed, "chains": chains, "edits": edits, "starts": starts})


def hypothesis_margin(network: Network, arith: Arithmetic, max_examples: int = DEFAULT_MAX_EXAMPLES,
                      seed: int = 0, max_failures: int = 0) -> Result:
    """Hypothesis generates `max_examples` inputs of the task from `seed`, steered (`hypothesis.target`) towards
    small margins; it does not stop at a failure, so `failures` counts the distinct failing inputs among
    everything it ran, comparable with `sampled` at `checked` draws. No shrinking: the failures kept are the first
    ones met."""
    from hypothesis import HealthCheck, Phase, given, settings, target
    from hypothesis import seed as hypothesis_seed

    task = task_of(network)
    max_examples = check_int("max_examples", max_examples, 1)
    findings = Findings(network, arith, max_failures, distinct=True)
    inputs = 0

    @hypothesis_seed(check_int("seed", seed, 0))
    @settings(max_examples=max_examples, database=None, deadline=None, derandomize=False,
              phases=[Phase.generate, Phase.target], suppress_health_check=list(HealthCheck))
    @given(one_input(task))
    def probe(tokens: np.ndarray) -> None:
        nonlocal inputs
        inputs += 1
        value = float(margin(network, tokens, arith)[0])
        if value <= 0:
            findings.add([tokens])
        # Hypothesis maximises a finite target: the negated margin, an overflow (-inf) as the largest float.
        target(min(-value, sys.float_info.max))

    probe()
    return findings.result("hypothesis_margin", inputs, detail={"seed": seed, "max_examples": max_examples})
