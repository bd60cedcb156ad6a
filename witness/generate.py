"""Greedy generation: a network runs k times, each step one full run of the executor (`witness.execute.run`) at
the given arithmetic (format and semantics: strict, theory, mixed), and the unique argmax of its readout at the
last position is appended to the input of the next step.

    generate(network, tokens, k, arith)   -> Generation: the k generated ids per input, and where a tie stopped it
    answer_ids(network, tokens, arith)    what a check compares with its task's answers: one run's predictions,
                                          or the generated tokens where the network's task asks for generation

A tie in the argmax (`witness.execute.unique_argmax` says -1) is no token: generation of that input stops there
and says so (`Generation.stopped_by_tie`), never picking one of the tied ids. The inputs of a batch share their
length at every step, so each step is one batched run over the inputs still generating. Step s (0-based) runs
inputs of the prompt's length plus s, so k steps need a context (W_pos rows) of the prompt plus k - 1 tokens: the
last generated token is read, never fed back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from witness.arith import FLOAT64, Arithmetic
from witness.errors import InputError
from witness.execute import check_network_tokens, run
from witness.ir import Network
from witness.tasks.base import check_int

#: `Generation.tokens` from the step a tie stopped on, and `Generation.stopped_by_tie` where none did.
NOT_GENERATED = -1


class ContextTooShort(InputError):
    """The network's context (its W_pos rows) holds fewer positions than the generation's longest step runs."""


@dataclass(frozen=True, eq=False)
class Generation:
    """What `generate` returns. `tokens` [batch, k]: the ids generated, step by step, NOT_GENERATED (-1) from the
    step a tie stopped on; `stopped_by_tie` [batch]: that step's index (0-based), NOT_GENERATED where all k steps
    generated a token."""

    tokens: np.ndarray
    stopped_by_tie: np.ndarray

    def generated(self, row: int) -> list[int]:
        """The ids input `row` generated, up to the tie that stopped it, if one did."""
        stop = int(self.stopped_by_tie[row])
        return [int(t) for t in self.tokens[row, :stop if stop != NOT_GENERATED else None]]


def generate(network: Network, tokens: Any, k: int, arith: Arithmetic = FLOAT64) -> Generation:
    """Run `network` greedily for `k` steps on `tokens` (one sequence or a batch) under `arith` (module docstring).

    Refused before any run: k < 1 (ParameterError), and a context shorter than the prompt plus k - 1 tokens
    (ContextTooShort). An overflow of a fixed-point format at any step raises as the executor does."""
    batch = check_network_tokens(network, tokens)
    k = check_int("k", k, 1)
    longest = batch.shape[1] + k - 1
    if longest > network.n_ctx:
        raise ContextTooShort(f"generating {k} tokens after a prompt of {batch.shape[1]} runs inputs of up to "
                              f"{longest} tokens; the network's context holds {network.n_ctx}")
    generated = np.full((batch.shape[0], k), NOT_GENERATED, dtype=np.int64)
    stopped = np.full(batch.shape[0], NOT_GENERATED, dtype=np.int64)
    active = np.arange(batch.shape[0])  # the inputs still generating
    transcript = batch
    for step in range(k):
        predicted = run(network, transcript, arith).predictions[:, -1]
        tied = predicted == NOT_GENERATED
        stopped[active[tied]] = step
        generated[active[~tied], step] = predicted[~tied]
        active, transcript = active[~tied], np.concatenate([transcript[~tied], predicted[~tied, None]], axis=1)
        if not active.size:
            break
    return Generation(generated, stopped)


def generated_count(network: Network) -> int:
    """How many tokens the network's task asks it to generate per input (its `generated_tokens`): 0 for a network
    read in one run, or one that claims no task."""
    return getattr(network.task, "generated_tokens", 0)


def answer_ids(network: Network, tokens: Any, arith: Arithmetic = FLOAT64) -> np.ndarray:
    """The network's answer on each input, shaped as its task's `answers` reshaped to [batch, -1]: the predictions
    at the read positions of one run ([batch, n_read], -1 on a tie), or where its task asks for generated tokens,
    those ([batch, k], -1 from a tie on)."""
    count = generated_count(network)
    if count:
        return generate(network, tokens, count, arith).tokens
    return run(network, tokens, arith).predictions

