"""`attention`: softmax attention with H heads over every key, or with `causal` the keys up to the query's own
(docs/conventions.md §2). Scores are q . k with no hidden 1/sqrt(d_head) scale."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from witness.mixers.base import Mixer, no_options
from witness.mixers.softmax import (SoftmaxHeads, causal_keys, initial_softmax, reference_causal, softmax_kernel,
                                    softmax_reference, softmax_torch, torch_causal)


@dataclass(frozen=True, eq=False)
class Attention(SoftmaxHeads):
    """Softmax attention with H heads. Scores are q.k with no hidden scale; `causal` masks keys after the query."""

    causal: bool = True
    kind: ClassVar[str] = "attention"
    option_names: ClassVar = ("causal",)

    def __post_init__(self) -> None:
        self._freeze_heads()


def _allowed_keys(block: Attention, q, k, arith, hooks, prefix: str, from_query: int):
    return causal_keys(q.shape[2], block.causal)


def _reference_visible(block: Attention, q, k, ops, dot, from_query: int) -> list[list[bool]]:
    return reference_causal(block, len(q))


KINDS = (Mixer(block=Attention, kernel=softmax_kernel(_allowed_keys), reference=softmax_reference(_reference_visible),
               torch_forward=softmax_torch(torch_causal), options=no_options, initial=initial_softmax,
               from_query=True),)

__all__ = ["Attention", "KINDS"]
