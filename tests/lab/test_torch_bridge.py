"""lab.torch: IR -> nn.Module -> IR is bit for bit; the module computes what the executor computes."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

torch = pytest.importorskip("torch")

import witness  # noqa: E402
import lab.torch as wt  # noqa: E402
from lab import strategies as ws  # noqa: E402
from witness.errors import ParameterError  # noqa: E402
from witness.execute import run  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def continuous(network, seed):
    """The same network with every array replaced by normal(0, 1) draws: weights that are not dyadic, so the
    round trip has to carry all 53 bits of each entry."""
    rng = np.random.default_rng(seed)
    return network.with_arrays({k: rng.normal(size=v.shape) for k, v in network.state_dict().items()})


def reference_logits(network, tokens):
    """A plain re-implementation of the forward pass (TransformerLens conventions, no hidden score scale)."""
    state = network.state_dict()
    x = state["embed.W_E"][tokens] + state["pos_embed.W_pos"][: tokens.shape[1]]
    n = tokens.shape[1]
    for l, layer in enumerate(network.layers):
        a = layer.mixer
        out = np.zeros_like(x)
        for h in range(a.n_heads):
            q = x @ a.W_Q[h] + a.b_Q[h]
            k = x @ a.W_K[h] + a.b_K[h]
            v = x @ a.W_V[h] + a.b_V[h]
            scores = q @ np.swapaxes(k, -1, -2)
            if a.causal:
                scores = np.where(np.tril(np.ones((n, n), bool)), scores, -np.inf)
            weights = np.exp(scores - scores.max(-1, keepdims=True))
            weights /= weights.sum(-1, keepdims=True)
            out += weights @ v @ a.W_O[h]
        x = x + out + a.b_O
        if layer.mlp is not None:
            m = layer.mlp
            x = x + np.maximum(x @ m.W_in + m.b_in, 0) @ m.W_out + m.b_out
    return x @ network.readout.W_U + network.readout.b_U


def assert_same_network(a, b):
    state_a, state_b = a.state_dict(), b.state_dict()
    assert state_a.keys() == state_b.keys()
    for name in state_a:
        assert state_b[name].dtype == np.float64  # what from_module gives; the original may store narrower
        assert np.array_equal(state_a[name], state_b[name]), name
    assert a.structure() == b.structure()
    assert a.basis == b.basis and a.meta == b.meta


@SETTINGS
@given(ws.networks(max_d_model=6, max_d_head=3, max_ctx=6))
def test_round_trip_is_bit_for_bit(net_and_tokens):
    network, _ = net_and_tokens
    network = continuous(network, seed=len(network.layers))
    assert_same_network(network, wt.from_module(wt.to_module(network)))


def test_round_trip_of_the_compiled_construction_keeps_labels_and_meta():
    network = witness.compile("composition", L=2, m=2, n=[2])
    back = wt.from_module(wt.to_module(network))
    assert_same_network(network, back)
    assert back.basis.labels[0] == "one" and back.meta.construction == "composition"


@SETTINGS
@given(ws.networks(max_d_model=6, max_d_head=3, max_ctx=6))
def test_module_agrees_with_executor_and_an_independent_reference(net_and_tokens):
    """numpy's and torch's BLAS pick their own summation order inside each dot product and softmax sum, so on
    general weights the two forward passes agree to float64 rounding rather than bit for bit (most of these
    small networks do agree bit for bit; that is not guaranteed). Predictions must agree wherever the winning
    logit is not within rounding of the runner-up."""
    network, tokens = net_and_tokens
    expected = run(network, tokens)
    with torch.no_grad():
        module_logits = wt.to_module(network).read_logits(torch.as_tensor(tokens)).numpy()
    reference = reference_logits(network, tokens)[:, list(expected.read_positions)]
    scale = 1.0 + np.abs(reference).max()
    assert np.abs(module_logits - reference).max() <= 1e-9 * scale
    assert np.abs(expected.logits - reference).max() <= 1e-9 * scale
    ordered = np.sort(expected.logits, axis=-1)
    clear = ordered[..., -1] - (ordered[..., -2] if ordered.shape[-1] > 1 else -np.inf) > 1e-9 * scale
    module_predictions = module_logits.argmax(-1)
    assert np.array_equal(module_predictions[clear], expected.predictions[clear])


def test_compiled_construction_logits_are_bit_for_bit():
    """Exactness where the construction makes it order-independent: each MLP snaps the fetched vector to exact
    ±1 (constructions/composition.py), so the readout logits are small integers in both implementations."""
    network = witness.compile("composition", L=2, m=2, n=[2])
    tokens = np.concatenate(list(network.task.enumerate_tokens(4096)))
    expected = run(network, tokens)
    with torch.no_grad():
        logits = wt.to_module(network).read_logits(torch.as_tensor(tokens)).numpy()
    assert np.array_equal(logits, expected.logits)
    assert np.array_equal(logits[:, 0].argmax(-1), network.task.answers(tokens))


def test_module_logits_at_every_position_match_the_all_position_readout():
    network = witness.compile("composition", L=1, m=3)
    tokens = network.task.random_tokens(0, 5)
    module = wt.to_module(network)
    with torch.no_grad():
        every = module(torch.as_tensor(tokens))
        last = module.read_logits(torch.as_tensor(tokens))
    assert every.shape == (5, tokens.shape[1], network.d_vocab_out)
    assert torch.equal(every[:, -1:], last)


def test_float32_module_imports_back_as_float64_exactly():
    network = witness.compile("composition", L=1, m=3)
    module = wt.to_module(network, dtype=torch.float32)
    assert module.embed.W_E.dtype == torch.float32
    back = wt.from_module(module)  # the construction's weights are exact in float32
    assert_same_network(network, back)


def test_trained_parameters_come_back():
    """An edit made in torch (as training does) shows up in the IR, and nothing else changes."""
    network = witness.compile("composition", L=1, m=3)
    module = wt.to_module(network)
    with torch.no_grad():
        module.blocks[0].attn.W_Q[0, 0, 0] += 0.5
    back = wt.from_module(module)
    changed = network.state_dict()["blocks.0.attn.W_Q"].astype(np.float64)
    changed[0, 0, 0] += 0.5
    assert np.array_equal(back.state_dict()["blocks.0.attn.W_Q"], changed)
    assert np.array_equal(back.state_dict()["embed.W_E"], network.state_dict()["embed.W_E"])


def test_bad_arguments_are_witness_errors():
    with pytest.raises(ParameterError, match="witness Network"):
        wt.to_module("not a network")
    with pytest.raises(ParameterError, match="NetworkModule"):
        wt.from_module(torch.nn.Linear(2, 2))


def test_core_and_cli_do_not_import_torch_or_matplotlib():
    import subprocess
    import sys

    code = ("import sys, witness, cli.main, witness.io, verify.check; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'transformer_lens') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
