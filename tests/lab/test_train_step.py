"""lab.train's step: the trainer's module (torch.softmax patterns), its optimiser (torch's fused AdamW kernel, called
without torch.optim, so without torch._dynamo), and finite checks at evaluation points only, which still refuse a
non-finite weight before any network is returned."""

import math
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_the_optimiser_steps_as_torchs_fused_adamw_bit_for_bit(weight_decay):
    """The same steps, with the rate changed between them and one parameter left without a gradient at first (its
    state starts late, as torch.optim's does), give the same weights as torch.optim.AdamW(fused=True)."""
    network = FULL.initial_network(TASK, seed=0)
    ours, theirs = training_module(network), training_module(network)
    optimisers = (optimiser_for(ours, 1e-3, weight_decay),
                  torch.optim.AdamW(theirs.parameters(), lr=1e-3, weight_decay=weight_decay, fused=True))
    tokens = torch.as_tensor(TASK.random_tokens(np.random.default_rng(0), 16))
    targets = torch.as_tensor(TASK.answers(tokens.numpy()).reshape(16, -1))
    for step, lr in enumerate([1e-3, 3e-3, 2e-3]):
        for module, optimiser in zip((ours, theirs), optimisers):
            optimiser.param_groups[0]["lr"] = lr
            optimiser.zero_grad()
            torch.nn.functional.cross_entropy(module.read_logits(tokens)[:, -1], targets[:, -1]).backward()
            if step == 0:
                module.unembed.b_U.grad = None
            optimiser.step()
    for (name, mine), (_, torchs) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert torch.equal(mine, torchs), name


def test_training_imports_neither_dynamo_nor_inductor():
    """torch.optim's optimisers import torch._dynamo (and torch._inductor) when built; the trainer's does not."""
    code = ("import sys; from lab.train import Architecture, LayerSpec, train; from witness.tasks import Composition; "
            "train(Architecture(H=1, d_head=2, d_model=4, layers=(LayerSpec(),)), Composition(L=1, m=3), steps=2); "
            "print(sorted(m for m in sys.modules if m.startswith(('torch._dynamo', 'torch._inductor'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "[]"


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
