"""lab.architectures.cannot_express: which probes are labelled as unable to express the task, and the claim behind
the label shown on the networks themselves, run by the executor."""

import numpy as np
import pytest

pytest.importorskip("torch")

from lab.architectures import cannot_express, full_architecture, hybrid_architecture  # noqa: E402
from lab.train import Architecture, LayerSpec, train  # noqa: E402
from witness.execute import run  # noqa: E402
from witness.tasks import Composition  # noqa: E402
from witness.tasks.composition import CompositionInstance  # noqa: E402

TASK = Composition(L=1, m=4)
#: (z_0; z_1[0], z_1[1]): the first two answer 0, the last two answer 1, and both pairs hold the same tokens at
#: the same positions (the argument of `cannot_express`).
QUADRUPLE = [(0, 0, 1), (1, 1, 0), (1, 0, 1), (0, 1, 0)]
SHAPE = {"H": 1, "d_head": 4, "d_model": 8, "mlp_ratio": 0}
#: The architectures the label covers, with whether the layer's read divides by a softmax normaliser.
LABELLED = {
    "0 full + linear": (hybrid_architecture(0, 1, "linear", **SHAPE), False),
    "0 full + linear, 2 heads": (hybrid_architecture(0, 1, "linear", **{**SHAPE, "H": 2}), False),
    "0 full + retnet": (hybrid_architecture(0, 1, "retnet", **SHAPE), False),
    "1 full": (full_architecture(1, **SHAPE), True),
}


def quadruple_tokens(task: Composition) -> np.ndarray:
    rest = tuple(range(2, task.m))  # the table's other entries, the same in all four inputs
    tokens = np.stack([task.tokens(CompositionInstance(z0, ((a, b, *rest),))) for z0, a, b in QUADRUPLE])
    assert task.answers(tokens).tolist() == [0, 0, 1, 1]
    return tokens


def additive_margins(network, tokens: np.ndarray, softmax: bool) -> np.ndarray:
    """F = Z (logit_0 - logit_1) at the read position of each input, run by the float64 executor. A softmax head's
    normaliser Z is exp(q . k_read) / pattern[read, read], and exp(q . k_read) is the same for every input (the
    read position's token and position are), so F is taken up to that one positive factor."""
    out = run(network, tokens, trace=True)
    residual_in = out.trace["hook_embed"][:, -1]
    assert np.array_equal(residual_in, np.broadcast_to(residual_in[0], residual_in.shape))  # one query for all
    margins = out.logits[:, 0, 0] - out.logits[:, 0, 1]
    return margins / out.trace["blocks.0.attn.hook_pattern"][:, 0, -1, -1] if softmax else margins


@pytest.mark.parametrize("name", list(LABELLED))
def test_the_labelled_probes_cannot_be_right_on_all_four_inputs(name):
    """For any weights (three seeds of the trainer's initialisation and a trained network), F sums to the same over
    the two inputs answering 0 as over the two answering 1; being right on all four would need F > 0 on the first
    two and F < 0 on the others, so some input is always wrong."""
    architecture, softmax = LABELLED[name]
    assert "no MLP, at L = 1" in cannot_express(architecture, TASK)
    tokens = quadruple_tokens(TASK)
    networks = [architecture.initial_network(TASK, seed) for seed in range(3)]
    networks.append(train(architecture, TASK, steps=40, seed=0, lr=1e-2)[0])
    for network in networks:
        F = additive_margins(network, tokens, softmax)
        assert F[0] + F[1] == pytest.approx(F[2] + F[3], rel=1e-9, abs=1e-12)
        assert not (F[0] > 0 and F[1] > 0 and F[2] < 0 and F[3] < 0)
        assert (run(network, tokens).predictions[:, 0] != [0, 0, 1, 1]).any()


def test_a_gated_layer_is_not_additive_so_it_is_not_labelled():
    """The contrast: GLA's decay at z_0's position depends on z_0 and scales what the table wrote, so the same
    identity fails on its networks, and the label is not given."""
    architecture = hybrid_architecture(0, 1, "gla", **SHAPE)
    assert cannot_express(architecture, TASK) is None
    F = additive_margins(architecture.initial_network(TASK, 0), quadruple_tokens(TASK), softmax=False)
    assert abs(F[0] + F[1] - F[2] - F[3]) > 1e-6


@pytest.mark.parametrize("architecture, task", [
    (full_architecture(2, **SHAPE), TASK),  # the control
    (full_architecture(1, **{**SHAPE, "H": 2}), TASK),  # two softmax heads: a sum of two ratios
    (hybrid_architecture(0, 1, "linear", **{**SHAPE, "mlp_ratio": 1}), TASK),  # an MLP after the sum
    (Architecture(H=1, d_head=4, d_model=8, layers=(LayerSpec(mixer="linear", options={"normalize": True}),)),
     TASK),  # a normaliser of either sign
    (hybrid_architecture(0, 1, "deltanet", **SHAPE), TASK),
    (hybrid_architecture(0, 2, "linear", **SHAPE), TASK),  # the second layer's query depends on the input
    (hybrid_architecture(0, 1, "linear", **SHAPE), Composition(L=2, m=2, n=(2,))),
    (hybrid_architecture(0, 1, "linear", **SHAPE), Composition(L=1, m=4, layout="forward")),  # read at a table entry
])
def test_no_label_where_the_argument_does_not_apply(architecture, task):
    assert cannot_express(architecture, task) is None
