"""The one executor: runs any IR network on a batch of token sequences under an `Arithmetic`.

Every value is produced by an arithmetic step of `arith` (see `witness.arith`), in the order a GPT-2-style
forward pass performs them:

    x   = store(W_E[tokens] + W_pos)                                    hook_embed
    per layer l:
      q,k,v  = x W_{Q,K,V} + b_{Q,K,V}        per head
      scores = q k^T  (no hidden scale), causal mask
      pattern = exp(scores - max) / sum(exp(scores - max))             blocks.l.attn.hook_pattern
      head_out = store((pattern v) W_O)       per head
      x = store(x + store(sum_h head_out + b_O))                        blocks.l.hook_resid_mid
      x = store(x + store(relu(x W_in + b_in) W_out + b_out))           blocks.l.hook_resid_post
    logits = x[read] W_U + b_U ; prediction = the unique argmax, -1 on a tie

The last layer of an untraced run computes only from the first read position on (`first_computed`,
docs/conventions.md §3): with `read = last`, one query's attention, one residual row and one MLP row.

The mixing line of each layer is its kind's kernel (`witness.mixers.MIXERS[kind].kernel`, in the kind's module).
Softmax attention (`witness.mixers.softmax`) is computed in chunks of query positions so that long prompts fit in
memory. The sparse kinds change only the mask: (B,k)-block-sparse attention first forms each block's summary (its
keys summed in index order, then divided by the block's length: `witness.mixers.block_sparse.block_summaries`),
the block scores q . summary (an ordered dot product), and the kept blocks (`select_blocks`), traced as
hook_block_summary, hook_block_scores and hook_selected_blocks; sliding window attention masks keys outside the
window. Every score is still computed, then masked. A recurrent mixer (linear attention, the decay and delta-rule
forms, the general RNN) replaces the attention lines by its recurrence, run position by position from a zero state
(its order under `strict` is written in `witness.mixers.matrix_state`), and then the same head_out and b_O steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from witness.arith import FLOAT64, Arithmetic
from witness.errors import InputError
from witness.ir import MLP, Network
from witness.mixers import MIXERS
from witness.mixers.base import record
from witness.mixers.softmax import SCORE_CHUNK_ELEMENTS
from witness.resources import require_memory


@dataclass(frozen=True, eq=False)
class Outputs:
    """What a run returns. `logits` [batch, n_read, d_vocab_out]; `predictions` [batch, n_read] (-1 = tie);
    `trace` maps TransformerLens hook names to arrays when the run was traced, else None."""

    logits: np.ndarray
    predictions: np.ndarray
    read_positions: tuple[int, ...]
    trace: dict[str, np.ndarray] | None


def check_network_tokens(network: Network, tokens: Any) -> np.ndarray:
    """Tokens as an int64 batch [batch, n] that this network can embed; an InputError otherwise."""
    batch = np.asarray(tokens)
    if batch.ndim == 1:
        batch = batch[None, :]
    if batch.ndim != 2 or batch.shape[1] == 0:
        raise InputError(f"tokens must be one sequence or a batch of sequences, got shape {np.shape(tokens)}")
    if batch.size and not np.issubdtype(batch.dtype, np.integer):
        raise InputError(f"tokens must be integers, got dtype {batch.dtype}")
    if batch.shape[1] > network.n_ctx:
        raise InputError(f"{batch.shape[1]} tokens exceed the network's context length {network.n_ctx}")
    if batch.size and (batch.min() < 0 or batch.max() >= network.d_vocab):
        raise InputError(f"token ids must lie in [0, {network.d_vocab}), got range [{batch.min()}, {batch.max()}]")
    return batch.astype(np.int64)


def run(network: Network, tokens: Any, arith: Arithmetic = FLOAT64, trace: bool = False) -> Outputs:
    """Execute `network` on `tokens` (one sequence or a batch) under `arith`; refused (`TooLarge`) before anything
    is allocated when its memory estimate (`run_bytes`) exceeds what the machine has."""
    batch = check_network_tokens(network, tokens)
    estimate = run_bytes(network, *batch.shape, traced=trace)
    if estimate > CHECKED_ABOVE:
        require_memory(estimate, f"running {batch.shape[0]} inputs of {batch.shape[1]} tokens through a network "
                                 f"of d_model {network.d_model}")
    length = batch.shape[1]
    hooks: dict[str, np.ndarray] | None = {} if trace else None

    W_E = arith.weights(network.embedding.W_E)
    W_pos = arith.weights(network.embedding.W_pos)
    x = arith.store(arith.add(W_E[batch], W_pos[:length]))
    record(hooks, "hook_embed", x)
    read = network.read_positions(length)
    for l, layer in enumerate(network.layers):
        first = first_computed(network, l, read, traced=trace)
        mixer = MIXERS[layer.mixer.kind]
        prefix = f"blocks.{l}.attn"
        if mixer.from_query and first:
            mixed = mixer.kernel(layer.mixer, x, arith, hooks, prefix, from_query=first)
        else:
            mixed = mixer.kernel(layer.mixer, x, arith, hooks, prefix)[:, first:]
        x = arith.store(arith.add(x[:, first:], mixed))
        record(hooks, f"blocks.{l}.hook_resid_mid", x)
        if layer.mlp is not None:
            x = arith.store(arith.add(x, _mlp(layer.mlp, x, arith)))
        record(hooks, f"blocks.{l}.hook_resid_post", x)

    W_U = arith.weights(network.readout.W_U)
    b_U = arith.weights(network.readout.b_U)
    logits = arith.add(arith.matmul(x[:, [i - (length - x.shape[1]) for i in read]], W_U), b_U)
    return Outputs(logits, unique_argmax(logits), read, hooks)


#: Arrays of the residual stream's size [batch, n, d_model] a run holds at once (x, a block's output, q, k, v, the
#: mixed values, their rounded copies), and the score chunk's share (`witness.mixers.softmax`), for `run_bytes`.
LIVE_STREAMS = 8
SCORE_BYTES = 4 * 8 * SCORE_CHUNK_ELEMENTS
#: Estimates below this are not checked (reading the machine's free memory on every small run costs more).
CHECKED_ABOVE = 1 << 28


def run_bytes(network: Network, batch: int, length: int, traced: bool = False) -> int:
    """Bytes a run holds at its peak, about: every array widened to float64 (`Arithmetic.weights`), LIVE_STREAMS
    residual-sized float64 arrays, the scores of a chunk, and a traced run's hooks (per layer four residual-sized
    arrays and the attention pattern)."""
    weights = 8 * sum(array.size for array in network.state_dict().values())
    width = max([network.d_model] + [layer.mixer.n_heads * layer.mixer.d_head for layer in network.layers]
                + [layer.mlp.d_mlp for layer in network.layers if layer.mlp is not None])
    streams = 8 * LIVE_STREAMS * batch * length * width
    hooks = 0
    if traced:
        heads = max([1] + [layer.mixer.n_heads for layer in network.layers])
        hooks = 8 * len(network.layers) * batch * length * (4 * width + heads * length)
    return weights + streams + SCORE_BYTES + hooks


def first_computed(network: Network, layer: int, read: tuple[int, ...], traced: bool) -> int:
    """The first position whose output layer `layer` computes (docs/conventions.md §3): 0, except in the last layer
    of an untraced run, which computes only from the first position the readout reads (nothing after it reads the
    others; a traced run records every position). The MPFR reference (`tests.oracles.mpfr_reference`) computes the same."""
    return read[0] if layer == len(network.layers) - 1 and not traced else 0


def unique_argmax(logits: np.ndarray) -> np.ndarray:
    """Argmax over the last axis, or -1 where the maximum is attained more than once (a tie is a failure) or any
    logit is NaN (numpy's argmax would pick the NaN, which could happen to be the right answer)."""
    best = logits.argmax(axis=-1)
    top = np.take_along_axis(logits, best[..., None], axis=-1)
    ties = (logits == top).sum(axis=-1) > 1
    return np.where(ties | np.isnan(logits).any(axis=-1), -1, best)


def _mlp(block: MLP, x: np.ndarray, arith: Arithmetic) -> np.ndarray:
    W_in, b_in, W_out, b_out = (arith.weights(a) for a in block.arrays().values())
    hidden = arith.relu(arith.add(arith.matmul(x, W_in), b_in))
    return arith.store(arith.add(arith.matmul(hidden, W_out), b_out))


def logit_margins(logits: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """logits [batch, n_read, vocab], answers [batch, n_read] -> per input, the least over its read positions of
    the right logit minus the largest other one. Positive exactly where the prediction (the unique argmax) is right
    at every read position: a tie gives 0, and a NaN logit or an undefined difference (inf - inf) gives -inf, as
    they make the prediction wrong."""
    logits = np.asarray(logits, dtype=np.float64)
    right = np.take_along_axis(logits, answers[..., None], axis=-1)[..., 0]
    others = logits.copy()
    np.put_along_axis(others, answers[..., None], -np.inf, axis=-1)
    with np.errstate(invalid="ignore"):
        per_position = right - others.max(axis=-1)
    per_position[np.isnan(per_position) | np.isnan(logits).any(axis=-1)] = -np.inf
    return per_position.min(axis=1)
