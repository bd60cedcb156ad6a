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

Attention is computed in chunks of query positions so that long prompts fit in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from witness.arith import FLOAT64, Arithmetic
from witness.errors import InputError
from witness.ir import MLP, Attention, Network

#: Attention scores are materialised for at most this many (batch x head x query x key) entries at a time.
SCORE_CHUNK_ELEMENTS = 1 << 22


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
    """Execute `network` on `tokens` (one sequence or a batch) under `arith`."""
    batch = check_network_tokens(network, tokens)
    length = batch.shape[1]
    hooks: dict[str, np.ndarray] | None = {} if trace else None

    W_E = arith.weights(network.embedding.W_E)
    W_pos = arith.weights(network.embedding.W_pos)
    x = arith.store(arith.add(W_E[batch], W_pos[:length]))
    _record(hooks, "hook_embed", x)
    for l, layer in enumerate(network.layers):
        mix = MIXER_KERNELS[type(layer.mixer)]
        x = arith.store(arith.add(x, mix(layer.mixer, x, arith, hooks, f"blocks.{l}.attn")))
        _record(hooks, f"blocks.{l}.hook_resid_mid", x)
        if layer.mlp is not None:
            x = arith.store(arith.add(x, _mlp(layer.mlp, x, arith)))
        _record(hooks, f"blocks.{l}.hook_resid_post", x)

    read = network.read_positions(length)
    W_U = arith.weights(network.readout.W_U)
    b_U = arith.weights(network.readout.b_U)
    logits = arith.add(arith.matmul(x[:, list(read)], W_U), b_U)
    return Outputs(logits, unique_argmax(logits), read, hooks)


def unique_argmax(logits: np.ndarray) -> np.ndarray:
    """Argmax over the last axis, or -1 where the maximum is attained more than once (a tie is a failure) or any
    logit is NaN (numpy's argmax would pick the NaN, which could happen to be the right answer)."""
    best = logits.argmax(axis=-1)
    top = np.take_along_axis(logits, best[..., None], axis=-1)
    ties = (logits == top).sum(axis=-1) > 1
    return np.where(ties | np.isnan(logits).any(axis=-1), -1, best)


def _record(hooks: dict[str, np.ndarray] | None, name: str, value: np.ndarray) -> None:
    if hooks is not None:
        hooks[name] = value


def _attention(block: Attention, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """Softmax attention output for every position, x [b, n, d_model] -> [b, n, d_model]."""
    W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O = (arith.weights(a) for a in block.arrays().values())
    x_heads = x[:, None]  # [b, 1, n, d_model], broadcast against [H, d_model, d_head]
    q = arith.add(arith.matmul(x_heads, W_Q), b_Q[:, None, :])  # [b, H, n, d_head]
    k = arith.add(arith.matmul(x_heads, W_K), b_K[:, None, :])
    v = arith.add(arith.matmul(x_heads, W_V), b_V[:, None, :])
    k_t = np.swapaxes(k, -1, -2)  # [b, H, d_head, n]
    batch, heads, length, _ = q.shape
    chunk = max(1, SCORE_CHUNK_ELEMENTS // max(1, batch * heads * length))
    mixed = np.empty_like(q)
    patterns = []
    for start in range(0, length, chunk):
        stop = min(start + chunk, length)
        scores = arith.matmul(q[:, :, start:stop], k_t)  # [b, H, chunk, n]
        allowed = np.ones((stop - start, length), bool)
        if block.causal:
            allowed = np.arange(length)[None, :] <= np.arange(start, stop)[:, None]
        scores = np.where(allowed, scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        numerators = np.where(allowed, arith.exp(arith.sub(scores, top)), 0.0)
        pattern = arith.div(numerators, arith.sum(numerators, axis=-1))
        mixed[:, :, start:stop] = arith.matmul(pattern, v)
        if hooks is not None:
            patterns.append(pattern)
    if hooks is not None:
        hooks[f"{prefix}.hook_pattern"] = np.concatenate(patterns, axis=2)
    head_out = arith.store(arith.matmul(mixed, W_O))  # [b, H, n, d_model]
    if hooks is not None:
        hooks[f"{prefix}.hook_result"] = head_out
    return arith.store(arith.add(arith.sum(head_out, axis=1)[:, 0], b_O))


#: IR mixer class -> kernel(block, x [b, n, d_model], arith, hooks, prefix) -> [b, n, d_model].
MIXER_KERNELS = {Attention: _attention}


def _mlp(block: MLP, x: np.ndarray, arith: Arithmetic) -> np.ndarray:
    W_in, b_in, W_out, b_out = (arith.weights(a) for a in block.arrays().values())
    hidden = arith.relu(arith.add(arith.matmul(x, W_in), b_in))
    return arith.store(arith.add(arith.matmul(hidden, W_out), b_out))
