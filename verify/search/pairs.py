"""Composition's pair probes (conventions §6): indistinguishable pairs across a layout boundary, the constructive heart
of the lower bounds, and the counting argument that says where they must exist.

Cut the prompt at position `boundary` (by default, for composition in the `paper` layout, right after the z_L
table). In CPW's communication picture the prefix can influence the positions after the cut only through what
crosses it, at precision p:

* per causal softmax-attention layer, later query i and head h: the prefix's part of the softmax, i.e. its
  running maximum score `top`, its denominator sum_j exp(s_ij - top) and its numerator sum_j exp(s_ij - top) v_j
  (j < boundary), each computed and rounded by the run's own arithmetic;
* per recurrent (linear-attention) layer and head: the state leaving the prefix, S at position boundary - 1 (and
  the normaliser z of a normalised linear attention), as the executor's kernel records it (`hook_state`).

Every prefix-only computation is causal, so by induction over the layers two inputs with the same suffix and equal
crossings present the same values to every later position in CPW's model, where each crossing message is what is
rounded to p bits. The executor rounds elsewhere (`theory`: only what leaves a block, so the exact partial sums may
differ while their p-bit roundings agree; `strict`: every operation, in the executor's order), so a collision is
only a *candidate*: it is reported after `verify.search.report.confirm_pair` has re-run both inputs from scratch
and seen the same output on two different answers, which by itself proves that the network is wrong on one of
them, whatever the hash said.

Search (`boundary_pairs`): fix a random suffix, run many prefixes under it -- random ones, and single-token changes
of one of them (every one when there are few, so the position the answer reads is changed too) -- hash each
input's crossings, and bucket. Where counting forces pairs (`counting`: the z_L table holds more bits than the
recurrent state), `targeted_pairs` walks two inputs' crossings together until they meet.

These are the probes composition's task record names (`verify.search.probes.PROBES`); they know its layout.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

import numpy as np

from verify.check.runs import batch_size
from verify.search.report import DEFAULT_MAX_PAIRS, Pair, confirm_pair
from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.execute import run
from witness.ir import Network
from witness.mixers import RECURRENT_MIXERS, Attention
from witness.mixers.base import project
from witness.tasks.base import check_int

#: The trace hooks holding what a recurrent layer carries past a position: its state, and a linear-attention
#: normaliser where the layer has one.
STATE_HOOKS = ("hook_state", "hook_normalizer")


def has_default_boundary(task) -> bool:
    """Whether the prompt opens with the z_L table (the `paper` layout), so that a cut right after it leaves the
    table on one side and everything that reads it on the other (only composition has layouts)."""
    return getattr(task, "layout", None) == "paper"


def default_boundary(task) -> int:
    """The cut after the first block of the prompt: in the `paper` layout, after the z_L table."""
    if not has_default_boundary(task):
        raise ParameterError(f"no default boundary for {task}; give one")
    return task.segment(f"z{task.L}").stop


def _attention_crossing(block: Attention, x: np.ndarray, boundary: int, arith: Arithmetic) -> list[np.ndarray]:
    """The prefix's partial softmax (top, denominator, numerator) for every later query and head."""
    if not block.causal:
        raise ParameterError("a bidirectional attention layer lets the prefix see the suffix: no boundary exists")
    q, k, v = project(block, x, arith)  # [b, H, n, d_head], as the executor computes them
    scores = arith.matmul(q[:, :, boundary:], np.swapaxes(k[:, :, :boundary], -1, -2))  # [b, H, later, prefix]
    top = scores.max(axis=-1, keepdims=True)
    numerators = arith.exp(arith.sub(scores, top))
    return [arith.store(top), arith.store(arith.sum(numerators, axis=-1)),
            arith.store(arith.matmul(numerators, v[:, :, :boundary]))]


