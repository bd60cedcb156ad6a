"""The torch bridge: export any IR network to an `nn.Module` and import such a module back, bit for bit.

    module = lab.torch.to_module(network)          # float64 by default
    logits = module(torch.as_tensor(tokens))            # [batch, n, d_vocab_out], every position
    same = lab.torch.from_module(module)            # np.array_equal on every array
    ids = module.generate(torch.as_tensor(prompt), k)   # [batch, k] greedy ids, as witness.generate.generate

The module's parameters carry the IR's TransformerLens names (`embed.W_E`, `blocks.0.attn.W_Q`, `unembed.W_U`,
...), so `module.state_dict()` and `Network.state_dict()` have the same keys and shapes. Its forward pass performs
the executor's float64 steps in the executor's order (see `witness.execute`); what can still differ is the order
inside each dot product, which numpy's and torch's BLAS choose for themselves. The exception, for speed: the
matrix-state recurrent layers run chunk by chunk by default (`witness.mixers.chunked`, `to_module(...,
parallel=False)` for the step-by-step form), which sums in another order and so agrees with the executor to
float64 rounding.

`to_transformer_lens` builds a TransformerLens 4.x `TransformerBridge` (offline, from a config) for softmax-only
networks, so `run_with_cache`, attention patterns and hooks work on compiled weights.

The core never imports this module; torch (and transformer-lens, for `to_transformer_lens`) are optional extras.
Every mixer kind runs in one module class, `MixerModule`, whose forward pass is the kind's own
(`witness.mixers`): a new kind adds nothing here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

try:
    import torch
    from torch import nn
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("lab.torch needs torch: pip install 'witness[torch]'") from exc

from witness.errors import ParameterError
from witness.generate import NOT_GENERATED
from witness.ir import MLP, Basis, Meta, Network
from witness.mixers import MIXERS, Attention, network_from_state


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


class MixerModule(ArrayModule):
    """A mixing layer of any kind: the block's arrays as parameters under their IR names, its non-array fields in
    `settings`, and the forward pass of its kind (`witness.mixers.MIXERS[kind].torch_forward`, in the kind's
    module). Arrays a form pins to zero (RetNet's W_alpha) are frozen (no gradient), so training keeps the form.

    The matrix-state recurrent kinds run chunk by chunk (`witness.mixers.chunked`) while `parallel` is set, else
    step for step as the executor's kernels do; `chunk_size` (None: the form's default) sets the chunk length.
    Both are plain attributes, so one module can run either form on the same parameters. The other kinds ignore
    them. Likewise `fused_softmax` (unset by default) lets the softmax kinds take their pattern from one
    `torch.softmax` call, which agrees with the executor only to rounding (`witness.mixers.softmax.softmax_torch`);
    only the trainer sets it."""

    def __init__(self, block: Any, dtype: torch.dtype, parallel: bool = True) -> None:
        super().__init__(block.arrays(), dtype)
        self.kind = block.kind
        self.option_names = block.option_names
        self.settings = {f.name: getattr(block, f.name) for f in dataclasses.fields(block)
                         if f.name not in block.array_names}
        self.parallel = parallel
        self.chunk_size: int | None = None
        self.fused_softmax = False
        for name in getattr(block, "zero_arrays", ()):
            getattr(self, name).requires_grad_(False)

    def structure(self) -> dict[str, Any]:
        return {"mixer": self.kind, **{name: self.settings[name] for name in self.option_names}}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return MIXERS[self.kind].torch_forward(self, x)


class MLPModule(ArrayModule):
    """relu(x W_in + b_in) W_out + b_out."""

    def __init__(self, block: MLP, dtype: torch.dtype) -> None:
        super().__init__(block.arrays(), dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(torch.relu(torch.matmul(x, self.W_in) + self.b_in), self.W_out) + self.b_out


def mixer_module(block: Any, dtype: torch.dtype, parallel: bool) -> MixerModule:
    if getattr(block, "kind", None) not in MIXERS:
        raise ParameterError(f"lab.torch cannot export a {type(block).__name__} block yet")
    return MixerModule(block, dtype, parallel)


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
            LayerModule(mixer_module(layer.mixer, dtype, parallel),
                        None if layer.mlp is None else MLPModule(layer.mlp, dtype))
            for layer in network.layers
        )
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

    @torch.no_grad()
    def generate(self, tokens: torch.Tensor, k: int) -> torch.Tensor:
        """[batch, k]: k greedy steps as `witness.generate.generate` runs them, each appending the unique argmax of
        the last position's logits; from a step whose maximum ties (or a logit is NaN), NOT_GENERATED (-1), never a
        pick of the tied ids."""
        tokens = torch.as_tensor(tokens)
        transcript = tokens[None] if tokens.ndim == 1 else tokens
        generated = torch.full((transcript.shape[0], k), NOT_GENERATED, dtype=torch.int64)
        going = torch.ones(transcript.shape[0], dtype=torch.bool)
        for step in range(k):
            logits = self.forward(transcript)[:, -1]
            top = logits.max(dim=-1, keepdim=True).values
            going &= ((logits == top).sum(dim=-1) == 1) & ~logits.isnan().any(dim=-1)  # as `unique_argmax`
            generated[going, step] = logits.argmax(dim=-1)[going]
            # a stopped row goes on with token 0, whose outputs are never read
            transcript = torch.cat([transcript, generated[:, step:step + 1].clamp(min=0)], dim=1)
        return generated

    def structure(self) -> dict[str, Any]:
        return {"layers": [{**layer.attn.structure(), "mlp": layer.mlp is not None} for layer in self.blocks],
                "read": self.read}


def to_module(network: Network, dtype: torch.dtype = torch.float64, parallel: bool = True) -> NetworkModule:
    """`network` as a `NetworkModule` whose parameters are its arrays (converted to `dtype`); `parallel`: its
    matrix-state recurrent layers run chunk by chunk (fast), else step for step (see `MixerModule`)."""
    if not isinstance(network, Network):
        raise ParameterError(f"to_module takes a witness Network, got {type(network).__name__}")
    return NetworkModule(network, dtype, parallel)


def from_module(module: nn.Module, basis: Basis | None = None, meta: Meta | None = None) -> Network:
    """The IR network of a `NetworkModule`; float64 parameters come back bit for bit.

    `basis` and `meta` default to the module's own (those of the network it was exported from)."""
    if not isinstance(module, NetworkModule):
        raise ParameterError(f"from_module takes a lab.torch.NetworkModule, got {type(module).__name__}")
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
    always divides scores by it), and every MLP zero-padded to the widest one (a zero unit adds relu(0) * 0 = 0);
    in float64, whatever dtype the network stores its arrays in."""
    config_mlp = max((layer.mlp.d_mlp for layer in network.layers if layer.mlp is not None), default=0)
    state = dict(network.state_dict())
    for l, layer in enumerate(network.layers):
        scale = math.sqrt(layer.mixer.d_head)
        state[f"blocks.{l}.attn.W_Q"] = np.asarray(layer.mixer.W_Q, dtype=np.float64) * scale
        state[f"blocks.{l}.attn.b_Q"] = np.asarray(layer.mixer.b_Q, dtype=np.float64) * scale
        if config_mlp == 0:
            continue
        mlp = layer.mlp or MLP(np.zeros((network.d_model, config_mlp)), np.zeros(config_mlp),
                               np.zeros((config_mlp, network.d_model)), np.zeros(network.d_model))
        pad = config_mlp - mlp.d_mlp
        state[f"blocks.{l}.mlp.W_in"] = np.pad(mlp.W_in, ((0, 0), (0, pad)))
        state[f"blocks.{l}.mlp.b_in"] = np.pad(mlp.b_in, (0, pad))
        state[f"blocks.{l}.mlp.W_out"] = np.pad(mlp.W_out, ((0, pad), (0, 0)))
        state[f"blocks.{l}.mlp.b_out"] = mlp.b_out
    return {name: np.asarray(array, dtype=np.float64) for name, array in state.items()}


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


__all__ = ["to_module", "from_module", "NetworkModule", "MixerModule", "MLPModule", "to_transformer_lens",
           "transformer_lens_config", "transformer_lens_state"]
