"""lab.train's step: the trainer's module (torch.softmax patterns), its optimiser (fused or multi-tensor AdamW), and
finite checks at evaluation points only, which still refuse a non-finite weight before any network is returned."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lab.train as lab_train  # noqa: E402
from lab.architectures import hybrid_architecture  # noqa: E402
from lab.torch import to_module  # noqa: E402
from lab.train import Architecture, LayerSpec, optimiser_for, train, training_module  # noqa: E402
from witness.errors import TrainingDiverged  # noqa: E402
from witness.execute import run  # noqa: E402
from witness.tasks import Composition  # noqa: E402

TASK = Composition(L=1, m=4)
FULL = Architecture(H=2, d_head=8, d_model=16, layers=(LayerSpec(d_mlp=16), LayerSpec(causal=False)))


def test_only_the_trainers_module_uses_torch_softmax():
    network = FULL.initial_network(TASK, seed=0)
    assert not any(layer.attn.fused_softmax for layer in to_module(network).blocks)
    assert all(layer.attn.fused_softmax for layer in training_module(network).blocks)


def test_the_fused_pattern_agrees_with_the_exact_one_to_rounding():
    network = FULL.initial_network(TASK, seed=0)
    tokens = torch.as_tensor(TASK.random_tokens(np.random.default_rng(0), 32))
    exact = to_module(network)
    fused = to_module(network)
    for layer in fused.blocks:
        layer.attn.fused_softmax = True
    torch.testing.assert_close(fused(tokens), exact(tokens), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(exact.read_logits(tokens).detach().numpy(),
                               np.asarray(run(network, tokens.numpy()).logits, dtype=float), rtol=1e-12, atol=1e-12)


def test_the_optimiser_is_fused_or_multi_tensor():
    optimiser = optimiser_for(training_module(FULL.initial_network(TASK, seed=0)), lr=1e-3)
    assert isinstance(optimiser, torch.optim.AdamW)
    assert optimiser.defaults["fused"] or optimiser.defaults["foreach"]


def test_a_hybrid_trains_to_the_same_weights_bit_for_bit():
    architecture = hybrid_architecture(1, 1, "deltanet", H=1, d_head=4, d_model=8)
    a, report_a = train(architecture, TASK, steps=20, seed=2, batch_size=16, eval_every=10)
    b, report_b = train(architecture, TASK, steps=20, seed=2, batch_size=16, eval_every=10)
    for name, array in a.state_dict().items():
        assert np.array_equal(array, b.state_dict()[name]), name
    assert report_a.history == report_b.history


def test_a_non_finite_weight_with_a_finite_loss_is_still_refused(monkeypatch):
    """Weights are checked at the evaluation points and at the end, not every step: a weight the loss never
    reads (here set to NaN after the last step) is still refused before a network is returned."""
    step, calls = lab_train.training_step, []

    def poisoning(module, *args, **kwargs):
        loss = step(module, *args, **kwargs)
        calls.append(loss)
        if len(calls) == 3:
            with torch.no_grad():
                module.embed.W_E[0] = math.nan
        return loss

    monkeypatch.setattr(lab_train, "training_step", poisoning)
    with pytest.raises(TrainingDiverged, match=r"training diverged at step 3 .*: embed\.W_E not finite"):
        train(FULL, TASK, steps=3, seed=0, batch_size=8, eval_every=10)
