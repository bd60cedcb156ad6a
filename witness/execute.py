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

Attention is computed in chunks of query positions so that long prompts fit in memory. The sparse kinds change
only the mask: (B,k)-block-sparse attention first forms each block's summary (its keys summed in index order, then
divided by the block's length: `block_summaries`), the block scores q . summary (an ordered dot product), and the
kept blocks (`select_blocks`), traced as hook_block_summary, hook_block_scores and hook_selected_blocks; sliding
window attention masks keys outside the window. Every score is still computed, then masked. A recurrent mixer
(linear attention, the decay and delta-rule forms, the general RNN) replaces the attention lines by its recurrence,
run position by position from a zero state (its order under `strict` is written above its kernels), and then
the same head_out and b_O steps.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from witness.arith import FLOAT64, Arithmetic
from witness.errors import InputError
from witness.ir import (GLA, MLP, RNN, Attention, BlockSparseAttention, DecayAttention, DeltaNet, GatedDeltaNet,
                        LinearAttention, Mamba2, Network, RetNet, SlidingWindowAttention, SoftmaxHeads)

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


def _combine_heads(mixed: np.ndarray, block, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """Each head's output [b, H, n, d_head or d_v] through its W_O, heads added in order, then b_O: [b, n, d_model]."""
    head_out = arith.store(arith.matmul(mixed, arith.weights(block.W_O)))  # [b, H, n, d_model]
    _record(hooks, f"{prefix}.hook_result", head_out)
    return arith.store(arith.add(arith.sum(head_out, axis=1)[:, 0], arith.weights(block.b_O)))


def project(block: SoftmaxHeads, x: np.ndarray, arith: Arithmetic) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v [b, H, n, d_head] of a softmax-attention block, x [b, n, d_model]."""
    W_Q, W_K, W_V, b_Q, b_K, b_V = (arith.weights(getattr(block, name))
                                    for name in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"))
    x_heads = x[:, None]  # [b, 1, n, d_model], broadcast against [H, d_model, d_head]
    return tuple(arith.add(arith.matmul(x_heads, W), b[:, None, :]) for W, b in ((W_Q, b_Q), (W_K, b_K), (W_V, b_V)))


def _softmax_mix(block: SoftmaxHeads, q: np.ndarray, k: np.ndarray, v: np.ndarray, arith: Arithmetic, hooks,
                 prefix: str, allowed_keys) -> np.ndarray:
    """Softmax attention of q over the keys `allowed_keys(start, stop)` lets queries start..stop-1 see (a bool mask
    broadcastable to [b, H, stop - start, n]), then W_O and b_O: [b, n, d_model]. Every score is computed, masked
    ones included (so a fixed format can overflow on them, as in the MPFR reference), then masked with -inf."""
    k_t = np.swapaxes(k, -1, -2)  # [b, H, d_head, n]
    batch, heads, length, _ = q.shape
    chunk = max(1, SCORE_CHUNK_ELEMENTS // max(1, batch * heads * length))
    mixed = np.empty_like(q)
    patterns = []
    for start in range(0, length, chunk):
        stop = min(start + chunk, length)
        scores = arith.matmul(q[:, :, start:stop], k_t)  # [b, H, chunk, n]
        allowed = allowed_keys(start, stop)
        scores = np.where(allowed, scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        numerators = np.where(allowed, arith.exp(arith.sub(scores, top)), 0.0)
        pattern = arith.div(numerators, arith.sum(numerators, axis=-1))
        mixed[:, :, start:stop] = arith.matmul(pattern, v)
        if hooks is not None:
            patterns.append(pattern)
    if hooks is not None:
        hooks[f"{prefix}.hook_pattern"] = np.concatenate(patterns, axis=2)
    return _combine_heads(mixed, block, arith, hooks, prefix)


def _causal_keys(length: int, causal: bool):
    """allowed_keys for full attention: every key, or with `causal` the keys j <= i."""
    def allowed(start: int, stop: int) -> np.ndarray:
        if not causal:
            return np.ones((stop - start, length), bool)
        return np.arange(length)[None, :] <= np.arange(start, stop)[:, None]
    return allowed


def _attention(block: Attention, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """Softmax attention output for every position, x [b, n, d_model] -> [b, n, d_model]."""
    q, k, v = project(block, x, arith)
    return _softmax_mix(block, q, k, v, arith, hooks, prefix, _causal_keys(x.shape[1], block.causal))


def block_summaries(k: np.ndarray, size: int, arith: Arithmetic) -> np.ndarray:
    """Per head, the mean of each block's keys: k [..., n, d_head] -> [..., ceil(n / size), d_head].

    Under `strict` each mean is the sum of the block's keys in index order, one rounding per add, then one rounded
    division by the block's length (an exact integer: `witness.ir.MAX_SPAN` says why float64 then rounding is
    correctly rounded). The last block is shorter when size does not divide n, and divides by its own length."""
    length = k.shape[-2]
    whole = length // size
    parts = []
    if whole:
        grouped = k[..., :whole * size, :].reshape(*k.shape[:-2], whole, size, k.shape[-1])
        parts.append(arith.div(arith.sum(grouped, axis=-2)[..., 0, :], np.float64(size)))
    if length % size:
        parts.append(arith.div(arith.sum(k[..., whole * size:, :], axis=-2), np.float64(length % size)))
    return np.concatenate(parts, axis=-2)


def select_blocks(block_scores: np.ndarray, size: int, k: int, causal: bool) -> np.ndarray:
    """Which blocks each query keeps, block_scores [..., n, n_blocks] -> bool [..., n, n_blocks]: its own block
    i // size, plus the k best candidate blocks (all others; with `causal`, those before its own), best first by
    score, ties to the lower index, NaN scores last. Fewer than k candidates: all of them."""
    length, n_blocks = block_scores.shape[-2:]
    own = np.arange(length) // size
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


def _block_sparse_attention(block: BlockSparseAttention, x: np.ndarray, arith: Arithmetic, hooks,
                            prefix: str) -> np.ndarray:
    """(B,k)-block-sparse attention (see `witness.ir.BlockSparseAttention`), x [b, n, d_model] -> [b, n, d_model].
    Traced: hook_block_summary [b, H, n_blocks, d_head], hook_block_scores and hook_selected_blocks
    [b, H, n, n_blocks], then hook_pattern (zero off the kept tokens) and hook_result as for full attention."""
    q, k, v = project(block, x, arith)
    length = x.shape[1]
    summaries = block_summaries(k, block.block, arith)
    block_scores = arith.matmul(q, np.swapaxes(summaries, -1, -2))  # [b, H, n, n_blocks]
    selected = select_blocks(block_scores, block.block, block.k, block.causal)
    if hooks is not None:
        hooks.update({f"{prefix}.hook_block_summary": summaries, f"{prefix}.hook_block_scores": block_scores,
                      f"{prefix}.hook_selected_blocks": selected})
    key_block = np.arange(length) // block.block
    causal = _causal_keys(length, block.causal)

    def allowed(start: int, stop: int) -> np.ndarray:
        return selected[:, :, start:stop][..., key_block] & causal(start, stop)

    return _softmax_mix(block, q, k, v, arith, hooks, prefix, allowed)


def _sliding_window_attention(block: SlidingWindowAttention, x: np.ndarray, arith: Arithmetic, hooks,
                              prefix: str) -> np.ndarray:
    """Sliding-window attention (see `witness.ir.SlidingWindowAttention`), x [b, n, d_model] -> [b, n, d_model]."""
    q, k, v = project(block, x, arith)
    length = x.shape[1]

    def allowed(start: int, stop: int) -> np.ndarray:
        offset = np.arange(start, stop)[:, None] - np.arange(length)[None, :]  # i - j
        return (offset >= 0) & (offset < block.window) if block.causal else np.abs(offset) < block.window

    return _softmax_mix(block, q, k, v, arith, hooks, prefix, allowed)


# -- recurrent mixers (see the classes in `witness.ir`) -----------------------------------------------------------
# Each kernel runs its recurrence position by position from a zero state, vectorised over the batch, the heads and
# the state entries, every step through `arith`. Under `strict` the operation order is:
#   projections and gate inputs u = x W + b: a dot product in index order, then the bias add;
#   sigmoid(u) = 1 / (1 + exp(0 - u)), one rounding per sub, exp, add and div;
#   outer products k v^T: one rounded multiply per entry;
#   state updates entry by entry, e.g. S[i, j] <- round(round(alpha_i S[i, j]) + round(k_i v_j)) (the kernel's
#   comment gives each form's expression; parentheses fix the order);
#   read-outs S^T q (and the delta rule's S^T k, the normaliser's z . q): sums over i in index order;
#   the state is stored (`arith.store`) after every step: rounded to the format under `theory` (the state is what
#   leaves the step) and under `mixed` (held in the format), a no-op under `strict`.
# The MPFR reference (`witness.arith.mpfr`) performs the same steps one scalar at a time.


def _ieee(kernel):
    """Run a recurrent kernel with numpy's floating-point warnings off: a state that overflows to inf, or a zero
    normaliser giving inf or NaN, is the IEEE result the recurrence means (and a fixed format raises regardless)."""
    @functools.wraps(kernel)
    def quiet(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return kernel(*args, **kwargs)
    return quiet


def _heads_affine(x: np.ndarray, W: np.ndarray, b: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """x W[h] + b[h] for every head: x [b, n, d_model], W [H, d_model, width] -> [b, H, n, width]."""
    return arith.add(arith.matmul(x[:, None], arith.weights(W)), arith.weights(b)[:, None, :])


def _sigmoid(u: np.ndarray, arith: Arithmetic) -> np.ndarray:
    return arith.div(1.0, arith.add(1.0, arith.exp(arith.sub(0.0, u))))


def _outer(a: np.ndarray, b: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """a b^T per batch entry and head: a [..., d_k], b [..., d_v] -> [..., d_k, d_v]."""
    return arith.mul(a[..., :, None], b[..., None, :])


def _read(q: np.ndarray, S: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """S^T q: q [..., d_k], S [..., d_k, d_v] -> [..., d_v], each entry summed over i in index order."""
    return arith.matmul(q[..., None, :], S)[..., 0, :]


def _trace_steps(hooks, prefix: str, **steps: list[np.ndarray]) -> None:
    """Record per-position values (lists over t of [b, H, ...]) as hooks [b, H, n, ...], e.g. hook_state."""
    if hooks is not None:
        for name, values in steps.items():
            hooks[f"{prefix}.hook_{name}"] = np.stack(values, axis=2)


@_ieee
def _linear_attention(block: LinearAttention, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """S_t = S_{t-1} + phi(k_t) v_t^T; o_t = S_t^T phi(q_t), or / (z_t . phi(q_t)) with z_t = z_{t-1} + phi(k_t).
    Traced: hook_state [b, H, n, d_k, d_v] (S_t), hook_normalizer [b, H, n, d_k] (z_t), hook_result."""
    q, k, v = project(block, x, arith)
    if block.feature_map == "relu":
        q, k = arith.relu(q), arith.relu(k)
    batch, heads, length, d_k = k.shape
    S = np.zeros((batch, heads, d_k, v.shape[-1]))
    z = np.zeros((batch, heads, d_k))
    outputs, states, normalizers = [], [], []
    for t in range(length):
        S = arith.store(arith.add(S, _outer(k[:, :, t], v[:, :, t], arith)))  # S[i,j] + (k_i v_j)
        o = _read(q[:, :, t], S, arith)
        if block.normalize:
            z = arith.store(arith.add(z, k[:, :, t]))  # z_i + k_i
            o = arith.div(o, _read(q[:, :, t], z[..., None], arith))  # o_j / (sum_i q_i z_i)
            normalizers.append(z)
        outputs.append(o)
        states.append(S)
    _trace_steps(hooks, prefix, state=states, **({"normalizer": normalizers} if block.normalize else {}))
    return _combine_heads(np.stack(outputs, axis=2), block, arith, hooks, prefix)


@_ieee
def _decay_attention(block: DecayAttention, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """S_t = diag(alpha_t) S_{t-1} + k_t v_t^T, alpha_t = gate(x_t W_alpha + b_alpha) (one per head or per row);
    o_t = S_t^T q_t. Traced: hook_alpha [b, H, n, 1 or d_k], hook_state [b, H, n, d_k, d_v], hook_result."""
    q, k, v = project(block, x, arith)
    alpha = _heads_affine(x, block.W_alpha, block.b_alpha, arith)
    if block.gate == "sigmoid":
        alpha = _sigmoid(alpha, arith)
    batch, heads, length, d_k = k.shape
    S = np.zeros((batch, heads, d_k, v.shape[-1]))
    outputs, states = [], []
    for t in range(length):
        decayed = arith.mul(alpha[:, :, t, :, None], S)  # alpha_i S[i,j]; a scalar alpha broadcasts over i
        S = arith.store(arith.add(decayed, _outer(k[:, :, t], v[:, :, t], arith)))  # (alpha_i S[i,j]) + (k_i v_j)
        outputs.append(_read(q[:, :, t], S, arith))
        states.append(S)
    _trace_steps(hooks, prefix, state=states)
    _record(hooks, f"{prefix}.hook_alpha", alpha)
    return _combine_heads(np.stack(outputs, axis=2), block, arith, hooks, prefix)


@_ieee
def _delta_rule(block: DeltaNet | GatedDeltaNet, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """The delta rule, S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T (alpha_t = 1 for DeltaNet),
    computed as: r = S_{t-1}^T k_t, then S[i,j] <- alpha (S[i,j] - (beta k_i) r_j) + (beta k_i) v_j; o_t = S_t^T q_t.
    Traced: hook_beta (and hook_alpha) [b, H, n, 1], hook_state [b, H, n, d_k, d_v], hook_result."""
    q, k, v = project(block, x, arith)
    beta = _sigmoid(_heads_affine(x, block.W_beta, block.b_beta, arith), arith)
    gated = isinstance(block, GatedDeltaNet)
    alpha = _sigmoid(_heads_affine(x, block.W_alpha, block.b_alpha, arith), arith) if gated else None
    batch, heads, length, d_k = k.shape
    S = np.zeros((batch, heads, d_k, v.shape[-1]))
    outputs, states = [], []
    for t in range(length):
        beta_k = arith.mul(beta[:, :, t], k[:, :, t])  # beta k_i  [b, H, d_k]
        retrieved = _read(k[:, :, t], S, arith)  # r_j = sum_i k_i S[i,j]
        erased = arith.sub(S, _outer(beta_k, retrieved, arith))  # S[i,j] - (beta k_i) r_j
        if gated:
            erased = arith.mul(alpha[:, :, t, :, None], erased)  # alpha (...)
        S = arith.store(arith.add(erased, _outer(beta_k, v[:, :, t], arith)))  # (...) + (beta k_i) v_j
        outputs.append(_read(q[:, :, t], S, arith))
        states.append(S)
    _trace_steps(hooks, prefix, state=states)
    _record(hooks, f"{prefix}.hook_beta", beta)
    if gated:
        _record(hooks, f"{prefix}.hook_alpha", alpha)
    return _combine_heads(np.stack(outputs, axis=2), block, arith, hooks, prefix)


@_ieee
def _rnn(block: RNN, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """s_t = act(s_{t-1} W_s + (x_t W_x + b_x)) per head, output s_t W_O. Traced: hook_state [b, H, n, d_state]."""
    inputs = _heads_affine(x, block.W_x, block.b_x, arith)  # [b, H, n, d_state]
    W_s = arith.weights(block.W_s)
    s = np.zeros(inputs.shape[:2] + inputs.shape[3:])
    states = []
    for t in range(x.shape[1]):
        pre = arith.add(_read(s, W_s, arith), inputs[:, :, t])  # (sum_i s_i W_s[i,c]) + u_c
        s = arith.store(arith.relu(pre) if block.activation == "relu" else pre)
        states.append(s)
    _trace_steps(hooks, prefix, state=states)
    return _combine_heads(np.stack(states, axis=2), block, arith, hooks, prefix)


#: IR mixer class -> kernel(block, x [b, n, d_model], arith, hooks, prefix) -> [b, n, d_model].
MIXER_KERNELS = {Attention: _attention, BlockSparseAttention: _block_sparse_attention,
                 SlidingWindowAttention: _sliding_window_attention,
                 LinearAttention: _linear_attention, DecayAttention: _decay_attention, RetNet: _decay_attention,
                 GLA: _decay_attention, Mamba2: _decay_attention, DeltaNet: _delta_rule, GatedDeltaNet: _delta_rule,
                 RNN: _rnn}


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
