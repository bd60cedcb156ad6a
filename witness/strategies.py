"""Public Hypothesis strategies: task parameters, instances, and small random networks.

    from hypothesis import given
    from witness import strategies as ws

    @given(ws.networks())
    def test_something(net_and_tokens): ...
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from witness.ir import MLP, Attention, Basis, Embedding, Layer, Meta, Network, Readout


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
