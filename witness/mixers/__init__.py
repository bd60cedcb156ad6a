"""Every mixer kind, one module each, and `MIXERS`, the registry the rest of witness reads.

A kind's module defines its IR block (docs/conventions.md §2), its numpy kernel, its MPFR reference, its torch
forward pass, its Hypothesis options and its trainer initialisation, and lists them in `KINDS` (a `Mixer` per
kind: `decay.py` holds the decay form and its presets, `delta.py` both delta rules). Shared machinery sits beside
them: `base.py` (the record, q/k/v projections, heads through W_O), `softmax.py` (the softmax kinds), and
`matrix_state.py` with `chunked.py` (the matrix-state kinds; `chunked.py` is torch and is imported only when a
torch module runs). A new kind is a new module here, its line below and a test.

The order below is the registry's: strategies draw kinds in it, so it is part of what a seed means.
"""

from __future__ import annotations

from typing import Any

from witness.errors import FileFormatError
from witness.ir import MLP, Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import attention, block_sparse, decay, delta, linear, rnn, sliding_window
from witness.mixers.attention import Attention
from witness.mixers.base import Mixer
from witness.mixers.block_sparse import BlockSparseAttention
from witness.mixers.decay import GATES, GLA, DecayAttention, Mamba2, RetNet
from witness.mixers.delta import DeltaNet, GatedDeltaNet
from witness.mixers.linear import FEATURE_MAPS, LinearAttention
from witness.mixers.rnn import RNN, RNN_ACTIVATIONS
from witness.mixers.sliding_window import SlidingWindowAttention
from witness.mixers.softmax import SoftmaxHeads

#: Mixer kind (the `kind` stored in a file's structure) -> its `Mixer`: the IR class (`.block`), kernel, MPFR
#: reference, torch forward pass, options strategy and initialisation.
MIXERS: dict[str, Mixer] = {mixer.kind: mixer for module in (attention, block_sparse, sliding_window, linear, decay,
                                                              delta, rnn)
                            for mixer in module.KINDS}

#: The recurrent mixer classes: each carries a fixed-size state from position to position (`state_numbers`).
RECURRENT_MIXERS = tuple(mixer.block for mixer in MIXERS.values() if hasattr(mixer.block, "state_numbers"))


#: How many unnamed arrays a refusal lists.
SHOWN = 4


def network_from_state(state: dict[str, Any], structure: dict[str, Any], basis: Basis, meta: Meta) -> Network:
    """Rebuild a Network from TransformerLens-named arrays plus `Network.structure()`; errors name what is missing,
    and `state` holds exactly the network's arrays: one the structure does not name is refused too."""

    def take(prefix: str, cls: type) -> dict[str, Any]:
        missing = [name for name in cls.array_names if f"{prefix}.{name}" not in state]
        if missing:
            raise FileFormatError(f"missing arrays: {', '.join(f'{prefix}.{m}' for m in missing)}")
        return {name: state[f"{prefix}.{name}"] for name in cls.array_names}

    try:
        layers_spec = list(structure["layers"])
        read = structure["read"]
    except (KeyError, TypeError):
        raise FileFormatError("structure must list 'layers' and the readout's 'read' mode") from None
    embedding = Embedding(_get(state, "embed.W_E"), _get(state, "pos_embed.W_pos"))
    layers = []
    for l, spec in enumerate(layers_spec):
        if not isinstance(spec, dict):
            raise FileFormatError(f"blocks.{l}: the structure gives the layer {spec!r}, not an object")
        mixer = MIXERS.get(spec.get("mixer"))
        if mixer is None:
            raise FileFormatError(f"blocks.{l}: unknown mixer kind {spec.get('mixer')!r}; known: {sorted(MIXERS)}")
        cls = mixer.block
        options = {name: spec[name] for name in cls.option_names if name in spec}
        block = cls(**take(f"blocks.{l}.attn", cls), **options)
        mlp = MLP(**take(f"blocks.{l}.mlp", MLP)) if spec.get("mlp") else None
        layers.append(Layer(block, mlp))
    readout = Readout(**take("unembed", Readout), read=read)
    network = Network(embedding, tuple(layers), readout, basis, meta)
    # An array the structure does not name is one the executor never runs, but a reader that runs every
    # `blocks.{l}` it finds (TransformerLens-style) would: the two would answer differently from one file.
    named = network.state_dict()
    unnamed = sorted(name for name in state if name not in named)
    if unnamed:
        more = f", and {len(unnamed) - SHOWN} more" if len(unnamed) > SHOWN else ""
        raise FileFormatError(f"arrays the layer structure does not use: {', '.join(unnamed[:SHOWN])}{more} (a "
                              "reader that runs every block it finds would run them)")
    return network


def _get(state: dict[str, Any], name: str) -> Any:
    if name not in state:
        raise FileFormatError(f"missing array {name}")
    return state[name]


__all__ = ["MIXERS", "RECURRENT_MIXERS", "Mixer", "network_from_state", "SoftmaxHeads", "Attention",
           "BlockSparseAttention", "SlidingWindowAttention", "LinearAttention", "DecayAttention", "RetNet", "GLA",
           "Mamba2", "DeltaNet", "GatedDeltaNet", "RNN", "FEATURE_MAPS", "GATES", "RNN_ACTIVATIONS"]
