"""`block_sparse`: (B,k)-block-sparse softmax attention (docs/conventions.md §2, the project's convention, after NSA
/ MoBA): each query keeps its own block of keys and the k blocks whose mean key scores best, and attends to the
tokens of the kept blocks only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from witness.arith import Arithmetic
from witness.mixers.base import Mixer
from witness.mixers.softmax import (SoftmaxHeads, causal_keys, check_span, initial_softmax, reference_causal,
                                    softmax_kernel, softmax_reference, softmax_torch, torch_causal)


@dataclass(frozen=True, eq=False)
class BlockSparseAttention(SoftmaxHeads):
    """(B,k)-block-sparse softmax attention (docs/conventions.md §2, the project's convention, after NSA / MoBA).

    Keys are cut into contiguous blocks of `block` = B positions (the last block may be shorter). Per head, block
    b's summary c_b is the mean of its keys (sum in index order, divided by the block's length). Query i scores
    the blocks by q_i . c_b and keeps its own block plus the `k` best other candidate blocks -- highest score
    first, ties to the lower block index, NaN scores last -- then runs exact softmax attention over the tokens of
    the kept blocks. Candidates: every other block; with `causal`, only the blocks before i's own (those wholly at
    positions <= i), and inside the own block only keys j <= i. Same arrays as `Attention`.
    """

    block: int
    k: int
    causal: bool = True
    kind: ClassVar[str] = "block_sparse"
    option_names: ClassVar = ("block", "k", "causal")

    def __post_init__(self) -> None:
        self._freeze_heads()
        object.__setattr__(self, "block", check_span("BlockSparseAttention", "block", self.block, 1))
        object.__setattr__(self, "k", check_span("BlockSparseAttention", "k", self.k, 0))


# -- the executor -------------------------------------------------------------------------------------------------
def block_summaries(k: np.ndarray, size: int, arith: Arithmetic) -> np.ndarray:
    """Per head, the mean of each block's keys: k [..., n, d_head] -> [..., ceil(n / size), d_head].

    Under `strict` each mean is the sum of the block's keys in index order, one rounding per add, then one rounded
    division by the block's length (an exact integer: `witness.mixers.softmax.MAX_SPAN` says why float64 then
    rounding is correctly rounded). The last block is shorter when size does not divide n, and divides by its own
    length."""
    length = k.shape[-2]
    whole = length // size
    parts = []
    if whole:
        grouped = k[..., :whole * size, :].reshape(*k.shape[:-2], whole, size, k.shape[-1])
        parts.append(arith.div(arith.sum(grouped, axis=-2)[..., 0, :], np.float64(size)))
    if length % size:
        parts.append(arith.div(arith.sum(k[..., whole * size:, :], axis=-2), np.float64(length % size)))
    return np.concatenate(parts, axis=-2)


def select_blocks(block_scores: np.ndarray, size: int, k: int, causal: bool, first: int = 0) -> np.ndarray:
    """Which blocks each query keeps, block_scores [..., queries, n_blocks] of the queries first, first + 1, ... ->
    bool [..., queries, n_blocks]: its own block i // size, plus the k best candidate blocks (all others; with
    `causal`, those before its own), best first by score, ties to the lower index, NaN scores last. Fewer than k
    candidates: all of them."""
    queries, n_blocks = block_scores.shape[-2:]
    own = np.arange(first, first + queries) // size
    index = np.arange(n_blocks)
    candidate = index[None, :] < own[:, None] if causal else index[None, :] != own[:, None]  # [n, n_blocks]
    shape = block_scores.shape
    nan = np.isnan(block_scores)
    # np.lexsort sorts by its last key first: candidates, then non-NaN, then higher score, then lower index.
    order = np.lexsort((np.broadcast_to(index, shape), -np.where(nan, 0.0, block_scores), nan,
                        np.broadcast_to(~candidate, shape)), axis=-1)[..., :k]
    chosen = np.zeros(shape, bool)
    np.put_along_axis(chosen, order, np.take_along_axis(np.broadcast_to(candidate, shape), order, axis=-1), axis=-1)
    return chosen | (index[None, :] == own[:, None])


def _allowed_keys(block: BlockSparseAttention, q: np.ndarray, k: np.ndarray, arith: Arithmetic, hooks, prefix: str,
                  from_query: int):
    """The kept blocks' keys for the queries from_query on (whose block scores alone are computed). Traced (every
    query): hook_block_summary [b, H, n_blocks, d_head], hook_block_scores and hook_selected_blocks [b, H, n,
    n_blocks]; then hook_pattern (zero off the kept tokens) and hook_result as for full attention."""
    length = q.shape[2]
    summaries = block_summaries(k, block.block, arith)
    block_scores = arith.matmul(q[:, :, from_query:], np.swapaxes(summaries, -1, -2))  # [b, H, n - from, n_blocks]
    selected = select_blocks(block_scores, block.block, block.k, block.causal, from_query)
    if hooks is not None:
        hooks.update({f"{prefix}.hook_block_summary": summaries, f"{prefix}.hook_block_scores": block_scores,
                      f"{prefix}.hook_selected_blocks": selected})
    key_block = np.arange(length) // block.block
    causal = causal_keys(length, block.causal)

    def allowed(start: int, stop: int) -> np.ndarray:
        return selected[:, :, start - from_query:stop - from_query][..., key_block] & causal(start, stop)

    return allowed


# -- the MPFR reference -------------------------------------------------------------------------------------------
def _reference_visible(block: BlockSparseAttention, q, k, ops, dot, from_query: int) -> list[list[bool] | None]:
    """Each block summary is its keys summed in index order, then divided by the block's length; every query from
    from_query on scores every block (q . summary) and keeps its own block and the k best candidates (higher score
    first, ties to the lower index, NaN last); earlier queries are not computed (None)."""
    length = len(q)
    causal = reference_causal(block, length)
    size = block.block
    summaries = []
    for first in range(0, length, size):
        members = k[first:first + size]
        summary = []
        for e in range(block.d_head):
            total = members[0][e]
            for key in members[1:]:
                total = ops.add(total, key[e], "summary")
            summary.append(ops.div(total, len(members), "summary"))
        summaries.append(summary)
    visible = [None] * from_query
    for i in range(from_query, length):
        own = i // size
        scores = [dot(q[i], summary, "block scores") for summary in summaries]
        candidates = [b for b in range(len(summaries)) if (b < own if block.causal else b != own)]
        ranked = sorted(candidates, key=lambda b: (1, 0, b) if ops.is_nan(scores[b]) else (0, -scores[b], b))
        kept = {own, *ranked[:block.k]}
        visible.append([j // size in kept and causal[i][j] for j in range(length)])
    return visible


# -- torch --------------------------------------------------------------------------------------------------------
def _torch_visible(module, q, k):
    """Block summaries and scores are computed in torch; which blocks are kept is decided by the executor's own
    rule (`select_blocks`) on their values, so no gradient flows through the choice, only through the softmax over
    the kept tokens."""
    import torch

    size = module.settings["block"]
    length = q.shape[-2]
    summaries = torch.cat([k[..., first:first + size, :].mean(dim=-2, keepdim=True)
                           for first in range(0, length, size)], dim=-2)  # [batch, H, n_blocks, d_head]
    block_scores = torch.matmul(q, summaries.transpose(-1, -2))  # [batch, H, n, n_blocks]
    scores = block_scores.detach().cpu().to(torch.float64).numpy()
    selected = select_blocks(scores, size, module.settings["k"], module.settings["causal"])
    key_block = np.arange(length) // size
    return torch.as_tensor(selected[..., key_block], device=q.device) & torch_causal(module, q, k)


def _options(block_sizes: tuple[int, ...] = (1, 2, 3, 4), max_k: int = 3):
    from hypothesis import strategies as st

    return st.fixed_dictionaries({"block": st.sampled_from(block_sizes), "k": st.integers(0, max_k)})


KINDS = (Mixer(block=BlockSparseAttention, kernel=softmax_kernel(_allowed_keys),
               reference=softmax_reference(_reference_visible), torch_forward=softmax_torch(_torch_visible),
               options=_options, initial=initial_softmax, from_query=True),)

__all__ = ["BlockSparseAttention", "block_summaries", "select_blocks", "KINDS"]
