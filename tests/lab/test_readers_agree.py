"""Every reader runs an accepted weights file the same way (issue 27): witness's executor, the torch bridge
(lab.torch), a TransformerLens export and a plain state-dict forward that runs every `blocks.{l}` the file holds
(tests/oracles/reference_forward.py) give the same answer on every input tried. The loaders refuse a file holding
arrays its structure does not name, which only some readers would run (tests/witness/test_unnamed_arrays.py);
these tests are the other half: on the files they accept, the readers agree.

The plain forward and TransformerLens know softmax attention only (a linear layer holds the same array names, and
they would run it as softmax), so they read the softmax networks; the torch bridge, which runs every mixer kind,
also reads the hybrid with a linear layer."""

from __future__ import annotations

import numpy as np
import pytest

import witness
import witness.io
from tests.oracles import reference_forward
from verify import checker
from witness.execute import run

#: name -> (construction, parameters); an accepted file of each is read by every reader that runs its kinds.
SOFTMAX_NETWORKS = {
    "composition L=1": ("composition", {"L": 1, "m": 4}),
    "composition L=2": ("composition", {"L": 2, "m": 2, "n": [2]}),
    "2-Sum": ("two_sum", {"n": 4, "M": 3, "t": 0}),
}
NETWORKS = {**SOFTMAX_NETWORKS, "composition_hybrid L=1": ("composition_hybrid", {"L": 1, "m": 4})}
#: Families with at most this many inputs are tried exhaustively, larger ones on a seeded sample of SAMPLE.
EXHAUSTIVE, SAMPLE = 1024, 50


@pytest.fixture(scope="module")
def accepted(tmp_path_factory):
    """name -> (path, tokens, witness's predictions at the read positions) for a file both loaders accept; the
    constructions are correct, so witness's predictions are the task's answers."""
    folder = tmp_path_factory.mktemp("readers")
    files = {}
    for name, (construction, params) in NETWORKS.items():
        network = witness.compile(construction, **params)
        path = folder / f"{construction}_{len(network.layers)}.npz"
        witness.io.save(network, path)
        checker.load_weights(path)
        loaded = witness.io.load(path)
        task = loaded.task
        if task.count() <= EXHAUSTIVE:
            tokens = np.concatenate(list(task.enumerate_tokens()))
        else:
            tokens = task.random_tokens(seed=0, count=SAMPLE)
        predictions = run(loaded, tokens).predictions
        assert np.array_equal(predictions, task.answers(tokens).reshape(predictions.shape)), name
        files[name] = path, tokens, predictions
    return files


@pytest.mark.parametrize("name", SOFTMAX_NETWORKS)
def test_a_plain_state_dict_forward_agrees(accepted, name):
    path, tokens, predictions = accepted[name]
    assert np.array_equal(reference_forward.forward(path, tokens).argmax(-1), predictions)


@pytest.mark.parametrize("name", NETWORKS)
def test_the_torch_bridge_agrees(accepted, name):
    torch = pytest.importorskip("torch")
    import lab.torch

    path, tokens, predictions = accepted[name]
    module = lab.torch.to_module(witness.io.load(path))
    with torch.no_grad():
        logits = module.read_logits(torch.as_tensor(tokens))
    assert np.array_equal(logits.argmax(-1).numpy(), predictions)


@pytest.mark.parametrize("name", SOFTMAX_NETWORKS)
def test_transformer_lens_agrees(accepted, name):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformer_lens.model_bridge.sources.native",
                        reason="needs transformer-lens 4.x (pip install 'witness[lens]')")
    import lab.torch

    path, tokens, predictions = accepted[name]
    network = witness.io.load(path)
    bridge = lab.torch.to_transformer_lens(network)
    read = list(run(network, tokens[:1]).read_positions)
    with torch.no_grad():
        logits = bridge(torch.as_tensor(tokens))
    assert np.array_equal(logits[:, read].argmax(-1).numpy(), predictions)
