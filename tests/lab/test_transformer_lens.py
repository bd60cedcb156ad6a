"""lab.torch.to_transformer_lens: a TransformerLens 4.x TransformerBridge on compiled and random weights."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformer_lens.model_bridge.sources.native",
                    reason="needs transformer-lens 4.x (pip install 'witness[lens]')")

import witness  # noqa: E402
import lab.torch as wt  # noqa: E402
from lab import strategies as ws  # noqa: E402
from witness.errors import ParameterError  # noqa: E402
from witness.execute import run  # noqa: E402


def uniform_shape(network):
    """TransformerLens needs one head count, head size and attention direction for all layers."""
    if not network.layers:
        return False
    first = network.layers[0].mixer
    return all((l.mixer.n_heads, l.mixer.d_head, l.mixer.causal) == (first.n_heads, first.d_head, first.causal)
               for l in network.layers)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(ws.networks(max_layers=2, max_heads=2, max_d_model=6, max_d_head=4, max_ctx=6).filter(
    lambda pair: uniform_shape(pair[0])), st.integers(0, 2**31))
def test_bridge_logits_and_patterns_agree_with_executor(net_and_tokens, seed):
    """The sqrt(d_head) fold rounds W_Q, and TransformerLens sums in its own order, so this is agreement to
    float64 rounding (1e-9 relative), not bit for bit; the compiled test below is exact."""
    network, tokens = net_and_tokens
    rng = np.random.default_rng(seed)  # non-dyadic weights, so the fold really rounds
    network = network.with_arrays({k: v + rng.normal(scale=0.1, size=v.shape) for k, v in network.state_dict().items()})
    bridge = wt.to_transformer_lens(network)
    expected = run(network, tokens, trace=True)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(torch.as_tensor(tokens))
    read = list(expected.read_positions)
    scale = 1.0 + np.abs(expected.logits).max()
    assert np.abs(logits.numpy()[:, read] - expected.logits).max() <= 1e-9 * scale
    for l in range(len(network.layers)):
        pattern = cache[f"blocks.{l}.attn.hook_pattern"].numpy()
        assert np.abs(pattern - expected.trace[f"blocks.{l}.attn.hook_pattern"]).max() <= 1e-9
        resid = cache[f"blocks.{l}.hook_resid_post"].numpy()
        assert np.abs(resid - expected.trace[f"blocks.{l}.hook_resid_post"]).max() <= 1e-9 * scale


def test_compiled_construction_in_transformer_lens():
    """On the (L+1)-layer construction the readout logits are small integers, so they agree exactly, every
    input of the family is answered, and the layer-l pattern at the last position puts its largest weight on
    the table entry that the chain visits."""
    network = witness.compile("composition", L=2, m=2, n=[2])
    task = network.task
    tokens = np.concatenate(list(task.enumerate_tokens(4096)))
    bridge = wt.to_transformer_lens(network)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(torch.as_tensor(tokens))
    assert np.array_equal(logits[:, -1].numpy(), run(network, tokens).logits[:, 0])
    assert np.array_equal(logits[:, -1].argmax(-1).numpy(), task.answers(tokens))

    # independent chain-following: i_0 = z0, i_1 = z_1(i_0), i_2 = z_2(w_1 * m + i_1)
    rows = np.arange(len(tokens))
    z0 = tokens[:, task.segment("z0").start]
    i1 = tokens[rows, task.segment("z1").start + z0]
    w1 = tokens[:, task.segment("w").start] - task.value_vocab
    targets = [np.full(len(tokens), task.segment("z0").start), task.segment("z1").start + z0,
               task.segment("z2").start + w1 * task.m + i1]
    for l, target in enumerate(targets):
        last_row = cache[f"blocks.{l}.attn.hook_pattern"][:, 0, -1].numpy()
        assert np.array_equal(last_row.argmax(-1), target), l


def test_hooks_can_intervene():
    """A hook that zeroes layer 0's pattern removes the seed fetch, and the answer changes for some input."""
    network = witness.compile("composition", L=1, m=3)
    tokens = torch.as_tensor(network.task.random_tokens(0, 64))
    bridge = wt.to_transformer_lens(network)

    def ablate(pattern, hook):
        return torch.zeros_like(pattern)

    with torch.no_grad():
        clean = bridge(tokens)[:, -1].argmax(-1)
        ablated = bridge.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_pattern", ablate)])[:, -1].argmax(-1)
    assert np.array_equal(clean.numpy(), network.task.answers(tokens.numpy()))
    assert not torch.equal(clean, ablated)


def test_unsupported_shapes_are_refused():
    network = witness.compile("composition", L=1, m=3)
    mixed = network.with_arrays({})
    layer = mixed.layers[1]
    from witness.ir import Layer, Network
    from witness.mixers import Attention

    bidirectional = Attention(**layer.mixer.arrays(), causal=False)
    broken = Network(mixed.embedding, (mixed.layers[0], Layer(bidirectional, layer.mlp)), mixed.readout,
                     mixed.basis, mixed.meta)
    with pytest.raises(ParameterError, match="same in every layer"):
        wt.to_transformer_lens(broken)