def crossing_vectors(network: Network, tokens: np.ndarray, boundary: int, arith: Arithmetic) -> np.ndarray:
    """[batch, width]: everything that crosses `boundary` (see the module docstring), as the run's p-bit values."""
    tokens = np.asarray(tokens)
    if not 0 < boundary < tokens.shape[1]:
        raise ParameterError(f"boundary must lie inside the prompt (0, {tokens.shape[1]}), got {boundary}")
    trace = run(network, tokens, arith, trace=True).trace
    parts: list[np.ndarray] = []
    for l, layer in enumerate(network.layers):
        x = trace["hook_embed"] if l == 0 else trace[f"blocks.{l - 1}.hook_resid_post"]
        if isinstance(layer.mixer, Attention):
            parts += _attention_crossing(layer.mixer, x, boundary, arith)
        elif isinstance(layer.mixer, RECURRENT_MIXERS):  # hooks [b, H, n, ...]: the state after each position
            parts += [trace[f"blocks.{l}.attn.{hook}"][:, :, boundary - 1] for hook in STATE_HOOKS
                      if f"blocks.{l}.attn.{hook}" in trace]
        else:
            raise ParameterError(f"blocks.{l}: no boundary crossing is defined for mixer kind {layer.mixer.kind!r}")
    # + 0.0 turns -0.0 into 0.0: equal values, equal bytes.
    return np.concatenate([np.reshape(part, (tokens.shape[0], -1)) + 0.0 for part in parts], axis=1)


def crossings(network: Network, tokens: np.ndarray, boundary: int, arith: Arithmetic) -> list[bytes]:
    """One digest per input of everything that crosses `boundary`."""
    flat = np.ascontiguousarray(crossing_vectors(network, tokens, boundary, arith), dtype=np.float64)
    return [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in flat]


