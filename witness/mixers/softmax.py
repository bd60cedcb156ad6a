"""What the softmax-attention kinds (full, block-sparse, sliding-window) share: their arrays, the softmax over the
keys a kind lets each query see -- in the executor, the MPFR reference and torch -- and their initialisation.

A kind differs only in which keys a query sees: `allowed_keys` for the kernel, `visible` for the reference and
for torch (docs/conventions.md §2).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.mixers.base import Projections, combine_heads, project, reference_add_heads

#: Attention scores are materialised for at most this many (batch x head x query x key) entries at a time.
SCORE_CHUNK_ELEMENTS = 1 << 22

#: The largest block size and window: dividing a block's key sum by B, done in float64 and rounded once, is then
#: correctly rounded in every `strict` format (|float64 error| <= 2^(E-53) is below 2^(E-P)/B, the least distance
#: of a quotient a/B from a rounding midpoint, for P <= 25 significant bits).
MAX_SPAN = 2**24


class SoftmaxHeads(Projections):
    """The arrays every softmax-attention kind shares (full, block-sparse, sliding-window): H heads of W_Q, W_K,
    W_V [H, d_model, d_head], W_O [H, d_head, d_model], their biases and b_O [d_model], checked and frozen."""

    array_names: ClassVar = Projections.projection_names

    def _freeze_heads(self) -> None:
        W_Q = np.asarray(self.W_Q)
        if W_Q.ndim != 3:
            raise ParameterError(f"{type(self).__name__}.W_Q must be [H, d_model, d_head], got shape {W_Q.shape}")
        H, d_model, d_head = W_Q.shape
        self._freeze({
            "W_Q": (H, d_model, d_head), "W_K": (H, d_model, d_head), "W_V": (H, d_model, d_head),
            "W_O": (H, d_head, d_model), "b_Q": (H, d_head), "b_K": (H, d_head), "b_V": (H, d_head),
            "b_O": (d_model,),
        })
        object.__setattr__(self, "causal", bool(self.causal))

    @classmethod
    def zeros_bias(cls, W_Q, W_K, W_V, W_O, **options):
        """The block with these weights, zero biases and the given options (`causal`, `block`, ...)."""
        H, d_model, d_head = np.shape(W_Q)
        zero = np.zeros((H, d_head))
        return cls(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O, b_Q=zero, b_K=zero, b_V=zero, b_O=np.zeros(d_model), **options)


def check_span(owner: str, name: str, value: Any, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{owner}.{name} must be an integer, got {value!r}")
    if not low <= int(value) <= MAX_SPAN:
        raise ParameterError(f"{owner}.{name} must lie in [{low}, 2^24], got {value}")
    return int(value)


# -- the executor -------------------------------------------------------------------------------------------------
def softmax_mix(block: SoftmaxHeads, q: np.ndarray, k: np.ndarray, v: np.ndarray, arith: Arithmetic, hooks,
                prefix: str, allowed_keys, from_query: int = 0) -> np.ndarray:
    """Softmax attention of the queries from_query .. n-1 of q over the keys `allowed_keys(start, stop)` lets
    queries start..stop-1 see (a bool mask broadcastable to [b, H, stop - start, n]), then W_O and b_O:
    [b, n - from_query, d_model]. Every score of those queries is computed, masked ones included (so a fixed format
    can overflow on them, as in the MPFR reference), then masked with -inf. Queries go in chunks of
    SCORE_CHUNK_ELEMENTS scores, so that long prompts fit in memory."""
    k_t = np.swapaxes(k, -1, -2)  # [b, H, d_head, n]
    batch, heads, length, _ = q.shape
    chunk = max(1, SCORE_CHUNK_ELEMENTS // max(1, batch * heads * length))
    mixed = np.empty_like(q[:, :, from_query:])
    patterns = []
    for start in range(from_query, length, chunk):
        stop = min(start + chunk, length)
        scores = arith.matmul(q[:, :, start:stop], k_t)  # [b, H, chunk, n]
        allowed = allowed_keys(start, stop)
        scores = np.where(allowed, scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        numerators = np.where(allowed, arith.exp(arith.sub(scores, top)), 0.0)
        pattern = arith.div(numerators, arith.sum(numerators, axis=-1))
        mixed[:, :, start - from_query:stop - from_query] = arith.matmul(pattern, v)
        if hooks is not None:
            patterns.append(pattern)
    if hooks is not None:
        hooks[f"{prefix}.hook_pattern"] = np.concatenate(patterns, axis=2)
    return combine_heads(mixed, block, arith, hooks, prefix)


def causal_keys(length: int, causal: bool):
    """allowed_keys for full attention: every key, or with `causal` the keys j <= i."""
    def allowed(start: int, stop: int) -> np.ndarray:
        if not causal:
            return np.ones((stop - start, length), bool)
        return np.arange(length)[None, :] <= np.arange(start, stop)[:, None]
    return allowed


def softmax_kernel(allowed_keys_of):
    """The kernel of a softmax kind whose `allowed_keys_of(block, q, k, arith, hooks, prefix, from_query)` gives
    its allowed_keys for the queries from_query .. n-1 (see `softmax_mix`): x [b, n, d_model] -> [b, n -
    from_query, d_model]. q, k and v are projected at every position (keys are read at every position); a kind's
    key selection computes with the queries from_query on only, like the scores."""
    def kernel(block: SoftmaxHeads, x: np.ndarray, arith: Arithmetic, hooks, prefix: str,
               from_query: int = 0) -> np.ndarray:
        q, k, v = project(block, x, arith)
        allowed = allowed_keys_of(block, q, k, arith, hooks, prefix, from_query)
        return softmax_mix(block, q, k, v, arith, hooks, prefix, allowed, from_query)
    return kernel


# -- the MPFR reference -------------------------------------------------------------------------------------------
def reference_causal(block, length: int) -> list[list[bool]]:
    """visible[i][j] for full attention: every key, or with `causal` the keys j <= i."""
    return [[j <= i or not block.causal for j in range(length)] for i in range(length)]


def softmax_reference(visible_keys):
    """The MPFR reference of a softmax kind whose `visible_keys(block, q, k, ops, dot, from_query)` gives
    visible[i][j], whether query i attends to key j, for the queries i >= from_query: scores for every such pair, the maximum over the visible ones subtracted, a correctly
    rounded exp, numerators summed in index order (hidden keys add an exact 0), divided, contracted with v; for the
    queries from_query .. n-1 (q, k and v at every position)."""
    def reference(block, x, ops, weight, dot, column, from_query=0):
        length, d_model = len(x), block.d_model
        W_Q, W_K, W_V, W_O = (weight(block.W_Q, "W_Q"), weight(block.W_K, "W_K"), weight(block.W_V, "W_V"),
                              weight(block.W_O, "W_O"))
        b_Q, b_K, b_V, b_O = (weight(block.b_Q, "b_Q"), weight(block.b_K, "b_K"), weight(block.b_V, "b_V"),
                              weight(block.b_O, "b_O"))
        heads_out = []
        for h in range(block.n_heads):
            def project_head(W, b):
                return [[ops.add(dot(x[i], column(W[h], e), "attention"), b[h][e], "attention")
                         for e in range(block.d_head)] for i in range(length)]

            q, k, v = project_head(W_Q, b_Q), project_head(W_K, b_K), project_head(W_V, b_V)
            visible = visible_keys(block, q, k, ops, dot, from_query)
            mixed = []
            for i in range(from_query, length):
                scores = [dot(q[i], k[j], "scores") for j in range(length)]
                allowed = visible[i]
                top = _max_or_nan([s for s, ok in zip(scores, allowed) if ok], ops)
                zero = ops.value(0.0)
                numerators = [ops.exp(ops.sub(s, top, "softmax"), "softmax") if ok else zero
                              for s, ok in zip(scores, allowed)]
                total = numerators[0]
                for term in numerators[1:]:
                    total = ops.add(total, term, "softmax")
                pattern = [ops.div(term, total, "softmax") for term in numerators]
                mixed.append([dot(pattern, column(v, e), "attention") for e in range(block.d_head)])
            heads_out.append([[dot(row, column(W_O[h], c), "attention") for c in range(d_model)] for row in mixed])
        return reference_add_heads(heads_out, b_O, ops, "attention")
    return reference


def _max_or_nan(values, ops):
    """The maximum, or NaN if any value is NaN (numpy's max)."""
    for value in values:
        if ops.is_nan(value):
            return value
    return max(values)


# -- torch --------------------------------------------------------------------------------------------------------
def torch_causal(module, q, k):
    """Which keys each query sees in torch, bool [query, key]: all, or with `causal` j <= i."""
    import torch

    length = q.shape[-2]
    allowed = torch.ones(length, length, dtype=torch.bool, device=q.device)
    return torch.tril(allowed) if module.settings["causal"] else allowed


def softmax_torch(visible):
    """The torch forward pass of a softmax kind whose `visible(module, q, k)` says which keys each query sees (bool
    broadcastable to [batch, H, query, key]): step for step as the executor's kernel does it in float64.

    A module whose `fused_softmax` attribute is set (the trainer's, `lab.train.training_module`) takes the pattern
    from `torch.softmax` over the masked scores instead: one kernel forward and back, about a quarter of a training
    step cheaper, but its kernel exponentiates and normalises in its own way, so it agrees with the executor
    only to rounding; every module exported for comparison with the executor leaves it unset."""
    def pattern(module, x):
        """Attention weights [batch, H, query, key]."""
        import torch

        x_heads = x[:, None]
        q = torch.matmul(x_heads, module.W_Q) + module.b_Q[:, None, :]
        k = torch.matmul(x_heads, module.W_K) + module.b_K[:, None, :]
        scores = torch.matmul(q, k.transpose(-1, -2))
        allowed = visible(module, q, k)
        scores = scores.masked_fill(~allowed, -math.inf)
        if getattr(module, "fused_softmax", False):
            return torch.softmax(scores, dim=-1)
        top = scores.amax(dim=-1, keepdim=True)
        numerators = torch.where(allowed, torch.exp(scores - top), torch.zeros((), dtype=x.dtype))
        return numerators / numerators.sum(dim=-1, keepdim=True)

    def forward(module, x):
        import torch

        v = torch.matmul(x[:, None], module.W_V) + module.b_V[:, None, :]
        head_out = torch.matmul(torch.matmul(pattern(module, x), v), module.W_O)  # [batch, H, n, d_model]
        return head_out.sum(dim=1) + module.b_O
    return forward


# -- the trainer's initialisation ---------------------------------------------------------------------------------
def initial_softmax(block: type, options: dict[str, Any], *, causal: bool, H: int, d_model: int, d_head: int,
                    n_ctx: int, resid_scale: float, normal):
    """W_Q and W_K at gain score_gain each: the usual 1 / sqrt(d_head) score temperature, folded into the
    initialisation because the IR's attention has none. Without it the scores of residual entries of rms
    `lab.train.EMBED_RESID_SCALE` have std about 2 sqrt(d_head) (11 at d_head 32), the softmax starts
    saturated and its gradient vanishes. Biases zero."""
    d, k = d_model, d_head
    score_gain = k ** -0.25
    return block(score_gain * normal(d, H, d, k), score_gain * normal(d, H, d, k), normal(d, H, d, k),
                 normal(H * k, H, k, d),
                 np.zeros((H, k)), np.zeros((H, k)), np.zeros((H, k)), np.zeros(d), causal=causal, **options)


__all__ = ["SoftmaxHeads", "MAX_SPAN", "SCORE_CHUNK_ELEMENTS", "check_span", "softmax_mix", "causal_keys",
           "softmax_kernel", "reference_causal", "softmax_reference", "torch_causal", "softmax_torch",
           "initial_softmax"]
