"""Every mixer kind registered in `witness.mixers.MIXERS` is wired everywhere: its options strategy draws options the
trainer's LayerSpec takes, its initialisation builds its block, its kernel runs under the executor, its MPFR
reference agrees with that kernel bit for bit, and its torch forward pass agrees with the executor in float64 and
round-trips the block. A kind added to the registry is checked here with no edit of this file."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.oracles.strict_agreement import assert_strict_matches_reference
from lab import strategies as ws
from witness.arith import parse_format
from witness.execute import run
from witness.mixers import MIXERS, RECURRENT_MIXERS
from witness.tasks import Composition
from lab.train import Architecture, LayerSpec

TASK = Composition(1, 3)  # prompt length 5
KINDS = sorted(MIXERS)
REGISTRY = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def network_of(kind: str, options: dict, causal: bool = True, seed: int = 0):
    """Two layers of `kind` (the first with an MLP), built by the trainer from the kind's own initialisation."""
    layers = (LayerSpec(mixer=kind, options=options, causal=causal, d_mlp=3),
              LayerSpec(mixer=kind, options=options, causal=causal))
    return Architecture(H=2, d_head=2, d_model=4, layers=layers).initial_network(TASK, seed)


def test_the_registry_names_each_kind_by_its_block():
    assert set(KINDS) >= {"attention", "block_sparse", "sliding_window", "linear", "decay", "retnet", "gla",
                          "mamba2", "deltanet", "gated_deltanet", "rnn"}
    for kind, mixer in MIXERS.items():
        assert mixer.kind == mixer.block.kind == kind
        assert callable(mixer.kernel) and callable(mixer.reference) and callable(mixer.torch_forward)
    assert set(ws.RECURRENT_OPTIONS) == {cls.kind for cls in RECURRENT_MIXERS}


@pytest.mark.parametrize("kind", KINDS)
@REGISTRY
@given(data=st.data())
def test_each_kind_builds_runs_and_matches_its_reference(kind, data):
    options = data.draw(MIXERS[kind].options())
    causal = data.draw(st.booleans()) if "causal" in MIXERS[kind].block.option_names else True
    network = network_of(kind, options, causal, seed=data.draw(st.integers(0, 2**16)))
    assert all(type(layer.mixer) is MIXERS[kind].block for layer in network.layers)
    tokens = TASK.random_tokens(np.random.default_rng(0), 2)
    outputs = run(network, tokens, trace=True)
    assert outputs.trace["blocks.1.attn.hook_result"].shape[:3] == (2, 2, TASK.prompt_length)
    assert assert_strict_matches_reference(network, tokens, parse_format("float:5,5")) != "overflow"


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_runs_in_torch(kind):
    torch = pytest.importorskip("torch")
    import lab.torch as wt

    network = network_of(kind, {"block_sparse": {"block": 2, "k": 1}, "sliding_window": {"window": 2}}.get(kind, {}))
    tokens = TASK.random_tokens(np.random.default_rng(1), 3)
    for parallel in (True, False):
        module = wt.to_module(network, parallel=parallel)
        back = wt.from_module(module)
        assert back.structure() == network.structure()
        assert all(np.array_equal(a, b) for a, b in zip(back.state_dict().values(), network.state_dict().values()))
        with torch.no_grad():
            logits = module.read_logits(torch.as_tensor(tokens)).numpy()
        expected = run(network, tokens).logits
        assert np.abs(logits - expected).max() <= 1e-9 * (1 + np.abs(expected).max())
