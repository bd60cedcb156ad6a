"""The executor agrees with an independent plain-numpy forward pass that reads only the saved .npz file."""

from __future__ import annotations

import ast
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from tests.oracles import reference_forward
import witness
from tests.oracles.reference_tasks import composition_answer_from_tokens
from lab import strategies as ws
from witness.execute import run
from witness.ir import MLP, Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention

# Both sides compute in float64 but sum in different orders (batched matmuls vs per-head, per-position loops),
# so logits may differ in the last bits: each rounding costs a relative 2^-53 ~ 1.1e-16 and a few layers of
# products, sums and exp compound that to at most ~1e-14 relative to the largest logit (the worst seen over
# thousands of random networks is 8e-15). 1e-9 leaves a factor of 10^5 for that, yet any real disagreement -- a
# wrong mask, a missing bias, a transposed weight -- moves the logits by a large fraction of their size.
RELATIVE_TOLERANCE = 1e-9


def logit_scale(logits: np.ndarray) -> float:
    return max(1.0, float(np.abs(logits).max()))


@settings(max_examples=150, deadline=None)
@given(ws.networks(max_layers=3, max_heads=3, max_d_model=8, max_ctx=8))
def test_executor_matches_reference_on_random_networks(network_and_tokens):
    network, tokens = network_and_tokens
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "net.npz"
        network.save(path)
        reference = reference_forward.forward(path, tokens)
    outputs = run(network, tokens)
    tolerance = RELATIVE_TOLERANCE * logit_scale(reference)
    assert outputs.logits.shape == reference.shape
    assert np.abs(outputs.logits - reference).max() <= tolerance
    # predictions must agree wherever the reference's winner leads the runner-up by more than the tolerance
    ordered = np.sort(reference, axis=-1)
    clear = np.ones(reference.shape[:-1], bool)  # a single output logit always has a unique winner
    if reference.shape[-1] > 1:
        clear = ordered[..., -1] - ordered[..., -2] > 2 * tolerance
    assert np.array_equal(outputs.predictions[clear], reference.argmax(axis=-1)[clear])


def hand_network(causal: bool) -> Network:
    """Two tokens, d_model 2, one head, d_head 1; every value below is worked out by hand in the test."""
    attention = Attention(
        W_Q=[[[1.0], [1.0]]], W_K=[[[0.0], [math.log(3.0)]]], W_V=[[[1.0], [0.0]]], W_O=[[[0.0, 4.0]]],
        b_Q=[[0.0]], b_K=[[0.0]], b_V=[[0.0]], b_O=[0.5, 0.0], causal=causal)
    mlp = MLP(W_in=[[-1.0], [1.0]], b_in=[-1.0], W_out=[[2.0, 0.0]], b_out=[0.0, 0.0])
    return Network(Embedding(np.eye(2), np.zeros((2, 2))), (Layer(attention, mlp),),
                   Readout(np.eye(2), [0.0, 0.25], read="all"), Basis(("a", "b")), Meta())


@pytest.mark.parametrize("causal, expected", [
    # causal: position 0 sees only itself (fetches v = 1), position 1 weighs scores (0, ln 3) as (1/4, 3/4)
    # and fetches 1/4. Residuals after attention (1.5, 4) and (0.5, 2); the MLP adds 2 * relu(b - a - 1) =
    # 3 and 1 to the first coordinate; the readout adds 0.25 to the second.
    (True, [[4.5, 4.25], [1.5, 2.25]]),
    # bidirectional: position 0 also fetches 1/4, so its residual is (1.5, 1) and the MLP adds nothing.
    (False, [[1.5, 1.25], [1.5, 2.25]]),
])
def test_reference_and_executor_match_hand_computation(causal, expected, tmp_path):
    network = hand_network(causal)
    network.save(tmp_path / "hand.npz")
    reference = reference_forward.forward(tmp_path / "hand.npz", [0, 1])[0]
    executed = run(network, [0, 1]).logits[0]
    # exp(ln 3) is 3 only up to rounding, hence a tolerance far below the hand values' spacing of 0.25
    np.testing.assert_allclose(reference, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(executed, expected, rtol=0, atol=1e-12)


def test_reference_solves_the_compiled_composition_network(tmp_path):
    net = witness.compile("composition", L=3, m=3, n=[2, 3])
    net.save(tmp_path / "composition.npz")
    tokens = net.task.random_tokens(seed=5, count=30)
    predictions = reference_forward.forward(tmp_path / "composition.npz", tokens)[:, 0].argmax(axis=-1)
    assert predictions.tolist() == [composition_answer_from_tokens(3, (2, 3), row) for row in tokens]


def test_reference_does_not_import_witness():
    tree = ast.parse(Path(reference_forward.__file__).read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name and name.split(".")[0] == "witness"]
