"""L-sequential function composition with a chain of thought whose tokens carry pairs (CPW, Cor. 1.4, the one-layer
form): the composition prompt of docs/conventions.md §1.1, answered by generating the address of every table the
chain reads, a_1 ... a_L, and then the answer i_L, one token per step (L + 1 tokens).

The pairs: a_1 = i_0 = z_0 is the address of z_1, and for 2 <= l <= L the address of z_l is the pair
(w_{l-1}, i_{l-1}) as composition packs it, a_l = w_{l-1} N_{l-2} + i_{l-1} in [N_{l-1}] (§1.1). A generated token's
id is that number: generated token l (1 <= l <= L) names the pair (w_{l-1}, i_{l-1}) (the step fixes N_{l-2}, so
the id decodes as w_{l-1} = a_l // N_{l-2}, i_{l-1} = a_l mod N_{l-2}), and token L + 1 is i_L, the answer, a
value id as in `composition`.

Vocabulary: step l names N_{l-1} pairs (the issue's "vocabulary of size N_l"), at most N_{L-1} = V over all steps,
and every a_l < N_{l-1} <= V is already a value id. So the pair tokens reuse the value ids (id a at a generated
position is the pair a decodes to there, at a prompt position the value a) and the vocabulary is composition's,
V + prod n_l, with no new ids; a tokenizer giving each step's pairs ids of their own would need sum_l N_{l-1} more.

Why the pairs carry w and why there is one more token than in `composition_cot`: see
constructions/composition_cot_pairs.py. The generation protocol is composition_cot's (witness.generate, a tie
stops generation): step s (1 <= s <= L + 1) runs the prompt followed by the s - 1 tokens generated before it; the
longest input is prompt_length + L tokens (`context_length`), and the logits of generated token s are those of
transcript position prompt_length + s - 2 (`read_positions`). The inputs, their enumeration, sampling, count and
validation are composition's, inherited unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from witness.tasks.composition import Composition, composition_tasks
from witness.tasks.composition import RECORD as COMPOSITION_RECORD
from witness.tasks.record import TaskRecord


@dataclass(frozen=True)
class CompositionCoTPairs(Composition):
    """Composition's parameters and inputs; the answer is a_1 ... a_L (each the pair (w_{l-1}, i_{l-1}) packed as
    the address of z_l) and then i_L, generated one token per step."""

    name: ClassVar[str] = "composition_cot_pairs"

    @property
    def generated_tokens(self) -> int:
        """How many tokens a network generates for one input: the L addresses and the answer."""
        return self.L + 1

    @property
    def context_length(self) -> int:
        """The longest input a generation step runs: the prompt and the first L generated tokens."""
        return self.prompt_length + self.L

    @property
    def read_positions(self) -> tuple[int, ...]:
        """The transcript positions whose logits generate a_1 ... a_L, i_L (module docstring)."""
        return tuple(range(self.prompt_length - 1, self.context_length))

    def addresses(self, tokens: Any) -> np.ndarray:
        """[batch, L]: column l - 1 is a_l, the address of z_l the chain reads (a_1 = z_0)."""
        batch = self.check_tokens(tokens)
        starts = np.array([self.segment(f"z{l}").start for l in range(1, self.L + 1)])
        return self.hop_positions(batch) - starts

    def answers(self, tokens: Any) -> np.ndarray:
        """[batch, L + 1]: row b is a_1 ... a_L, i_L of input b, the tokens a network must generate."""
        batch = self.check_tokens(tokens)
        return np.concatenate([self.addresses(batch), self.hop_answers(batch)[:, -1:]], axis=1)


def composition_cot_pairs_tasks(**bounds):
    """Hypothesis: a `CompositionCoTPairs`, drawn as `composition_tasks(**bounds)` draws a composition task."""
    return composition_tasks(**bounds).map(lambda task: CompositionCoTPairs(task.L, task.m, task.n, task.layout))


RECORD = TaskRecord(
    name=CompositionCoTPairs.name,
    task=CompositionCoTPairs,
    summary="L-step composition answered by pair tokens: generate the address (w_{l-1}, i_{l-1}) of each table, "
            "then i_L",
    parameters=COMPOSITION_RECORD.parameters,
    tasks_strategy=composition_cot_pairs_tasks,
)
