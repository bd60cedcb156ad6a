"""What every mixer kind shares: its registration record, the arrays of the attention-like kinds, and the steps
around the mixing itself (q, k, v projections, heads through W_O) in the executor and in the MPFR reference.

A kind's module (`witness.mixers.<kind>`) defines, for each kind it holds, one `Mixer`: the IR block, its numpy
kernel, its MPFR reference, its torch forward pass, the Hypothesis strategy of its options and its trainer
initialisation. `witness.mixers` collects them into `MIXERS`, the one registry that the executor, the reference,
the torch bridge, the trainer and the strategies read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.ir import _Arrays


@dataclass(frozen=True)
class Mixer:
    """One mixer kind and everything that runs it.

    * `block`: the IR dataclass (docs/conventions.md §2), with `kind`, `array_names` (its arrays under
      `blocks.{l}.attn.`), `option_names` (its non-array fields, stored in a file's structure), `n_heads`, `d_head`
      and `d_model`.
    * `kernel(block, x, arith, hooks, prefix)`: the executor's step, x [b, n, d_model] -> [b, n, d_model], every
      value through `arith` (`witness.execute` documents the order).
    * `reference(block, x, ops, weight, dot, column)`: the same step one scalar at a time (`tests.oracles.mpfr_reference`),
      x and the result nested lists [n][d_model]; it shares no code with the kernel.
    * `torch_forward(module, x)`: the step in torch on a `lab.torch.MixerModule` holding the block's arrays;
      torch is imported only when it runs.
    * `options(**limits)`: a Hypothesis strategy of the kind's options other than `causal` (the softmax kinds'
      shared flag, which strategies and `lab.train.LayerSpec` set apart).
    * `initial(block, options, *, causal, H, d_model, d_head, n_ctx, resid_scale, normal)`: the trainer's seeded
      random block (`lab.train.Architecture.initial_network`); `normal(fan_in, *shape)` draws the weights.
    * `from_query`: whether kernel and reference take a keyword `from_query` = f and give the step's output for
      positions f .. n-1 only (rows [n - f]), every other value as before (the softmax kinds: one query's output
      needs no other query). A kind without it computes every position's output, and the executor keeps the rows
      it needs (a recurrence needs every position anyway).
    """

    block: type
    kernel: Callable[..., np.ndarray]
    reference: Callable[..., list]
    torch_forward: Callable[..., Any]
    options: Callable[..., Any]
    initial: Callable[..., Any]
    from_query: bool = False

    @property
    def kind(self) -> str:
        return self.block.kind


def no_options():
    """The options strategy of a kind with none to draw."""
    from hypothesis import strategies as st

    return st.just({})


# -- the arrays of every attention-like mixer ---------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Projections(_Arrays):
    """The arrays of every attention-like mixer, softmax or recurrent: per head h, query, key and value
    projections and an output projection (TransformerLens names). Softmax kinds have d_k = d_v = d_head."""

    W_Q: np.ndarray  # [H, d_model, d_k]
    W_K: np.ndarray  # [H, d_model, d_k]
    W_V: np.ndarray  # [H, d_model, d_v]
    W_O: np.ndarray  # [H, d_v, d_model]
    b_Q: np.ndarray  # [H, d_k]
    b_K: np.ndarray  # [H, d_k]
    b_V: np.ndarray  # [H, d_v]
    b_O: np.ndarray  # [d_model]

    projection_names: ClassVar = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")

    @property
    def n_heads(self) -> int:
        return self.W_Q.shape[0]

    @property
    def d_k(self) -> int:
        return self.W_Q.shape[2]

    @property
    def d_v(self) -> int:
        return self.W_V.shape[2]

    @property
    def d_head(self) -> int:
        return max(self.d_k, self.d_v)

    @property
    def d_model(self) -> int:
        return self.W_Q.shape[1]


def projection_shapes(H: int, d_model: int, d_k: int, d_v: int) -> dict[str, tuple[int, ...]]:
    return {"W_Q": (H, d_model, d_k), "W_K": (H, d_model, d_k), "W_V": (H, d_model, d_v), "W_O": (H, d_v, d_model),
            "b_Q": (H, d_k), "b_K": (H, d_k), "b_V": (H, d_v), "b_O": (d_model,)}


def check_choice(owner: str, name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ParameterError(f"{owner}.{name} must be one of {choices}, got {value!r}")


# -- the executor's steps around the mixing -----------------------------------------------------------------------
def record(hooks: dict[str, np.ndarray] | None, name: str, value: np.ndarray) -> None:
    if hooks is not None:
        hooks[name] = value


def project(block: Projections, x: np.ndarray, arith: Arithmetic) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v [b, H, n, d_k or d_v] of an attention-like block, x [b, n, d_model]."""
    W_Q, W_K, W_V, b_Q, b_K, b_V = (arith.weights(getattr(block, name))
                                    for name in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"))
    x_heads = x[:, None]  # [b, 1, n, d_model], broadcast against [H, d_model, d_head]
    return tuple(arith.add(arith.matmul(x_heads, W), b[:, None, :]) for W, b in ((W_Q, b_Q), (W_K, b_K), (W_V, b_V)))


def combine_heads(mixed: np.ndarray, block, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """Each head's output [b, H, n, d_head or d_v] through its W_O, heads added in order, then b_O: [b, n, d_model]."""
    head_out = arith.store(arith.matmul(mixed, arith.weights(block.W_O)))  # [b, H, n, d_model]
    record(hooks, f"{prefix}.hook_result", head_out)
    return arith.store(arith.add(arith.sum(head_out, axis=1)[:, 0], arith.weights(block.b_O)))


# -- the MPFR reference's step after the mixing -------------------------------------------------------------------
def reference_add_heads(heads_out, b_O, ops, operation: str):
    """Per position and residual direction: the heads' outputs added in head order, then b_O."""
    out = []
    for per_position in zip(*heads_out):
        row = []
        for c, values in enumerate(zip(*per_position)):
            total = values[0]
            for value in values[1:]:
                total = ops.add(total, value, operation)
            row.append(ops.add(total, b_O[c], operation))
        out.append(row)
    return out


__all__ = ["Mixer", "no_options", "Projections", "projection_shapes", "check_choice", "record", "project",
           "combine_heads", "reference_add_heads"]
