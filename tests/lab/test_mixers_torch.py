"""Recurrent mixers in the torch bridge and the trainer."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

torch = pytest.importorskip("torch")

import lab.torch as wt  # noqa: E402
from tests.lab.test_torch_bridge import assert_same_network  # noqa: E402
from lab import strategies as ws  # noqa: E402
from witness.errors import ParameterError  # noqa: E402
from witness.execute import run  # noqa: E402
from witness.tasks import Composition  # noqa: E402
from lab.train import Architecture, LayerSpec, train  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(ws.hybrid_networks(max_d_model=5, max_d_head=3, max_ctx=6))
def test_round_trip_of_hybrid_networks_is_bit_for_bit(net_and_tokens):
    network, _ = net_and_tokens
    pinned = {f"blocks.{l}.attn.{name}" for l, layer in enumerate(network.layers)
              for name in getattr(layer.mixer, "zero_arrays", ())}  # RetNet's W_alpha stays zero
    rng = np.random.default_rng(len(network.layers))  # as test_torch_bridge.continuous: all 53 bits in use
    network = network.with_arrays({name: rng.normal(size=array.shape) for name, array in network.state_dict().items()
                                   if name not in pinned})
    assert_same_network(network, wt.from_module(wt.to_module(network)))


@SETTINGS
@given(ws.hybrid_networks(max_d_model=5, max_d_head=3, max_ctx=6, scale=0.5))
def test_module_agrees_with_the_executor_in_float64(net_and_tokens):
    """numpy's and torch's BLAS choose their own order inside each dot product (and torch's sigmoid is its own
    kernel), so agreement is to float64 rounding; exactness at a format is tests/test_mixers_strict.py's job."""
    network, tokens = net_and_tokens
    expected = run(network, tokens).logits
    with torch.no_grad():
        module_logits = wt.to_module(network).read_logits(torch.as_tensor(tokens)).numpy()
    finite = np.isfinite(expected)
    assert np.array_equal(finite, np.isfinite(module_logits))
    scale = 1.0 + np.abs(expected[finite]).max(initial=0.0)
    assert np.abs(module_logits[finite] - expected[finite]).max(initial=0.0) <= 1e-9 * scale


def test_transformer_lens_export_refuses_recurrent_layers():
    network = wt.from_module(wt.to_module(Architecture(
        H=1, d_head=2, d_model=4, layers=(LayerSpec(mixer="deltanet"),)).initial_network(Composition(1, 2), 0)))
    with pytest.raises(ParameterError, match="blocks.0 is a DeltaNet; TransformerLens export covers softmax"):
        wt.to_transformer_lens(network)


def test_layer_spec_names_a_mixer_and_its_options():
    with pytest.raises(ParameterError, match="LayerSpec.mixer"):
        LayerSpec(mixer="lstm")
    with pytest.raises(ParameterError, match="may set"):
        LayerSpec(mixer="deltanet", options={"gate": "none"})
    spec = LayerSpec(mixer="linear", options={"feature_map": "relu"}, d_mlp=8)
    assert spec == LayerSpec(mixer="linear", options=(("feature_map", "relu"),), d_mlp=8) and hash(spec)
    network = Architecture(H=2, d_head=3, d_model=6, layers=(spec,)).initial_network(Composition(1, 2), 0)
    mixer = network.layers[0].mixer
    assert (mixer.kind, mixer.feature_map, mixer.n_heads, mixer.d_k, mixer.d_v) == ("linear", "relu", 2, 3, 3)


def test_training_a_hybrid_keeps_each_form():
    """A short run trains every array it may (the loss moves them) and leaves RetNet's pinned W_alpha at zero."""
    task = Composition(1, 3)
    layers = (LayerSpec(mixer="retnet", d_mlp=8), LayerSpec(mixer="gated_deltanet", d_mlp=8), LayerSpec(d_mlp=8))
    architecture = Architecture(H=1, d_head=2, d_model=4, layers=layers)
    before = architecture.initial_network(task, 0)
    trained, report = train(architecture, task, steps=5, seed=0, eval_every=5)
    assert [layer.mixer.kind for layer in trained.layers] == ["retnet", "gated_deltanet", "attention"]
    assert not np.any(trained.layers[0].mixer.W_alpha)
    for name in ("blocks.0.attn.b_alpha", "blocks.1.attn.W_beta", "blocks.1.attn.W_alpha", "blocks.2.attn.W_Q"):
        assert not np.array_equal(trained.state_dict()[name], before.state_dict()[name]), name
    assert report.steps == 5 and 0.0 <= report.accuracy <= 1.0
