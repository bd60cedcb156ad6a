"""The torch bridge: export any IR network to an `nn.Module` and import such a module back, bit for bit.

    module = witness.torch.to_module(network)          # float64 by default
    logits = module(torch.as_tensor(tokens))            # [batch, n, d_vocab_out], every position
    same = witness.torch.from_module(module)            # np.array_equal on every array

The module's parameters carry the IR's TransformerLens names (`embed.W_E`, `blocks.0.attn.W_Q`, `unembed.W_U`,
...), so `module.state_dict()` and `Network.state_dict()` have the same keys and shapes. Its forward pass performs
the executor's float64 steps in the executor's order (see `witness.execute`); what can still differ is the order
inside each dot product, which numpy's and torch's BLAS choose for themselves. The exception, for speed: the
matrix-state recurrent layers run chunk by chunk by default (`RecurrentModule`, `to_module(..., parallel=False)`
for the step-by-step form), which sums in another order and so agrees with the executor to float64 rounding.

`to_transformer_lens` builds a TransformerLens 4.x `TransformerBridge` (offline, from a config) for softmax-only
networks, so `run_with_cache`, attention patterns and hooks work on compiled weights.

The core never imports this module; torch (and transformer-lens, for `to_transformer_lens`) are optional extras.
Adding a block kind to the IR adds one module class here and one entry in `BLOCK_MODULES`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

try:
    import torch
    from torch import nn
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("witness.torch needs torch: pip install 'witness[torch]'") from exc

from witness.errors import ParameterError
from witness.execute import select_blocks
from witness.ir import (MLP, RECURRENT_MIXERS, Attention, Basis, BlockSparseAttention, Meta, Network,
                        SlidingWindowAttention, network_from_state)


def _parameter(array: np.ndarray, dtype: torch.dtype) -> nn.Parameter:
    return nn.Parameter(torch.tensor(np.asarray(array), dtype=dtype))


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    """A float64 copy; float32 and float64 values convert exactly."""
    return tensor.detach().cpu().to(torch.float64).numpy()


class ArrayModule(nn.Module):
    """A module whose parameters are exactly the given arrays, under the IR's names (`W_E`, `W_Q`, ...)."""

    def __init__(self, arrays: dict[str, np.ndarray], dtype: torch.dtype) -> None:
        super().__init__()
        for name, array in arrays.items():
            self.register_parameter(name, _parameter(array, dtype))


