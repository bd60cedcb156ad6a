"""`sliding_window`: softmax attention over a window of W positions (docs/conventions.md §2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from witness.mixers.base import Mixer
from witness.mixers.softmax import (SoftmaxHeads, check_span, initial_softmax, softmax_kernel, softmax_reference,
                                    softmax_torch)


@dataclass(frozen=True, eq=False)
class SlidingWindowAttention(SoftmaxHeads):
    """Softmax attention over a window of `window` = W positions: with `causal`, query i sees keys i-W+1 .. i (the
    last W positions); without, every key j with |i - j| < W. Same arrays as `Attention`."""

    window: int
    causal: bool = True
    kind: ClassVar[str] = "sliding_window"
    option_names: ClassVar = ("window", "causal")

    def __post_init__(self) -> None:
        self._freeze_heads()
        object.__setattr__(self, "window", check_span("SlidingWindowAttention", "window", self.window, 1))


def _allowed_keys(block: SlidingWindowAttention, q: np.ndarray, k: np.ndarray, arith, hooks, prefix: str,
                  from_query: int):
    length = q.shape[2]

    def allowed(start: int, stop: int) -> np.ndarray:
        offset = np.arange(start, stop)[:, None] - np.arange(length)[None, :]  # i - j
        return (offset >= 0) & (offset < block.window) if block.causal else np.abs(offset) < block.window

    return allowed


def _reference_visible(block: SlidingWindowAttention, q, k, ops, dot, from_query: int) -> list[list[bool]]:
    length = len(q)
    return [[0 <= i - j < block.window if block.causal else abs(i - j) < block.window for j in range(length)]
            for i in range(length)]


def _torch_visible(module, q, k):
    import torch

    window = module.settings["window"]
    positions = torch.arange(q.shape[-2], device=q.device)
    offset = positions[:, None] - positions[None, :]  # i - j
    return (offset >= 0) & (offset < window) if module.settings["causal"] else offset.abs() < window


def _options(max_window: int = 5):
    from hypothesis import strategies as st

    return st.fixed_dictionaries({"window": st.integers(1, max_window)})


KINDS = (Mixer(block=SlidingWindowAttention, kernel=softmax_kernel(_allowed_keys),
               reference=softmax_reference(_reference_visible), torch_forward=softmax_torch(_torch_visible),
               options=_options, initial=initial_softmax, from_query=True),)

__all__ = ["SlidingWindowAttention", "KINDS"]