def _prefixes(task, boundary: int, rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` random prefixes, and up to `count` single-token changes of the first one (all of them when there
    are no more than that), distinct."""
    radices, offsets = (a[:boundary] for a in task.position_alphabets())
    random = rng.integers(0, radices, size=(count, boundary)) + offsets
    changes = [(position, value) for position in range(boundary)
               for value in range(offsets[position], offsets[position] + radices[position])
               if value != random[0, position]]
    if len(changes) > count:
        changes = [changes[i] for i in rng.choice(len(changes), count, replace=False)]
    changed = np.repeat(random[:1], len(changes), axis=0)
    for row, (position, value) in enumerate(changes):
        changed[row, position] = value
    return np.unique(np.concatenate([random, changed]), axis=0)


def boundary_pairs(network: Network, arith: Arithmetic, boundary: int | None = None, suffixes: int = 4,
                   prefixes: int = 256, seed: int = 0, max_pairs: int = DEFAULT_MAX_PAIRS) -> tuple[list[Pair], dict]:
    """Confirmed indistinguishable pairs and the search record (inputs run, distinct crossings, candidates)."""
    task = network.task
    if task is None:
        raise ParameterError("the network names no task, so answers cannot differ")
    boundary = default_boundary(task) if boundary is None else check_int("boundary", boundary, 1)
    suffixes, prefixes = check_int("suffixes", suffixes, 1), check_int("prefixes", prefixes, 1)
    max_pairs = check_int("max_pairs", max_pairs, 1)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    start = time.perf_counter()
    pairs: list[Pair] = []
    inputs = distinct = candidates = 0
    for _ in range(suffixes):
        suffix = task.random_tokens(rng, 1)[0, boundary:]
        heads = _prefixes(task, boundary, rng, prefixes)
        batch = np.concatenate([heads, np.broadcast_to(suffix, (len(heads), suffix.size))], axis=1)
        answers = task.answers(batch).reshape(len(batch), -1)
        buckets: dict[bytes, dict[bytes, int]] = {}  # crossing -> answer -> the first row with it
        size = batch_size(network)
        digests = [d for begin in range(0, len(batch), size)
                   for d in crossings(network, batch[begin:begin + size], boundary, arith)]
        for row, digest in enumerate(digests):
            by_answer = buckets.setdefault(digest, {})
            answer = answers[row].tobytes()
            if answer in by_answer or len(pairs) >= max_pairs:
                continue
            for other in by_answer.values():
                candidates += 1
                pair = confirm_pair(network, batch[other], batch[row], arith)
                if pair is not None:
                    pairs.append(pair)
                    break
            by_answer[answer] = row
        inputs += len(batch)
        distinct += len(buckets)
        if len(pairs) >= max_pairs:
            break
    searched = {"method": "boundary_pairs", "boundary": boundary, "inputs": inputs, "distinct_crossings": distinct,
                "candidates": candidates, "confirmed": len(pairs), "seed": seed,
                "seconds": round(time.perf_counter() - start, 3)}
    return pairs, searched


def crossing_distance(rows: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per row, the largest |row - target| over entries that differ (equal entries, infinities included, count 0;
    a NaN or a differing infinity counts as infinitely far): 0 exactly when the crossings are equal."""
    with np.errstate(invalid="ignore"):
        gaps = np.where(rows == target, 0.0, np.abs(rows - target))
    return np.nan_to_num(gaps, nan=np.inf, posinf=np.inf).max(axis=1)


def targeted_pairs(network: Network, arith: Arithmetic, runs: int, seed: int = 0, edits: int = 32,
                   max_pairs: int = DEFAULT_MAX_PAIRS) -> tuple[list[Pair], dict]:
    """Pairs sought where counting says they must exist, by walking two inputs' crossings together.

    An attempt draws an input A and makes B from it by changing the z_L entry the answer reads (so the answers
    differ: that entry *is* the answer, and the suffix is shared). Then it descends on the distance between the
    crossing vectors of A and B at p bits (`crossing_vectors`; the largest absolute difference): each step runs
    `edits` single-token changes of B's other prefix entries and keeps the closest one if it is closer. At
    distance 0 the crossings are equal and the pair is a candidate for `confirm_pair` (a fresh run of both: same
    output, different answers); an attempt that stops improving starts afresh. For a linear state, a sum over
    positions, the descent looks for changes whose contributions cancel or are absorbed by rounding; for the
    delta rule and softmax partial sums it relaxes the same way. Exactly `runs` inputs are run (A's and B's
    included); `searched` counts attempts, candidates and confirmed pairs."""
    task = network.task
    if task is None or not has_default_boundary(task):
        raise ParameterError("targeted pairs need a composition network in the paper layout")
    boundary = default_boundary(task)
    runs, edits = check_int("runs", runs, 2), check_int("edits", edits, 1)
    max_pairs = check_int("max_pairs", max_pairs, 1)
    radices, offsets = (a[:boundary] for a in task.position_alphabets())
    rng = np.random.default_rng(check_int("seed", seed, 0))
    start = time.perf_counter()
    pairs: list[Pair] = []
    used = attempts = candidates = 0
    while used + 2 <= runs and len(pairs) < max_pairs:
        attempts += 1
        a = task.random_tokens(rng, 1)[0]
        pinned = int(task.hop_positions(a)[0, -1])  # the z_L entry the answer is
        b = a.copy()
        b[pinned] = offsets[pinned] + (a[pinned] - offsets[pinned] + 1 + rng.integers(radices[pinned] - 1)) \
            % radices[pinned]
        vectors = crossing_vectors(network, np.stack([a, b]), boundary, arith)
        used += 2
        target, distance = vectors[0], float(crossing_distance(vectors[1:], vectors[0])[0])
        movable = np.array([position for position in range(boundary) if position != pinned and radices[position] > 1])
        while distance > 0 and used < runs and movable.size:
            count = min(edits, runs - used)
            positions = rng.choice(movable, size=count)
            shifts = 1 + rng.integers(0, radices[positions] - 1)
            batch = np.repeat(b[None], count, axis=0)
            batch[np.arange(count), positions] = offsets[positions] + (b[positions] - offsets[positions] + shifts) \
                % radices[positions]
            found = crossing_distance(crossing_vectors(network, batch, boundary, arith), target)
            used += count
            best = int(np.argmin(found))
            if found[best] >= distance:
                break
            b, distance = batch[best], float(found[best])
        if distance == 0:
            candidates += 1
            pair = confirm_pair(network, a, b, arith)
            if pair is not None:
                pairs.append(pair)
    searched = {"method": "targeted_pairs", "boundary": boundary, "inputs": used, "attempts": attempts,
                "candidates": candidates, "confirmed": len(pairs), "seed": seed,
                "seconds": round(time.perf_counter() - start, 3)}
    return pairs, searched


def counting(task, state_bits: int) -> dict[str, Any]:
    """Whether counting alone forces indistinguishable pairs: the last table z_L holds N log2 N bits (N = N_{L-1}
    entries of N values); if every one must cross the boundary through C = `state_bits` bits of recurrent state
    (C > 0: the network carries state), two tables with different answers share a state once N log2 N > C."""
    size = task.domain_sizes[-1]
    table_bits = size * math.log2(size) if size > 1 else 0.0
    return {"applies": state_bits > 0, "table_bits": round(table_bits, 3), "state_bits": state_bits,
            "forced": 0 < state_bits < table_bits}


__all__ = ["boundary_pairs", "targeted_pairs", "counting", "crossings", "crossing_vectors", "crossing_distance",
           "default_boundary", "has_default_boundary"]