class AttentionModule(ArrayModule):
    """Softmax attention, step for step as `witness.execute._attention` does it in float64."""

    def __init__(self, block: Attention, dtype: torch.dtype) -> None:
        super().__init__(block.arrays(), dtype)
        self.causal = block.causal

    def structure(self) -> dict[str, Any]:
        return {"mixer": Attention.kind, "causal": self.causal}

    def pattern(self, x: torch.Tensor) -> torch.Tensor:
        """Attention weights [batch, H, query, key]."""
        x_heads = x[:, None]
        q = torch.matmul(x_heads, self.W_Q) + self.b_Q[:, None, :]
        k = torch.matmul(x_heads, self.W_K) + self.b_K[:, None, :]
        scores = torch.matmul(q, k.transpose(-1, -2))
        allowed = self.visible(q, k)
        scores = scores.masked_fill(~allowed, -math.inf)
        top = scores.amax(dim=-1, keepdim=True)
        numerators = torch.where(allowed, torch.exp(scores - top), torch.zeros((), dtype=x.dtype))
        return numerators / numerators.sum(dim=-1, keepdim=True)

    def visible(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Which keys each query sees, bool broadcastable to [batch, H, query, key]: all, or with `causal` j <= i."""
        length = q.shape[-2]
        allowed = torch.ones(length, length, dtype=torch.bool, device=q.device)
        return torch.tril(allowed) if self.causal else allowed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = torch.matmul(x[:, None], self.W_V) + self.b_V[:, None, :]
        head_out = torch.matmul(torch.matmul(self.pattern(x), v), self.W_O)  # [batch, H, n, d_model]
        return head_out.sum(dim=1) + self.b_O


class BlockSparseAttentionModule(AttentionModule):
    """(B,k)-block-sparse attention (`witness.ir.BlockSparseAttention`). Block summaries and scores are computed
    in torch; which blocks are kept is decided by the executor's own rule (`witness.execute.select_blocks`) on
    their values, so no gradient flows through the choice, only through the softmax over the kept tokens."""

    def __init__(self, block: BlockSparseAttention, dtype: torch.dtype) -> None:
        super().__init__(block, dtype)
        self.block, self.k = block.block, block.k

    def structure(self) -> dict[str, Any]:
        return {"mixer": BlockSparseAttention.kind, "block": self.block, "k": self.k, "causal": self.causal}

    def visible(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        length = q.shape[-2]
        summaries = torch.cat([k[..., first:first + self.block, :].mean(dim=-2, keepdim=True)
                               for first in range(0, length, self.block)], dim=-2)  # [batch, H, n_blocks, d_head]
        block_scores = torch.matmul(q, summaries.transpose(-1, -2))  # [batch, H, n, n_blocks]
        selected = select_blocks(_numpy(block_scores), self.block, self.k, self.causal)
        key_block = np.arange(length) // self.block
        return torch.as_tensor(selected[..., key_block], device=q.device) & super().visible(q, k)


class SlidingWindowAttentionModule(AttentionModule):
    """Sliding-window attention (`witness.ir.SlidingWindowAttention`)."""

    def __init__(self, block: SlidingWindowAttention, dtype: torch.dtype) -> None:
        super().__init__(block, dtype)
        self.window = block.window

    def structure(self) -> dict[str, Any]:
        return {"mixer": SlidingWindowAttention.kind, "window": self.window, "causal": self.causal}

    def visible(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(q.shape[-2], device=q.device)
        offset = positions[:, None] - positions[None, :]  # i - j
        return (offset >= 0) & (offset < self.window) if self.causal else offset.abs() < self.window


#: Positions per chunk of the parallel recurrent forms (`RecurrentModule.parallel`): within a chunk the recurrence
#: is unrolled into [chunk, chunk] matrices, across chunks the state is carried; a prompt up to this long is one
#: chunk, with no state carried at all. A decay with one entry per state row unrolls into [chunk, chunk, d_k]
#: products, so it takes shorter chunks. Both measured on CPU training steps (benchmarks/train_step.py's model):
#: 16 and 32 tie for the other forms; per-row decays run about a quarter faster at 8 than at 16.
CHUNK_SIZE = 16
ROW_DECAY_CHUNK_SIZE = 8


class RecurrentModule(ArrayModule):
    """The recurrent mixers (`witness.ir.RECURRENT_MIXERS`) from a zero state. Arrays a form pins to zero (RetNet's
    W_alpha) are frozen (no gradient), so training keeps the form.

    With `parallel` (the default) the matrix-state forms run chunk by chunk (`chunk_size` positions): the linear
    and decay forms as masked, decayed attention within a chunk, the delta rules in the WY / UT form of Yang et al.
    2024; the state is carried only across chunks. Without it they run step for step as `witness.execute`'s
    recurrent kernels do in float64 (`_matrix_state_reference`), the form the parallel one is tested against. The
    two agree to float64 rounding, not bit for bit: the chunked sums run in another order. The general RNN is
    nonlinear in its state and always runs step by step. `parallel` is a plain attribute, so one module can run
    either form on the same parameters, and `chunk_size` may be set on it too."""

    def __init__(self, block: Any, dtype: torch.dtype, parallel: bool = True) -> None:
        super().__init__(block.arrays(), dtype)
        self.kind = block.kind
        self.options = {name: getattr(block, name) for name in block.option_names}
        self.gate = getattr(block, "gate", "sigmoid")  # decay forms: their gate; the gated delta rule: sigmoid
        self.parallel = parallel
        row_decay = hasattr(block, "W_alpha") and block.W_alpha.shape[-1] > 1
        self.chunk_size = ROW_DECAY_CHUNK_SIZE if row_decay else CHUNK_SIZE
        for name in block.zero_arrays:
            getattr(self, name).requires_grad_(False)

    def structure(self) -> dict[str, Any]:
        return {"mixer": self.kind, **self.options}

    def _affine(self, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x[:, None], W) + b[:, None, :]  # [batch, H, n, width]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "rnn":
            outputs = self._rnn(x)
        elif self.parallel:
            outputs = self._matrix_state_chunked(x)
        else:
            outputs = self._matrix_state_reference(x)
        return torch.matmul(outputs, self.W_O).sum(dim=1) + self.b_O

    def _rnn(self, x: torch.Tensor) -> torch.Tensor:
        """s_t = act(s_{t-1} W_s + x_t W_x + b_x): the states [batch, H, n, d_state]."""
        inputs = self._affine(x, self.W_x, self.b_x)
        s = torch.zeros(inputs.shape[:2] + inputs.shape[3:], dtype=x.dtype, device=x.device)
        states = []
        for t in range(x.shape[1]):
            pre = torch.matmul(s[..., None, :], self.W_s)[..., 0, :] + inputs[:, :, t]
            s = torch.relu(pre) if self.options["activation"] == "relu" else pre
            states.append(s)
        return torch.stack(states, dim=2)

    def _projections(self, x: torch.Tensor):
        """q, k (through the feature map), v [batch, H, n, d], and the pre-activations of the decay alpha and of
        the delta rule's beta [batch, H, n, 1 or d_k] (None where the form has no such gate)."""
        names = [("W_Q", "b_Q"), ("W_K", "b_K"), ("W_V", "b_V")]
        names += [pair for pair in (("W_alpha", "b_alpha"), ("W_beta", "b_beta")) if hasattr(self, pair[0])]
        Ws, bs = [getattr(self, W) for W, _ in names], [getattr(self, b) for _, b in names]
        # one matmul for every projection: on small widths a matmul's fixed cost outweighs its arithmetic
        fused = self._affine(x, torch.cat(Ws, dim=-1), torch.cat(bs, dim=-1))
        parts = dict(zip([W for W, _ in names], fused.split([W.shape[-1] for W in Ws], dim=-1)))
        q, k, v = parts["W_Q"], parts["W_K"], parts["W_V"]
        if self.options.get("feature_map") == "relu":
            q, k = torch.relu(q), torch.relu(k)
        return q, k, v, parts.get("W_alpha"), parts.get("W_beta")

    def _matrix_state_reference(self, x: torch.Tensor) -> torch.Tensor:
        """o_t = S_t^T q_t for the linear, decay and delta-rule forms, step for step: [batch, H, n, d_v]."""
        q, k, v, alpha, beta = self._projections(x)
        if alpha is not None and self.gate == "sigmoid":
            alpha = torch.sigmoid(alpha)
        if beta is not None:
            beta = torch.sigmoid(beta)
        S = torch.zeros(k.shape[:2] + (k.shape[-1], v.shape[-1]), dtype=x.dtype, device=x.device)
        z = torch.zeros(k.shape[:2] + k.shape[-1:], dtype=x.dtype, device=x.device)
        outputs = []
        for t in range(x.shape[1]):
            k_t, v_t, q_t = k[:, :, t], v[:, :, t], q[:, :, t]
            if beta is not None:  # S <- alpha (S - (beta k) (S^T k)^T) + (beta k) v^T
                beta_k = beta[:, :, t] * k_t
                retrieved = torch.matmul(k_t[..., None, :], S)[..., 0, :]
                erased = S - beta_k[..., :, None] * retrieved[..., None, :]
                if alpha is not None:
                    erased = alpha[:, :, t, :, None] * erased
                S = erased + beta_k[..., :, None] * v_t[..., None, :]
            else:  # S <- diag(alpha) S + k v^T (alpha = 1 for linear attention)
                decayed = S if alpha is None else alpha[:, :, t, :, None] * S
                S = decayed + k_t[..., :, None] * v_t[..., None, :]
            o = torch.matmul(q_t[..., None, :], S)[..., 0, :]
            if self.options.get("normalize"):
                z = z + k_t
                o = o / torch.matmul(q_t[..., None, :], z[..., None])[..., 0, :]
            outputs.append(o)
        return torch.stack(outputs, dim=2)

    def _matrix_state_chunked(self, x: torch.Tensor) -> torch.Tensor:
        """What `_matrix_state_reference` computes, chunk by chunk (`chunk_decays`, `chunked_decay_read`,
        `chunked_delta_rule`); the normaliser z_t = sum_{s<=t} k_s is a cumulative sum, as in the reference."""
        q, k, v, alpha_input, beta_input = self._projections(x)
        length = x.shape[1]
        size = min(self.chunk_size, length)
        chunk = functools.partial(_chunks, size=size)
        # Padding a ragged last chunk: padded positions come after every real one, so they feed only the state
        # leaving the last chunk, which nothing reads. Gate input 1 there (a unit decay under the `none` gate)
        # keeps the cumulative products free of zeros, whose gradient torch computes on a slower path.
        decays = None if alpha_input is None else chunk_decays(chunk(alpha_input, pad_value=1.0), self.gate)
        if beta_input is None:
            outputs = chunked_decay_read(chunk(q), chunk(k), chunk(v), decays)
        else:
            outputs = chunked_delta_rule(chunk(q), chunk(k), chunk(v), torch.sigmoid(chunk(beta_input)), decays)
        outputs = outputs.flatten(2, 3)[:, :, :length]
        if self.options.get("normalize"):
            normalizer = torch.cumsum(k, dim=2)
            outputs = outputs / torch.matmul(q[..., None, :], normalizer[..., None])[..., 0, :]
        return outputs


def _chunks(tensor: torch.Tensor, size: int, pad_value: float = 0.0) -> torch.Tensor:
    """[batch, H, n, width] -> [batch, H, n_chunks, size, width], the last chunk padded with `pad_value`."""
    padding = -tensor.shape[2] % size
    if padding:
        tensor = nn.functional.pad(tensor, (0, 0, 0, padding), value=pad_value)
    return tensor.unflatten(2, (-1, size))


def chunk_decays(alpha_input: torch.Tensor, gate: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The decay products within each chunk of alpha = gate(alpha_input), alpha_input [..., C, w] (w = 1 or d_k):

        from_start[t]  = prod_{r <= t} alpha_r                       [..., C, w]
        between[t, s]  = prod_{s < r <= t} alpha_r  (0 for s > t)    [..., C, C, w]

    A sigmoid gate's products are exp of differences of cumulative log-gates log sigmoid(u), each difference <= 0
    (so none overflows, and no k_s / from_start[s] is ever formed). The ungated decay (`none`) is any real number,
    zero and negative included, so it has no logarithm: its products are cumulative products down each column
    of the matrix that holds alpha_t below the diagonal (t > s) and 1 elsewhere."""
    size = alpha_input.shape[-2]
    causal = torch.ones(size, size, dtype=torch.bool, device=alpha_input.device).tril()[:, :, None]  # t >= s
    if gate == "sigmoid":
        log_from_start = torch.cumsum(nn.functional.logsigmoid(alpha_input), dim=-2)
        log_between = log_from_start[..., :, None, :] - log_from_start[..., None, :, :]
        return torch.exp(log_from_start), torch.exp(log_between.masked_fill(~causal, -math.inf))
    strictly_later = causal.logical_xor(torch.eye(size, dtype=torch.bool, device=alpha_input.device)[:, :, None])
    factors = torch.where(strictly_later, alpha_input[..., :, None, :], torch.ones((), dtype=alpha_input.dtype))
    between = torch.where(causal, torch.cumprod(factors, dim=-3), torch.zeros((), dtype=alpha_input.dtype))
    return torch.cumprod(alpha_input, dim=-2), between


def _carry(updates: torch.Tensor, chunk_decay: torch.Tensor | None) -> torch.Tensor:
    """The state entering each chunk, from a zero state: S_0 = 0, S_{c+1} = chunk_decay_c S_c + updates_c, with
    updates [batch, H, n_chunks, d_k, d_v] and chunk_decay [batch, H, n_chunks, 1 or d_k, 1] (None: 1)."""
    states = [torch.zeros_like(updates[:, :, 0])]
    for c in range(updates.shape[2] - 1):
        carried = states[-1] if chunk_decay is None else chunk_decay[:, :, c] * states[-1]
        states.append(carried + updates[:, :, c])
    return torch.stack(states, dim=2)


def chunked_decay_read(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       decays: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """o_t = S_t^T q_t for S_t = diag(alpha_t) S_{t-1} + k_t v_t^T from a zero state (alpha = 1 when `decays` is
    None: linear attention), chunk by chunk. With S the state entering a chunk and `decays` = (from_start, between)
    of `chunk_decays`,

        o_t = (q_t * from_start_t)^T S + sum_{s <= t} (sum_i q_ti between_tsi k_si) v_s
        S  <- diag(from_start_last) S + sum_s (between_last,s * k_s) v_s^T

    q, k [batch, H, n_chunks, C, d_k], v [..., C, d_v] -> [batch, H, n_chunks, C, d_v]."""
    if decays is None:
        scores = torch.matmul(q, k.transpose(-1, -2)).tril()
        read_q, carried_k, chunk_decay = q, k, None
    else:
        from_start, between = decays
        if between.shape[-1] == 1:  # one decay per head: it scales whole scores
            scores = torch.matmul(q, k.transpose(-1, -2)) * between[..., 0]
        else:
            scores = (q[..., :, None, :] * between * k[..., None, :, :]).sum(dim=-1)
        read_q, carried_k, chunk_decay = q * from_start, k * between[..., -1, :, :], from_start[..., -1, :, None]
    outputs = torch.matmul(scores, v)
    if q.shape[2] == 1:  # one chunk: it enters with the zero state
        return outputs
    entering = _carry(torch.matmul(carried_k.transpose(-1, -2), v), chunk_decay)
    return outputs + torch.matmul(read_q, entering)


def chunked_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
                       decays: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """o_t = S_t^T q_t for the delta rule S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T from a
    zero state (alpha = 1 when `decays` is None: DeltaNet), in the WY / UT form of Yang et al. 2024 ("Parallelizing
    Linear Transformers with the Delta Rule over Sequence Length"; the gate as in Gated DeltaNet).

    The update is S_t = alpha_t S_{t-1} + k_t u_t^T with the pseudo-value u_t = beta_t (v_t - alpha_t S_{t-1}^T k_t).
    Within a chunk entered with state S, with G = from_start and Gamma = between (`chunk_decays`, one decay per head),

        S_t = G_t S + sum_{s <= t} Gamma_ts k_s u_s^T
        u_t = beta_t (v_t - G_t S^T k_t - sum_{s < t} Gamma_ts (k_t . k_s) u_s),

    the unit lower-triangular system (I + strict_tril(diag(beta) (K K^T o Gamma))) U = diag(beta) (V - diag(G) K S).
    Solved for every chunk at once before any state is known (torch.linalg.solve_triangular), U = U_free - W S
    with U_free = T diag(beta) V and W = T diag(beta G) K; then, chunk after chunk,

        O = diag(G) Q S + (tril(Q K^T) o Gamma) U,    S <- G_last S + (K o Gamma_last)^T U.

    q, k [batch, H, n_chunks, C, d_k], v [..., C, d_v], beta [..., C, 1] -> [batch, H, n_chunks, C, d_v]."""
    gram = torch.matmul(k, k.transpose(-1, -2))
    scores = torch.matmul(q, k.transpose(-1, -2)).tril()
    if decays is None:
        decayed_k, read_q, carried_k, chunk_decay = k, q, k, None
    else:
        from_start, between = decays[0], decays[1][..., 0]
        gram, scores = gram * between, scores * between
        decayed_k, read_q = k * from_start, q * from_start
        carried_k, chunk_decay = k * between[..., -1, :, None], from_start[..., -1, :, None]
    # unitriangular: the system's unit diagonal is implied, so only its strictly lower part is formed
    solved = torch.linalg.solve_triangular(torch.tril(beta * gram, diagonal=-1),
                                           torch.cat([beta * v, beta * decayed_k], dim=-1),
                                           upper=False, unitriangular=True)
    free_values, key_weights = solved.split([v.shape[-1], k.shape[-1]], dim=-1)
    if q.shape[2] == 1:  # one chunk: it enters with the zero state, so U = U_free
        return torch.matmul(scores, free_values)
    state = torch.zeros(k.shape[:2] + (k.shape[-1], v.shape[-1]), dtype=k.dtype, device=k.device)
    outputs = []
    for c in range(q.shape[2]):
        values = free_values[:, :, c] - torch.matmul(key_weights[:, :, c], state)
        outputs.append(torch.matmul(scores[:, :, c], values) + torch.matmul(read_q[:, :, c], state))
        carried = state if chunk_decay is None else chunk_decay[:, :, c] * state
        state = carried + torch.matmul(carried_k[:, :, c].transpose(-1, -2), values)
    return torch.stack(outputs, dim=2)


class MLPModule(ArrayModule):
    """relu(x W_in + b_in) W_out + b_out."""

    def __init__(self, block: MLP, dtype: torch.dtype) -> None:
        super().__init__(block.arrays(), dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(torch.relu(torch.matmul(x, self.W_in) + self.b_in), self.W_out) + self.b_out


#: IR block class -> the module class that runs it. A new mixer kind in the IR adds one entry here.
BLOCK_MODULES: dict[type, type] = {Attention: AttentionModule, BlockSparseAttention: BlockSparseAttentionModule,
                                   SlidingWindowAttention: SlidingWindowAttentionModule, MLP: MLPModule,
                                   **{cls: RecurrentModule for cls in RECURRENT_MIXERS}}


def block_module(block: Any, dtype: torch.dtype) -> nn.Module:
    module_class = BLOCK_MODULES.get(type(block))
    if module_class is None:
        raise ParameterError(f"witness.torch cannot export a {type(block).__name__} block yet")
    return module_class(block, dtype)


class LayerModule(nn.Module):
    """One residual layer: `attn` (the mixer, whatever its kind) and an optional `mlp`."""

    def __init__(self, mixer: nn.Module, mlp: nn.Module | None) -> None:
        super().__init__()
        self.attn = mixer
        self.mlp = mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(x)
        return x if self.mlp is None else x + self.mlp(x)


class NetworkModule(nn.Module):
    """An IR network as an `nn.Module`: `forward(tokens)` gives the logits at every position, and
    `read_logits(tokens)` those at the network's read positions (what the executor returns)."""

    def __init__(self, network: Network, dtype: torch.dtype = torch.float64, parallel: bool = True) -> None:
        super().__init__()
        self.embed = ArrayModule({"W_E": network.embedding.W_E}, dtype)
        self.pos_embed = ArrayModule({"W_pos": network.embedding.W_pos}, dtype)
        self.blocks = nn.ModuleList(
            LayerModule(block_module(layer.mixer, dtype), None if layer.mlp is None else block_module(layer.mlp, dtype))
            for layer in network.layers
        )
        for module in self.modules():
            if isinstance(module, RecurrentModule):
                module.parallel = parallel
        self.unembed = ArrayModule(network.readout.arrays(), dtype)
        self.read = network.readout.read
        self.basis = network.basis
        self.meta = network.meta

    def residuals(self, tokens: torch.Tensor) -> Iterator[torch.Tensor]:
        """The residual stream, [batch, n, d_model]: the embedding, then after each layer in turn (the last is
        `residual`); a generator, so that a caller can read a layer's stream before the next layer is computed."""
        tokens = torch.as_tensor(tokens)
        if tokens.ndim == 1:
            tokens = tokens[None]
        x = self.embed.W_E[tokens] + self.pos_embed.W_pos[: tokens.shape[1]]
        yield x
        for layer in self.blocks:
            x = layer(x)
            yield x

    def residual(self, tokens: torch.Tensor) -> torch.Tensor:
        """The residual stream after the last layer, [batch, n, d_model]."""
        *_, x = self.residuals(tokens)
        return x

    def unembed_stream(self, x: torch.Tensor) -> torch.Tensor:
        """Logits x W_U + b_U of residual vectors x [..., d_model]."""
        return torch.matmul(x, self.unembed.W_U) + self.unembed.b_U

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.unembed_stream(self.residual(tokens))

    def read_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits at the read positions [batch, n_read, d_vocab_out], as `witness.execute.run` reports them."""
        return self.read_from(self.residual(tokens))

    def read_from(self, x: torch.Tensor) -> torch.Tensor:
        """The logits `read_logits` reports, from the final residual stream x [batch, n, d_model]."""
        return self.unembed_stream(x[:, -1:] if self.read == "last" else x)

    def structure(self) -> dict[str, Any]:
        return {"layers": [{**layer.attn.structure(), "mlp": layer.mlp is not None} for layer in self.blocks],
                "read": self.read}


def to_module(network: Network, dtype: torch.dtype = torch.float64, parallel: bool = True) -> NetworkModule:
    """`network` as a `NetworkModule` whose parameters are its arrays (converted to `dtype`); `parallel`: its
    matrix-state recurrent layers run chunk by chunk (fast), else step for step (see `RecurrentModule`)."""
    if not isinstance(network, Network):
        raise ParameterError(f"to_module takes a witness Network, got {type(network).__name__}")
    return NetworkModule(network, dtype, parallel)


def from_module(module: nn.Module, basis: Basis | None = None, meta: Meta | None = None) -> Network:
    """The IR network of a `NetworkModule`; float64 parameters come back bit for bit.

    `basis` and `meta` default to the module's own (those of the network it was exported from)."""
    if not isinstance(module, NetworkModule):
        raise ParameterError(f"from_module takes a witness.torch.NetworkModule, got {type(module).__name__}")
    state = {name: _numpy(tensor) for name, tensor in module.state_dict().items()}
    return network_from_state(state, module.structure(), basis or module.basis, meta or module.meta)


# -- TransformerLens ----------------------------------------------------------------------------------------
def transformer_lens_config(network: Network):
    """The `TransformerBridgeConfig` of a TransformerLens-native model with `network`'s shape: no normalisation,
    ReLU MLPs, learned (standard) positional embedding, one head size and one attention direction throughout."""
    from transformer_lens.config import TransformerBridgeConfig

    _check_transformer_lens_shape(network)
    first = network.layers[0].mixer
    mlps = [layer.mlp for layer in network.layers if layer.mlp is not None]
    return TransformerBridgeConfig(
        d_model=network.d_model, d_head=first.d_head, n_heads=first.n_heads, n_layers=len(network.layers),
        n_ctx=network.n_ctx, d_vocab=network.d_vocab, d_vocab_out=network.d_vocab_out, act_fn="relu",
        normalization_type=None, positional_embedding_type="standard",
        attention_dir="causal" if first.causal else "bidirectional",
        d_mlp=max((mlp.d_mlp for mlp in mlps), default=1), attn_only=not mlps, default_prepend_bos=False,
        init_weights=False,
    )


def _check_transformer_lens_shape(network: Network) -> None:
    if not network.layers:
        raise ParameterError("a TransformerLens model needs at least one layer")
    first = network.layers[0].mixer
    for l, layer in enumerate(network.layers):
        mixer = layer.mixer
        if not isinstance(mixer, Attention):
            raise ParameterError(f"blocks.{l} is a {type(mixer).__name__}; TransformerLens export covers "
                                 "softmax attention only")
        if (mixer.n_heads, mixer.d_head, mixer.causal) != (first.n_heads, first.d_head, first.causal):
            raise ParameterError(f"blocks.{l} has H={mixer.n_heads}, d_head={mixer.d_head}, causal={mixer.causal}; "
                                 "TransformerLens needs the same in every layer")


def transformer_lens_state(network: Network) -> dict[str, np.ndarray]:
    """`network.state_dict()` adjusted for TransformerLens: sqrt(d_head) folded into W_Q and b_Q (TransformerLens
    always divides scores by it), and every MLP zero-padded to the widest one (a zero unit adds relu(0) * 0 = 0)."""
    config_mlp = max((layer.mlp.d_mlp for layer in network.layers if layer.mlp is not None), default=0)
    state = dict(network.state_dict())
    for l, layer in enumerate(network.layers):
        scale = math.sqrt(layer.mixer.d_head)
        state[f"blocks.{l}.attn.W_Q"] = layer.mixer.W_Q * scale
        state[f"blocks.{l}.attn.b_Q"] = layer.mixer.b_Q * scale
        if config_mlp == 0:
            continue
        mlp = layer.mlp or MLP(np.zeros((network.d_model, config_mlp)), np.zeros(config_mlp),
                               np.zeros((config_mlp, network.d_model)), np.zeros(network.d_model))
        pad = config_mlp - mlp.d_mlp
        state[f"blocks.{l}.mlp.W_in"] = np.pad(mlp.W_in, ((0, 0), (0, pad)))
        state[f"blocks.{l}.mlp.b_in"] = np.pad(mlp.b_in, (0, pad))
        state[f"blocks.{l}.mlp.W_out"] = np.pad(mlp.W_out, ((0, pad), (0, 0)))
        state[f"blocks.{l}.mlp.b_out"] = mlp.b_out
    return state


def to_transformer_lens(network: Network, dtype: torch.dtype = torch.float64):
    """A TransformerLens 4.x `TransformerBridge` computing `network`, built offline (no hub access).

    Scores differ from the executor's by the rounding of the sqrt(d_head) fold (exact when d_head is a power
    of 4), so logits agree to float64 rounding, not bit for bit."""
    _check_transformer_lens_shape(network)  # refuse (say, a recurrent layer) before the slow import
    try:
        from transformer_lens.model_bridge.sources.native import boot
        from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint
    except ImportError as exc:
        raise ImportError("to_transformer_lens needs transformer-lens 4.x: pip install 'witness[lens]'") from exc

    config = transformer_lens_config(network)
    bridge = boot(config, dtype=dtype)
    state = {name: torch.tensor(array, dtype=dtype) for name, array in transformer_lens_state(network).items()}
    bridge.load_state_dict(convert_tl_checkpoint(state, bridge.cfg), strict=True)
    return bridge.eval()


__all__ = ["to_module", "from_module", "NetworkModule", "AttentionModule", "BlockSparseAttentionModule",
           "SlidingWindowAttentionModule", "RecurrentModule", "MLPModule", "BLOCK_MODULES", "CHUNK_SIZE",
           "ROW_DECAY_CHUNK_SIZE", "chunk_decays", "chunked_decay_read", "chunked_delta_rule",
           "to_transformer_lens", "transformer_lens_config", "transformer_lens_state"]
