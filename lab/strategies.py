"""Public Hypothesis strategies: task parameters, instances, and small random networks.

    from hypothesis import given
    from lab import strategies as ws

    @given(ws.networks())
    def test_something(net_and_tokens): ...

    @given(st.data())
    def test_answers(data):
        task = data.draw(ws.tasks("composition", max_L=2))
        batch = data.draw(ws.tokens(task))
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from witness.ir import MLP, Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import MIXERS, RECURRENT_MIXERS, Attention, BlockSparseAttention, SlidingWindowAttention
from witness.tasks import record_of


@st.composite
def networks(draw, max_layers: int = 2, max_heads: int = 2, max_d_model: int = 6, max_d_head: int = 3,
             max_ctx: int = 6, max_vocab: int = 5, scale: float = 2.0, batch: int = 3):
    """(network, tokens): a random attention/MLP network with weights uniform in [-scale, scale] rounded to
    multiples of 1/16 (so they are exact in small formats), and a token batch [batch, length] it can run."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    d_model = draw(st.integers(1, max_d_model))
    n_ctx = draw(st.integers(1, max_ctx))
    d_vocab = draw(st.integers(1, max_vocab))
    d_out = draw(st.integers(1, max_vocab))
    n_layers = draw(st.integers(0, max_layers))

    def weights(*shape):
        return np.round(rng.uniform(-scale, scale, size=shape) * 16) / 16

    layers = []
    for _ in range(n_layers):
        H = draw(st.integers(1, max_heads))
        d_head = draw(st.integers(1, max_d_head))
        attention = Attention(weights(H, d_model, d_head), weights(H, d_model, d_head), weights(H, d_model, d_head),
                              weights(H, d_head, d_model), weights(H, d_head), weights(H, d_head),
                              weights(H, d_head), weights(d_model), causal=draw(st.booleans()))
        mlp = None
        if draw(st.booleans()):
            d_mlp = draw(st.integers(1, 4))
            mlp = MLP(weights(d_model, d_mlp), weights(d_mlp), weights(d_mlp, d_model), weights(d_model))
        layers.append(Layer(attention, mlp))
    network = Network(
        Embedding(weights(d_vocab, d_model), weights(n_ctx, d_model)),
        tuple(layers),
        Readout(weights(d_model, d_out), weights(d_out), read=draw(st.sampled_from(["last", "all"]))),
        Basis(tuple(f"x[{k}]" for k in range(d_model))),
        Meta(),
    )
    length = draw(st.integers(1, n_ctx))
    tokens = rng.integers(0, d_vocab, size=(batch, length))
    return network, tokens


@st.composite
def sparse_networks(draw, block_sizes: tuple[int, ...] = (1, 2, 3, 4), max_k: int = 3, max_window: int = 5,
                    **network_options):
    """(network, tokens) as `networks(**network_options)` draws them, with every layer's attention swapped for
    (B,k)-block-sparse attention (B from block_sizes, k 0..max_k) or sliding-window attention (window
    1..max_window), same arrays and causal flag: the sparse kinds on the same random weights."""
    network, tokens = draw(networks(**network_options))
    layers = []
    for layer in network.layers:
        full = layer.mixer
        if draw(st.booleans()):
            options = draw(MIXERS[BlockSparseAttention.kind].options(block_sizes=block_sizes, max_k=max_k))
            mixer = BlockSparseAttention(**full.arrays(), **options, causal=full.causal)
        else:
            options = draw(MIXERS[SlidingWindowAttention.kind].options(max_window=max_window))
            mixer = SlidingWindowAttention(**full.arrays(), **options, causal=full.causal)
        layers.append(Layer(mixer, layer.mlp))
    return Network(network.embedding, tuple(layers), network.readout, network.basis, network.meta), tokens


#: Recurrent kind -> Hypothesis strategy for its options (the non-array fields, each kind's own
#: `witness.mixers.MIXERS[kind].options`), for `hybrid_networks`.
RECURRENT_OPTIONS = {cls.kind: MIXERS[cls.kind].options() for cls in RECURRENT_MIXERS}


@st.composite
def hybrid_networks(draw, kinds: tuple[str, ...] = tuple(RECURRENT_OPTIONS), scale: float = 2.0, **network_options):
    """(network, tokens) as `networks(scale=scale, **network_options)` draws them, with each layer's attention
    kept or swapped for a recurrent mixer of a kind from `kinds` (same H and d_head, fresh weights uniform in
    [-scale, scale] in multiples of 1/16, drawn options): random networks mixing attention and recurrent layers."""
    network, tokens = draw(networks(scale=scale, **network_options))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    layers = []
    for layer in network.layers:
        mixer = layer.mixer
        if draw(st.booleans()):
            cls = MIXERS[draw(st.sampled_from(kinds))].block
            shapes = cls.array_shapes(mixer.n_heads, mixer.d_model, mixer.d_head)
            arrays = {name: np.round(rng.uniform(-scale, scale, size=shape) * 16) / 16
                      for name, shape in shapes.items()}
            arrays.update({name: np.zeros(shapes[name]) for name in cls.zero_arrays})
            mixer = cls(**arrays, **draw(RECURRENT_OPTIONS[cls.kind]))
        layers.append(Layer(mixer, layer.mlp))
    return Network(network.embedding, tuple(layers), network.readout, network.basis, network.meta), tokens


def tasks(name: str, **bounds):
    """Task objects of the registered task `name`, drawn by its record's strategy (`bounds` are the task's own,
    e.g. `tasks("composition", max_L=2)`, `tasks("two_sum", max_n=4)`)."""
    return record_of(name).tasks_strategy(**bounds)


def tokens(task, max_batch: int = 4):
    """A batch [1..max_batch, prompt_length] of valid inputs of `task`, by its record's strategy."""
    return record_of(task).tokens_strategy(task, max_batch)
