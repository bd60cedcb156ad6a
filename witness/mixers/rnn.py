"""`rnn`: the general recurrent form, state in, token in -> state out (docs/conventions.md §2). Its strict order
follows `witness.mixers.matrix_state`'s: the affine input and s W_s as dot products in index order, then the add."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.ir import _Arrays
from witness.mixers.base import Mixer, check_choice, combine_heads, reference_add_heads
from witness.mixers.matrix_state import heads_affine, ieee, initial_arrays, read, trace_steps

RNN_ACTIVATIONS = ("identity", "relu")
#: The W_s gain of the trainer's initialisation: see `_initial`.
RNN_STATE_GAIN = 0.25


@dataclass(frozen=True, eq=False)
class RNN(_Arrays):
    """`rnn`, the general recurrent form (state in, token in -> state out, output): per head a state
    s_t in R^d_state starting at zero, s_t = act(s_{t-1} W_s[h] + (x_t W_x[h] + b_x[h])) with act the identity or
    relu (an elementwise / ReLU-affine recurrence), and output s_t W_O[h]; heads summed, plus b_O."""

    W_x: np.ndarray  # [H, d_model, d_state]
    b_x: np.ndarray  # [H, d_state]
    W_s: np.ndarray  # [H, d_state, d_state]
    W_O: np.ndarray  # [H, d_state, d_model]
    b_O: np.ndarray  # [d_model]
    activation: str = "relu"
    kind: ClassVar[str] = "rnn"
    array_names: ClassVar = ("W_x", "b_x", "W_s", "W_O", "b_O")
    option_names: ClassVar = ("activation",)
    zero_arrays: ClassVar[tuple[str, ...]] = ()
    causal: ClassVar[bool] = True

    @classmethod
    def array_shapes(cls, H: int, d_model: int, d_head: int) -> dict[str, tuple[int, ...]]:
        """The shape of every array of a fresh layer with d_state = d_head."""
        return {"W_x": (H, d_model, d_head), "b_x": (H, d_head), "W_s": (H, d_head, d_head),
                "W_O": (H, d_head, d_model), "b_O": (d_model,)}

    def __post_init__(self) -> None:
        W_x = np.asarray(self.W_x)
        if W_x.ndim != 3:
            raise ParameterError(f"RNN.W_x must be [H, d_model, d_state], got shape {W_x.shape}")
        H, d_model, d_state = W_x.shape
        self._freeze({"W_x": (H, d_model, d_state), "b_x": (H, d_state), "W_s": (H, d_state, d_state),
                      "W_O": (H, d_state, d_model), "b_O": (d_model,)})
        check_choice("RNN", "activation", self.activation, RNN_ACTIVATIONS)

    @property
    def n_heads(self) -> int:
        return self.W_x.shape[0]

    @property
    def d_state(self) -> int:
        return self.W_x.shape[2]

    @property
    def d_head(self) -> int:
        return self.d_state

    @property
    def d_model(self) -> int:
        return self.W_x.shape[1]

    @property
    def state_numbers(self) -> int:
        """Numbers carried from one position to the next: H d_state."""
        return self.n_heads * self.d_state


@ieee
def rnn(block: RNN, x: np.ndarray, arith: Arithmetic, hooks, prefix: str) -> np.ndarray:
    """s_t = act(s_{t-1} W_s + (x_t W_x + b_x)) per head, output s_t W_O. Traced: hook_state [b, H, n, d_state]."""
    inputs = heads_affine(x, block.W_x, block.b_x, arith)  # [b, H, n, d_state]
    W_s = arith.weights(block.W_s)
    s = np.zeros(inputs.shape[:2] + inputs.shape[3:])
    states = []
    for t in range(x.shape[1]):
        pre = arith.add(read(s, W_s, arith), inputs[:, :, t])  # (sum_i s_i W_s[i,c]) + u_c
        s = arith.store(arith.relu(pre) if block.activation == "relu" else pre)
        states.append(s)
    trace_steps(hooks, prefix, state=states)
    return combine_heads(np.stack(states, axis=2), block, arith, hooks, prefix)


def _reference(block: RNN, x, ops, weight, dot, column):
    """Per head, s_t = act(s_{t-1} W_s + u_t) from a zero state with u_t = x_t W_x + b_x, then s_t W_O; heads
    added in head order, then b_O."""
    length, d_model = len(x), block.d_model
    w = {name: weight(array, name) for name, array in block.arrays().items()}
    zero = ops.value(0.0)
    heads_out = []
    for h in range(block.n_heads):
        W_x, b_x, W_s = w["W_x"][h], w["b_x"][h], w["W_s"][h]
        inputs = [[ops.add(dot(x[t], column(W_x, c), "recurrent"), b_x[c], "recurrent") for c in range(len(b_x))]
                  for t in range(length)]
        s = [zero] * block.d_state
        states = []
        for u in inputs:
            pre = [ops.add(dot(s, column(W_s, c), "recurrent"), u[c], "recurrent") for c in range(block.d_state)]
            s = [ops.relu(a) for a in pre] if block.activation == "relu" else pre
            states.append(s)
        heads_out.append([[dot(states[t], column(w["W_O"][h], c), "recurrent") for c in range(d_model)]
                          for t in range(length)])
    return reference_add_heads(heads_out, w["b_O"], ops, "recurrent")


def _torch_forward(module, x):
    """s_t = act(s_{t-1} W_s + x_t W_x + b_x), step by step whatever `module.parallel` says (the RNN is nonlinear
    in its state, so it has no chunked form), then W_O and b_O."""
    import torch

    inputs = torch.matmul(x[:, None], module.W_x) + module.b_x[:, None, :]  # [batch, H, n, d_state]
    s = torch.zeros(inputs.shape[:2] + inputs.shape[3:], dtype=x.dtype, device=x.device)
    states = []
    for t in range(x.shape[1]):
        pre = torch.matmul(s[..., None, :], module.W_s)[..., 0, :] + inputs[:, :, t]
        s = torch.relu(pre) if module.settings["activation"] == "relu" else pre
        states.append(s)
    return torch.matmul(torch.stack(states, dim=2), module.W_O).sum(dim=1) + module.b_O


def _options():
    from hypothesis import strategies as st

    return st.fixed_dictionaries({"activation": st.sampled_from(RNN_ACTIVATIONS)})


def _initial(block: type, options: dict[str, Any], *, causal: bool, H: int, d_model: int, d_head: int, n_ctx: int,
             resid_scale: float, normal) -> RNN:
    """The RNN is linear (or ReLU) in x, so only its recurrence needs taming: W_s at gain RNN_STATE_GAIN has
    operator norm about 2 RNN_STATE_GAIN = 1/2, so its state is at most about twice its latest input instead of
    growing with t. Other weights normal(0, 1/fan-in), biases zero."""
    return block(**initial_arrays(block, {"W_s": RNN_STATE_GAIN}, H, d_model, d_head, normal), **options)


KINDS = (Mixer(block=RNN, kernel=rnn, reference=_reference, torch_forward=_torch_forward, options=_options,
               initial=_initial),)

__all__ = ["RNN", "RNN_ACTIVATIONS", "RNN_STATE_GAIN", "rnn", "KINDS"]
