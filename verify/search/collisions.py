"""Summary collisions: indistinguishable pairs of (B,k)-block-sparse attention on 2-Sum (docs/conventions.md §6,
Theorem 1.2).

Why a summary collision is a lower-bound witness. In one layer of (B,k)-block-sparse attention a query i outside
block b learns about b's tokens only through b's summary c_b (the rounded mean of its keys, per head): the summary
decides whether i keeps b, and if i does not keep it, nothing else of b reaches i. A key is a function of one token
and its position, so c_b is a function of b's contents alone. Two contents X, X' of block b with equal rounded
summaries therefore give every query outside b the same block scores, the same kept blocks and -- when b is not
kept -- the same softmax and the same output. If a query i outside b has its partner t - x_i in X but not in X',
its answer differs between the two inputs while its output cannot. Counting: a summary holds H·d_head·p bits and a
block's contents B·log2 M, so below that many bits two contents of every block share a summary (pigeonhole);
Theorem 1.2 turns such collisions into a lower bound of order B·log n.

The search (`collision_pairs`):
  1. take the first block (b = 0: its prefix is the cheapest to run, and every query outside it may keep it, in the
     causal variant too), random contents for it, and two of its positions; run every assignment of those two
     tokens (at most `MAX_CANDIDATES`, sampled beyond that) through the executor as prompts of length B, and read
     the summary from the run's own trace (`hook_block_summary`: the very numbers the full run computes, since a
     summary depends on its block's tokens only) -- contents with equal summaries collide;
  2. for each collision (X, X'), fill the rest of the prompt with random tokens that are neither a changed token
     nor a partner of one, plant one position i after the block holding the partner t - u of a token u that X has
     and X' lacks, and keep the fill when the two answers differ;
  3. screen the candidates by batched runs (same output at every position), then hand each survivor to
     `verify.search.report.confirm_pair`, which re-runs both inputs from scratch and reports the pair only when the
     outputs agree and the answers differ. Bucketing, planting and screening only propose; a pair that the gate
     passes proves by itself that the network is wrong on one of the two inputs.

These are the probes 2-Sum's task record names (`verify.search.probes.PROBES`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.architectures import layer_kinds
from verify.check.runs import batch_size
from verify.search.report import DEFAULT_MAX_PAIRS, Pair, confirm_pair
from witness.arith import Arithmetic
from witness.errors import OverflowInFormat, ParameterError
from witness.execute import run
from witness.ir import Network
from witness.mixers import BlockSparseAttention
from witness.progress import bar
from witness.tasks import TwoSum
from witness.tasks.base import check_int

#: Block contents one collision attempt runs: every assignment of the two varied tokens when there are at most this
#: many (M^2 <= 4096, i.e. M <= 64), else this many distinct random ones.
MAX_CANDIDATES = 4096
#: Random fills tried per collision before moving on (each needs differing answers before the gate runs).
FILLS_PER_COLLISION = 4
#: Colliding pairs of contents taken from one bucket of equal summaries.
PAIRS_PER_BUCKET = 4
#: Contents per traced run: at most this many (contents x B^2) entries, since the trace keeps each attention pattern.
TRACE_ELEMENTS = 1 << 21
#: Input pairs screened per batched run (the search stops between screens once it has `max_pairs`).
SCREEN_ROWS = 64


def sparse_layer(network: Network) -> BlockSparseAttention:
    """The block-sparse attention of a one-layer 2-Sum network that drops some block for some query; a
    ParameterError for anything else."""
    if network.meta.task != TwoSum.name:
        raise ParameterError(f"summary collisions are for 2-Sum networks, got task {network.meta.task!r}")
    if len(network.layers) != 1 or not isinstance(network.layers[0].mixer, BlockSparseAttention):
        raise ParameterError(f"summary collisions need one layer of block-sparse attention; the network has layers "
                             f"{layer_kinds(network)}")
    layer, n = network.layers[0].mixer, network.task.n
    if -(-n // layer.block) - 1 <= layer.k:
        raise ParameterError(f"({layer.block},{layer.k})-sparse attention on {n} positions keeps every block: "
                             "every query sees every token, so no summary decides anything")
    return layer


# -- 1. colliding block contents ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Collision:
    """Two contents `a`, `b` of the first block (its tokens, in order) whose summaries are equal under the search's
    format and semantics."""

    a: tuple[int, ...]
    b: tuple[int, ...]


def first_block_summaries(network: Network, contents: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """The first block's summary for each of its contents [C, B], every head flattened: [C, H·d_head].

    Read from the executor's trace of the contents run as prompts of length B (`hook_block_summary`): a summary
    depends on its block's tokens only, so these are the numbers the full run computes. A chunk whose run
    overflows a fixed-point format gives NaN rows (no summary, so never a collision)."""
    layer = sparse_layer(network)
    rows = max(1, TRACE_ELEMENTS // contents.shape[1] ** 2)
    parts = []
    for begin in range(0, len(contents), rows):
        chunk = contents[begin:begin + rows]
        try:
            summary = run(network, chunk, arith, trace=True).trace["blocks.0.attn.hook_block_summary"]
            parts.append(summary[:, :, 0].reshape(len(chunk), -1) + 0.0)  # + 0.0: -0.0 becomes 0.0
        except OverflowInFormat:
            parts.append(np.full((len(chunk), layer.n_heads * layer.d_head), np.nan))
    return np.concatenate(parts)


def _assignments(M: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """Values of `width` varied tokens: all M^width assignments, or MAX_CANDIDATES distinct random ones."""
    if M**width <= MAX_CANDIDATES:
        return np.array(list(itertools.product(range(M), repeat=width)), dtype=np.int64).reshape(-1, width)
    codes = rng.choice(M**width, size=MAX_CANDIDATES, replace=False)
    return np.stack([(codes // M**w) % M for w in reversed(range(width))], axis=1)


def colliding_contents(network: Network, arith: Arithmetic, rng: np.random.Generator
                       ) -> tuple[list[Collision], dict[str, int]]:
    """Random contents for the first block with two of its tokens varied over (up to) every value; the contents
    whose summaries are equal, each bucket's first member paired with up to PAIRS_PER_BUCKET others.

    Also returns the counts: `candidates` run, `colliding` pairs of contents (all of them, c(c-1)/2 per bucket of
    c), `buckets` with more than one member."""
    task = network.task
    B = sparse_layer(network).block
    varied = np.sort(rng.choice(B, size=min(2, B), replace=False))
    values = _assignments(task.M, len(varied), rng)
    contents = np.repeat(task.random_tokens(rng, 1)[:, :B], len(values), axis=0)
    contents[:, varied] = values
    summaries = first_block_summaries(network, contents, arith)
    finite = np.flatnonzero(np.isfinite(summaries).all(axis=1))
    _, bucket, sizes = np.unique(summaries[finite], axis=0, return_inverse=True, return_counts=True)
    collisions: list[Collision] = []
    for shared in np.flatnonzero(sizes > 1):
        members = finite[np.flatnonzero(bucket.reshape(-1) == shared)]
        first = tuple(int(v) for v in contents[members[0]])
        collisions += [Collision(first, tuple(int(v) for v in contents[other]))
                       for other in members[1:1 + PAIRS_PER_BUCKET]]
    counts = {"candidates": len(values), "colliding": int((sizes * (sizes - 1) // 2).sum()),
              "buckets": int((sizes > 1).sum())}
    return collisions, counts


# -- 2. two inputs whose answers differ ---------------------------------------------------------------------------
def pair_inputs(task: TwoSum, collision: Collision, rng: np.random.Generator):
    """Yield FILLS_PER_COLLISION input pairs (a, b): the same random fill after the first block, which holds
    collision.a in `a` and collision.b in `b` (see the module docstring, step 2)."""
    stop = len(collision.a)
    content_a, content_b = np.array(collision.a), np.array(collision.b)
    changed = np.concatenate([content_a[content_a != content_b], content_b[content_a != content_b]])
    # Plant the partner t - u of a token u that one content has and the other lacks: the planted position then has
    # a partner in one input only. Contents with the same multiset of tokens (a swap) can still differ in answers,
    # at the block's own positions, so their changed tokens are used then.
    lacking = [int(u) for u in changed if (u in content_a) != (u in content_b)] or [int(u) for u in changed]
    # The fill holds neither a changed token nor a partner of one, so the planted position is the only one whose
    # partner status the change decides.
    avoid = np.concatenate([changed, (task.t - changed) % task.M])
    allowed = np.setdiff1d(np.arange(task.M), avoid)
    allowed = allowed if allowed.size else np.arange(task.M)
    for _ in range(FILLS_PER_COLLISION):
        fill = rng.choice(allowed, size=task.n)
        fill[rng.integers(stop, task.n)] = (task.t - rng.choice(lacking)) % task.M
        a, b = fill.copy(), fill.copy()
        a[:stop], b[:stop] = content_a, content_b
        yield a, b


# -- 3. the probe -----------------------------------------------------------------------------------------------
def _outputs_agree(network: Network, inputs_a: np.ndarray, inputs_b: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """Which rows the network answers alike on both inputs, by batched runs: a cheap screen before the gate, which
    re-runs each survivor on its own. A chunk that overflows a fixed-point format passes the screen whole (the gate
    then decides each pair)."""
    agree = np.ones(len(inputs_a), bool)
    rows = batch_size(network)
    for begin in range(0, len(inputs_a), rows):
        chunk = slice(begin, begin + rows)
        try:
            out_a, out_b = (run(network, inputs[chunk], arith).predictions for inputs in (inputs_a, inputs_b))
        except OverflowInFormat:
            continue
        agree[chunk] = (out_a == out_b).all(axis=1)
    return agree


def collision_pairs(network: Network, arith: Arithmetic, *, attempts: int = 8, seed: int = 0,
                    max_pairs: int = DEFAULT_MAX_PAIRS) -> tuple[list[Pair], dict[str, Any]]:
    """Summary-collision pairs, each confirmed by `confirm_pair`, and the search record with its rates.

    Each of the `attempts` draws random contents of the first block and varies two of its tokens; the search stops
    early at `max_pairs` confirmed pairs. Record: `candidates` contents run, `colliding` pairs of them, `buckets`
    of equal summaries, `tried` input pairs with different answers, `confirmed` pairs, and the rates."""
    task = network.task
    sparse_layer(network)  # refuses a network without a block-sparse layer, with the reason
    attempts, max_pairs = check_int("attempts", attempts, 1), check_int("max_pairs", max_pairs, 1)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    start = time.perf_counter()
    pairs: list[Pair] = []
    totals = {"candidates": 0, "colliding": 0, "buckets": 0}
    tried, summary_seconds = 0, 0.0
    for _ in bar(range(attempts), desc="summary collisions", unit="attempt"):
        began = time.perf_counter()
        collisions, counts = colliding_contents(network, arith, rng)
        summary_seconds += time.perf_counter() - began
        totals = {key: totals[key] + counts[key] for key in totals}
        proposals = [(c, a, b) for c, collision in enumerate(collisions) for a, b in pair_inputs(task, collision, rng)]
        used: set[int] = set()  # one pair per collision: the report shows different collisions
        for begin in range(0, len(proposals), SCREEN_ROWS):
            chunk = proposals[begin:begin + SCREEN_ROWS]
            origin = np.array([c for c, _, _ in chunk])
            inputs_a, inputs_b = np.stack([a for _, a, _ in chunk]), np.stack([b for _, _, b in chunk])
            differ = (task.answers(inputs_a) != task.answers(inputs_b)).any(axis=1)
            origin, inputs_a, inputs_b = origin[differ], inputs_a[differ], inputs_b[differ]
            tried += len(origin)
            for row in np.flatnonzero(_outputs_agree(network, inputs_a, inputs_b, arith)):
                if origin[row] in used or len(pairs) >= max_pairs:
                    continue
                pair = confirm_pair(network, inputs_a[row], inputs_b[row], arith)
                if pair is not None:
                    pairs.append(pair)
                    used.add(origin[row])
            if len(pairs) >= max_pairs:
                break
        if len(pairs) >= max_pairs:
            break
    seconds = time.perf_counter() - start
    searched = {"method": "summary_collisions", "inputs": totals["candidates"] + 2 * tried, **totals,
                "tried": tried, "confirmed": len(pairs), "seed": seed, "seconds": round(seconds, 3),
                "candidates_per_second": round(totals["candidates"] / max(summary_seconds, 1e-9), 1),
                "pairs_per_second": round(len(pairs) / max(seconds, 1e-9), 3)}
    return pairs, searched


__all__ = ["collision_pairs", "colliding_contents", "first_block_summaries", "pair_inputs", "sparse_layer",
           "Collision"]
