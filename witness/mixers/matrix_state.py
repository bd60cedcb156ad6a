"""What the matrix-state recurrent kinds (linear, decay and its presets, the delta rules) share: their arrays, the
kernel helpers and the order they fix under `strict`, the reference's per-head loop, the torch glue and the
trainer's initialisation (docs/conventions.md §2).

Per head: q_t = x_t W_Q[h] + b_Q[h] and k_t [d_k], v_t = x_t W_V[h] + b_V[h] [d_v], a state S_t in R^(d_k x d_v)
that starts at zero, the read-out o_t = S_t^T q_t, and W_O [H, d_v, d_model] with b_O [d_model] as in softmax
attention. Each kind's module gives its recurrence.

Each kernel runs its recurrence position by position from a zero state, vectorised over the batch, the heads and
the state entries, every step through `arith`. Under `strict` the operation order is:
  projections and gate inputs u = x W + b: a dot product in index order, then the bias add;
  sigmoid(u) = 1 / (1 + exp(0 - u)), one rounding per sub, exp, add and div;
  outer products k v^T: one rounded multiply per entry;
  state updates entry by entry, e.g. S[i, j] <- round(round(alpha_i S[i, j]) + round(k_i v_j)) (the kernel's
  comment gives each form's expression; parentheses fix the order);
  read-outs S^T q (and the delta rule's S^T k, the normaliser's z . q): sums over i in index order;
  the state is stored (`arith.store`) after every step: rounded to the format under `theory` (the state is what
  leaves the step) and under `mixed` (held in the format), a no-op under `strict`.
The MPFR reference of each kind performs the same steps one scalar at a time. The general RNN (`rnn`) follows the
same order with a vector state.
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar

import numpy as np

from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.mixers.base import Projections, projection_shapes, reference_add_heads

#: Initial decay: a sigmoid gate's bias makes alpha = sigmoid(2) ~ 0.88 at the start (the state remembers a few
#: positions back, as GLA and Mamba initialise); a fixed (ungated) decay starts at RetNet's usual gamma range.
INITIAL_GATE_BIAS = {"sigmoid": 2.0, "none": 0.9}


class MatrixState(Projections):
    """The arrays every matrix-state mixer shares (see the module's docstring). A gate pair (W, b) has
    W [H, d_model, width] and b [H, width]."""

    #: Each gate pair (W, b) and its width in a fresh layer (`array_shapes`): 1 (one per head) or "d_k" (per row).
    gate_widths: ClassVar[dict[tuple[str, str], int | str]] = {}
    #: Arrays that the form pins to zero (RetNet's W_alpha: its decay ignores the input); trainers keep them so.
    zero_arrays: ClassVar[tuple[str, ...]] = ()
    #: A recurrence reads only the past: position t sees positions 0..t.
    causal: ClassVar[bool] = True

    @classmethod
    def array_shapes(cls, H: int, d_model: int, d_head: int) -> dict[str, tuple[int, ...]]:
        """The shape of every array of a fresh layer with d_k = d_v = d_head (what random and trained networks fill)."""
        shapes = projection_shapes(H, d_model, d_head, d_head)
        for (W, b), width in cls.gate_widths.items():
            width = d_head if width == "d_k" else width
            shapes[W], shapes[b] = (H, d_model, width), (H, width)
        return shapes

    def _freeze_state(self, gates: dict[tuple[str, str], int | None]) -> None:
        """Check and freeze the projections, then each gate pair; a width None is read off the W array (1 or d_k)."""
        W_Q, W_V = np.asarray(self.W_Q), np.asarray(self.W_V)
        if W_Q.ndim != 3 or W_V.ndim != 3:
            raise ParameterError(f"{type(self).__name__}.W_Q and W_V must be [H, d_model, d_k] and [H, d_model, d_v], "
                                 f"got shapes {W_Q.shape} and {W_V.shape}")
        H, d_model, d_k = W_Q.shape
        shapes = projection_shapes(H, d_model, d_k, W_V.shape[2])
        for (W, b), width in gates.items():
            if width is None:
                width = np.shape(getattr(self, W))[-1] if np.ndim(getattr(self, W)) == 3 else -1
                if width not in (1, d_k):
                    raise ParameterError(f"{type(self).__name__}.{W} must be [H, d_model, 1] (one gate per head) or "
                                         f"[H, d_model, d_k] (one per state row), got shape {np.shape(getattr(self, W))}")
            shapes[W], shapes[b] = (H, d_model, width), (H, width)
        self._freeze(shapes)

    @property
    def state_numbers(self) -> int:
        """Numbers the layer carries from one position to the next, conventions §2's count H (d_k d_v + d_k): the
        matrix state plus a d_k normaliser (counted for every matrix-state form, as the paper does)."""
        return self.n_heads * (self.d_k * self.d_v + self.d_k)


# -- the executor -------------------------------------------------------------------------------------------------
def ieee(kernel):
    """Run a recurrent kernel with numpy's floating-point warnings off: a state that overflows to inf, or a zero
    normaliser giving inf or NaN, is the IEEE result the recurrence means (and a fixed format raises regardless)."""
    @functools.wraps(kernel)
    def quiet(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return kernel(*args, **kwargs)
    return quiet


def heads_affine(x: np.ndarray, W: np.ndarray, b: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """x W[h] + b[h] for every head: x [b, n, d_model], W [H, d_model, width] -> [b, H, n, width]."""
    return arith.add(arith.matmul(x[:, None], arith.weights(W)), arith.weights(b)[:, None, :])


def sigmoid(u: np.ndarray, arith: Arithmetic) -> np.ndarray:
    return arith.div(1.0, arith.add(1.0, arith.exp(arith.sub(0.0, u))))


def outer(a: np.ndarray, b: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """a b^T per batch entry and head: a [..., d_k], b [..., d_v] -> [..., d_k, d_v]."""
    return arith.mul(a[..., :, None], b[..., None, :])


def read(q: np.ndarray, S: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """S^T q: q [..., d_k], S [..., d_k, d_v] -> [..., d_v], each entry summed over i in index order."""
    return arith.matmul(q[..., None, :], S)[..., 0, :]


def trace_steps(hooks, prefix: str, **steps: list[np.ndarray]) -> None:
    """Record per-position values (lists over t of [b, H, ...]) as hooks [b, H, n, ...], e.g. hook_state."""
    if hooks is not None:
        for name, values in steps.items():
            hooks[f"{prefix}.hook_{name}"] = np.stack(values, axis=2)


# -- the MPFR reference -------------------------------------------------------------------------------------------
def matrix_state_reference(head_outputs):
    """The MPFR reference of a kind whose `head_outputs(block, h, w, affine, sigmoid, ops, dot, column, zero)`
    gives one head's outputs o_t [d_v] for t = 0 .. n-1; each head's outputs then go through W_O, heads added in
    head order, then b_O. `affine(W, b)` is x_t W + b for every position t (a dot product in index order, then the
    bias); `sigmoid(rows)` is 1 / (1 + exp(0 - u)) entry by entry; `w` maps each array name to its rounded
    weights."""
    def reference(block, x, ops, weight, dot, column):
        length, d_model = len(x), block.d_model
        w = {name: weight(array, name) for name, array in block.arrays().items()}
        zero = ops.value(0.0)

        def affine(W, b):
            return [[ops.add(dot(x[t], column(W, c), "recurrent"), b[c], "recurrent") for c in range(len(b))]
                    for t in range(length)]

        def sigmoid_rows(rows):
            one = ops.value(1.0)
            return [[ops.div(one, ops.add(one, ops.exp(ops.sub(zero, u, "gate"), "gate"), "gate"), "gate")
                     for u in row] for row in rows]

        heads_out = []
        for h in range(block.n_heads):
            outputs = head_outputs(block, h, w, affine, sigmoid_rows, ops, dot, column, zero)
            heads_out.append([[dot(outputs[t], column(w["W_O"][h], c), "recurrent") for c in range(d_model)]
                              for t in range(length)])
        return reference_add_heads(heads_out, w["b_O"], ops, "recurrent")
    return reference


def reference_qkv(h, w, affine):
    """One head's q, k, v rows of the reference."""
    return affine(w["W_Q"][h], w["b_Q"][h]), affine(w["W_K"][h], w["b_K"][h]), affine(w["W_V"][h], w["b_V"][h])


# -- torch --------------------------------------------------------------------------------------------------------
def torch_forward(module, x):
    """A matrix-state kind in torch (`witness.mixers.chunked`): chunk by chunk when `module.parallel`, else step
    for step as the executor's kernels do it in float64, then W_O and b_O."""
    from witness.mixers import chunked  # torch is an optional extra: imported when a module runs

    outputs = chunked.matrix_state_chunked(module, x) if module.parallel else chunked.matrix_state_loop(module, x)
    return chunked.heads_out(module, outputs)


# -- the trainer's initialisation ---------------------------------------------------------------------------------
def initial_arrays(block: type, gains: dict[str, float], H: int, d_model: int, d_head: int, normal):
    """Every array of a fresh recurrent layer, in `array_shapes` order: weight matrices normal(0, 1/fan-in) times
    their gain in `gains` (1 where none is given; W_O's fan-in is H d_head), biases zero, the arrays the form pins
    to zero left at zero."""
    arrays = {}
    for name, shape in block.array_shapes(H, d_model, d_head).items():
        if name.startswith("W_"):
            arrays[name] = gains.get(name, 1.0) * normal(H * d_head if name == "W_O" else shape[-2], *shape)
        else:
            arrays[name] = np.zeros(shape)
    arrays.update({name: np.zeros_like(arrays[name]) for name in block.zero_arrays})
    return arrays


def initial_matrix_state(block: type, options: dict[str, Any], *, causal: bool, H: int, d_model: int, d_head: int,
                         n_ctx: int, resid_scale: float, normal):
    """A matrix-state mixer with d_k = d_v = d_head: W_Q, W_K and W_V at gain 1 / (resid_scale sqrt(d_head)), W_O
    at 1 / n_ctx, biases zero except the decay gate's (INITIAL_GATE_BIAS), the arrays the form pins at zero.

    Why the gains. There is no layer norm, so a layer's output scale is a power of its input's: a matrix state's
    read-out o_t = S_t^T q_t = sum_{s<=t} c_ts (q_t . k_s) v_s (|c_ts| <= 1: decays lie in (0, 1), the delta rule
    only shrinks S along k) is cubic in the residual x and sums up to n_ctx terms, so at plain 1/fan-in scale a
    stack of such layers grows like x^(3^layers) and overflows even float64 on a 22-token prompt. With residual
    entries of rms resid_scale (the scale `lab.train` plans for this depth), q, k and v have norm ~1, so
    |q . k| <~ 1, and W_O's 1/n_ctx undoes the sum over up to n_ctx positions: the layer adds O(1) to the residual
    whatever the depth, instead of cubing it -- finite at fp16 (max 65504) on prompts of ~100 tokens. |k| ~ 1 also
    keeps DeltaNet's beta |k|^2 < 2 (beta < 1), the condition for (I - beta k k^T) to shrink S along k instead of
    flipping and growing it. Training may leave this regime; the trainer's finite-loss guard reports it."""
    unit = 1 / (resid_scale * math.sqrt(d_head))
    arrays = initial_arrays(block, {"W_Q": unit, "W_K": unit, "W_V": unit, "W_O": 1 / n_ctx}, H, d_model, d_head,
                            normal)
    if "b_alpha" in arrays:
        arrays["b_alpha"] += INITIAL_GATE_BIAS[options.get("gate", getattr(block, "gate", "sigmoid"))]
    return block(**arrays, **options)


__all__ = ["MatrixState", "INITIAL_GATE_BIAS", "ieee", "heads_affine", "sigmoid", "outer", "read", "trace_steps",
           "matrix_state_reference", "reference_qkv", "torch_forward", "initial_arrays", "initial_matrix_state"]
