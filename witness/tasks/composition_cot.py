"""L-sequential function composition with a chain of thought (CPW, Cor. 1.4): the composition prompt of
docs/conventions.md §1.1, answered by generating the whole chain i_1 ... i_L, one token per hop.

Why a task of its own rather than `Composition` with a note on how to run it: what is checked differs. A
composition network is right on an input when its one read gives i_L; a chain-of-thought network is right when
its L generated tokens are i_1 ... i_L, each the token id of its value (a table token's id is its value, so the
generated ids are table ids). That claim is this task's `answers` ([batch, L]), and `generated_tokens` = L tells
every check to run the network by greedy generation (`witness.generate`) rather than by one forward pass. The
inputs, their enumeration, sampling, count and validation are composition's, inherited unchanged; the last
generated token is composition's answer.

The generation protocol: step l (1 <= l <= L) runs the network on the prompt followed by i_1 ... i_{l-1}, the
tokens generated before it, and generates the unique argmax of the readout at the last position (a tie stops
generation: the input is answered wrongly). The longest input a step runs is prompt_length + L - 1 tokens
(`context_length`): the last generated token is read, never fed back. In the full transcript (prompt + L - 1
generated tokens) the logits that give i_l are those of position prompt_length + l - 2, so those are the task's
`read_positions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from witness.tasks.composition import Composition, composition_tasks
from witness.tasks.composition import RECORD as COMPOSITION_RECORD
from witness.tasks.record import TaskRecord


@dataclass(frozen=True)
class CompositionCoT(Composition):
    """Composition's parameters and inputs; the answer is the chain i_1 ... i_L, generated one token per hop."""

    name: ClassVar[str] = "composition_cot"

    @property
    def generated_tokens(self) -> int:
        """How many tokens a network generates for one input: one per hop."""
        return self.L

    @property
    def context_length(self) -> int:
        """The longest input a generation step runs: the prompt and the first L - 1 generated tokens."""
        return self.prompt_length + self.L - 1

    @property
    def read_positions(self) -> tuple[int, ...]:
        """The transcript positions whose logits generate i_1 ... i_L (module docstring)."""
        return tuple(range(self.prompt_length - 1, self.context_length))

    def answers(self, tokens: Any) -> np.ndarray:
        """[batch, L]: row b is the chain i_1 ... i_L of input b, the tokens a network must generate."""
        return self.hop_answers(tokens)


def composition_cot_tasks(**bounds):
    """Hypothesis: a `CompositionCoT`, drawn as `composition_tasks(**bounds)` draws a composition task."""
    return composition_tasks(**bounds).map(lambda task: CompositionCoT(task.L, task.m, task.n, task.layout))


RECORD = TaskRecord(
    name=CompositionCoT.name,
    task=CompositionCoT,
    summary="L-step composition answered by a chain of thought: generate i_1 .. i_L, one token per hop",
    parameters=COMPOSITION_RECORD.parameters,
    tasks_strategy=composition_cot_tasks,
)
