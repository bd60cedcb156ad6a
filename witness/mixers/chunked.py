"""The matrix-state kinds in torch: step for step, and chunk by chunk (the parallel forms training runs).

Imported only when a torch module runs (torch is an optional extra). With `module.parallel` the matrix-state forms
run chunk by chunk (`module.chunk_size` positions, None: the form's default below): the linear and decay forms as
masked, decayed attention within a chunk, the delta rules in the WY / UT form of Yang et al. 2024; the state is
carried only across chunks. Without it they run step for step as the executor's recurrent kernels do in float64
(`matrix_state_loop`), the form the parallel one is tested against. The two agree to float64 rounding, not bit for
bit: the chunked sums run in another order.

`module` is a `lab.torch.MixerModule`: the block's arrays as parameters under their IR names, and `settings`,
the block's non-array fields (`gate`, `feature_map`, `normalize`).
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

#: Positions per chunk of the parallel recurrent forms: within a chunk the recurrence is unrolled into
#: [chunk, chunk] matrices, across chunks the state is carried; a prompt up to this long is one chunk, with no
#: state carried at all. A decay with one entry per state row unrolls into [chunk, chunk, d_k] products, so it
#: takes shorter chunks. Both measured on CPU training steps (benchmarks/train_step.py's model): 16 and 32 tie for
#: the other forms; per-row decays run about a quarter faster at 8 than at 16.
CHUNK_SIZE = 16
ROW_DECAY_CHUNK_SIZE = 8


def default_chunk_size(module) -> int:
    row_decay = hasattr(module, "W_alpha") and module.W_alpha.shape[-1] > 1
    return ROW_DECAY_CHUNK_SIZE if row_decay else CHUNK_SIZE


def _gate(module) -> str:
    """The decay forms' gate; the gated delta rule's is a sigmoid."""
    return module.settings.get("gate", "sigmoid")


def _affine(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(x[:, None], W) + b[:, None, :]  # [batch, H, n, width]


def heads_out(module, outputs: torch.Tensor) -> torch.Tensor:
    """Each head's outputs [batch, H, n, d_v] through W_O, heads summed, plus b_O: [batch, n, d_model]."""
    return torch.matmul(outputs, module.W_O).sum(dim=1) + module.b_O


def projections(module, x: torch.Tensor):
    """q, k (through the feature map), v [batch, H, n, d], and the pre-activations of the decay alpha and of
    the delta rule's beta [batch, H, n, 1 or d_k] (None where the form has no such gate)."""
    names = [("W_Q", "b_Q"), ("W_K", "b_K"), ("W_V", "b_V")]
    names += [pair for pair in (("W_alpha", "b_alpha"), ("W_beta", "b_beta")) if hasattr(module, pair[0])]
    Ws, bs = [getattr(module, W) for W, _ in names], [getattr(module, b) for _, b in names]
    # one matmul for every projection: on small widths a matmul's fixed cost outweighs its arithmetic
    fused = _affine(x, torch.cat(Ws, dim=-1), torch.cat(bs, dim=-1))
    parts = dict(zip([W for W, _ in names], fused.split([W.shape[-1] for W in Ws], dim=-1)))
    q, k, v = parts["W_Q"], parts["W_K"], parts["W_V"]
    if module.settings.get("feature_map") == "relu":
        q, k = torch.relu(q), torch.relu(k)
    return q, k, v, parts.get("W_alpha"), parts.get("W_beta")


def matrix_state_loop(module, x: torch.Tensor) -> torch.Tensor:
    """o_t = S_t^T q_t for the linear, decay and delta-rule forms, step for step: [batch, H, n, d_v]."""
    q, k, v, alpha, beta = projections(module, x)
    if alpha is not None and _gate(module) == "sigmoid":
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
        if module.settings.get("normalize"):
            z = z + k_t
            o = o / torch.matmul(q_t[..., None, :], z[..., None])[..., 0, :]
        outputs.append(o)
    return torch.stack(outputs, dim=2)


def matrix_state_chunked(module, x: torch.Tensor) -> torch.Tensor:
    """What `matrix_state_loop` computes, chunk by chunk (`chunk_decays`, `chunked_decay_read`,
    `chunked_delta_rule`); the normaliser z_t = sum_{s<=t} k_s is a cumulative sum, as in the loop."""
    q, k, v, alpha_input, beta_input = projections(module, x)
    length = x.shape[1]
    size = min(module.chunk_size or default_chunk_size(module), length)
    chunk = functools.partial(_chunks, size=size)
    # Padding a ragged last chunk: padded positions come after every real one, so they feed only the state
    # leaving the last chunk, which nothing reads. Gate input 1 there (a unit decay under the `none` gate)
    # keeps the cumulative products free of zeros, whose gradient torch computes on a slower path.
    decays = None if alpha_input is None else chunk_decays(chunk(alpha_input, pad_value=1.0), _gate(module))
    if beta_input is None:
        outputs = chunked_decay_read(chunk(q), chunk(k), chunk(v), decays)
    else:
        outputs = chunked_delta_rule(chunk(q), chunk(k), chunk(v), torch.sigmoid(chunk(beta_input)), decays)
    outputs = outputs.flatten(2, 3)[:, :, :length]
    if module.settings.get("normalize"):
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


__all__ = ["CHUNK_SIZE", "ROW_DECAY_CHUNK_SIZE", "projections", "matrix_state_loop", "matrix_state_chunked",
           "heads_out", "chunk_decays", "chunked_decay_read", "chunked_delta_rule"]
