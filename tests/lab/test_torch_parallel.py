"""The chunked (parallel) recurrent forms of lab.torch against the step-by-step reference, in float64.

Every matrix-state form in `witness.mixers.RECURRENT_MIXERS`, with each of its options, on random networks (the
trainer's initialisation): logits and the gradient of every parameter agree to 1e-10 relative, with chunk sizes
that split the prompt into several chunks, a ragged last chunk, and one chunk holding the whole prompt.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lab.torch as wt  # noqa: E402
from witness.mixers import FEATURE_MAPS, GATES, RECURRENT_MIXERS  # noqa: E402
from witness.tasks import Composition  # noqa: E402
from lab.train import Architecture, LayerSpec  # noqa: E402

TASK = Composition(1, 5)  # prompt length 7
LONG_TASK = Composition(1, 14)  # prompt length 16: a whole number of chunks of 4 or 8
#: 3 and 5 leave a ragged last chunk of a 7-token prompt, 64 holds it whole; 4 and 8 split 16 tokens evenly.
CHUNK_SIZES = {TASK: (3, 5, 64), LONG_TASK: (4, 8)}
TOLERANCE = 1e-10

#: (mixer kind, options) for every matrix-state form and every option value it takes.
FORMS = ([("linear", {"feature_map": feature_map, "normalize": normalize})
          for feature_map in FEATURE_MAPS for normalize in (False, True)]
         + [("decay", {"gate": gate}) for gate in GATES]
         + [(cls.kind, {}) for cls in RECURRENT_MIXERS if cls.kind not in ("linear", "decay", "rnn")])


@pytest.fixture(autouse=True)
def one_thread():
    """One thread, as the trainer runs: on matrices this small, handing work between threads costs far more than
    it saves (milliseconds a matmul on a busy machine)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def network_of(kind, options, task, per_row=False):
    """A random two-layer network whose layers are this recurrent form (plus an MLP). `per_row`: the decay form
    with one decay per state row (W_alpha [H, d_model, d_k]). A ReLU feature map with the normaliser gets positive
    query and key biases, so that no q . z is exactly zero (0 / 0 is NaN in both forms; see the test below)."""
    layers = (LayerSpec(mixer=kind, options=options, d_mlp=8), LayerSpec(mixer=kind, options=options))
    network = Architecture(H=2, d_head=4, d_model=8, layers=layers).initial_network(task, seed=3)
    rng = np.random.default_rng(4)
    replacements = {}
    for l, layer in enumerate(network.layers):
        mixer = layer.mixer
        if per_row:
            replacements[f"blocks.{l}.attn.W_alpha"] = rng.normal(scale=0.3, size=(2, 8, 4))
            replacements[f"blocks.{l}.attn.b_alpha"] = mixer.b_alpha + rng.normal(scale=0.1, size=(2, 4))
        if options.get("feature_map") == "relu" and options.get("normalize"):
            replacements[f"blocks.{l}.attn.b_Q"] = mixer.b_Q + 1.0
            replacements[f"blocks.{l}.attn.b_K"] = mixer.b_K + 1.0
    return network.with_arrays(replacements)


def logits_and_gradients(module, tokens, parallel):
    """The logits, and d(sum of squared logits)/d(parameter) for every trainable parameter."""
    for block in module.blocks:
        block.attn.parallel = parallel
    module.zero_grad()
    logits = module(tokens)
    logits.square().sum().backward()
    return logits.detach(), {name: p.grad.clone() for name, p in module.named_parameters() if p.requires_grad}


def assert_relatively_close(actual, expected, name):
    torch.testing.assert_close(actual, expected, rtol=TOLERANCE, atol=TOLERANCE * float(expected.abs().max()),
                               msg=lambda message: f"{name}: {message}")


def cases():
    for kind, options in FORMS:
        for task in CHUNK_SIZES:
            yield pytest.param(kind, options, task, False, id=f"{kind}-{options}-n{task.prompt_length}")
    for gate in GATES:
        for task in CHUNK_SIZES:
            yield pytest.param("decay", {"gate": gate}, task, True, id=f"decay-per-row-{gate}-n{task.prompt_length}")


@pytest.mark.parametrize("kind, options, task, per_row", list(cases()))
def test_parallel_form_agrees_with_the_reference_loop(kind, options, task, per_row):
    module = wt.to_module(network_of(kind, options, task, per_row))
    tokens = torch.as_tensor(task.random_tokens(np.random.default_rng(0), 3))
    expected, expected_gradients = logits_and_gradients(module, tokens, parallel=False)
    for chunk_size in CHUNK_SIZES[task]:
        for block in module.blocks:
            block.attn.chunk_size = chunk_size
        logits, gradients = logits_and_gradients(module, tokens, parallel=True)
        assert_relatively_close(logits, expected, f"logits, chunk {chunk_size}")
        assert gradients.keys() == expected_gradients.keys()
        for name, gradient in gradients.items():
            assert_relatively_close(gradient, expected_gradients[name], f"d/d {name}, chunk {chunk_size}")


def test_zero_normalisers_give_the_same_non_finite_outputs():
    """relu(q) . z = 0 (relu zeroes every entry) is 0 / 0 = NaN in the reference; the parallel form divides by the
    same normaliser and so is non-finite at exactly the same positions."""
    options = {"feature_map": "relu", "normalize": True}
    network = Architecture(H=2, d_head=4, d_model=8, layers=(LayerSpec(mixer="linear", options=options),)
                           ).initial_network(LONG_TASK, seed=1)
    tokens = torch.as_tensor(LONG_TASK.random_tokens(np.random.default_rng(0), 3))
    with torch.no_grad():
        parallel = wt.to_module(network)(tokens)
        reference = wt.to_module(network, parallel=False)(tokens)
    finite = torch.isfinite(reference)
    assert not finite.all() and torch.equal(finite, torch.isfinite(parallel))
    assert_relatively_close(parallel[finite], reference[finite], "finite logits")


@pytest.mark.parametrize("kind", ["gla", "gated_deltanet"])
def test_strong_decays_stay_finite_in_float32(kind):
    """Decays near zero (alpha ~ e^-30, so products within a chunk far below float32's smallest number) underflow
    to zero in the cumulative log-gate form, which never divides by them: float32 stays finite, gradients
    included, and close to the float64 reference."""
    network = Architecture(H=1, d_head=4, d_model=8, layers=(LayerSpec(mixer=kind),)).initial_network(LONG_TASK, 0)
    network = network.with_arrays({"blocks.0.attn.b_alpha": np.full_like(network.layers[0].mixer.b_alpha, -30.0)})
    tokens = torch.as_tensor(LONG_TASK.random_tokens(np.random.default_rng(0), 3))
    module = wt.to_module(network, dtype=torch.float32)
    logits = module(tokens)
    logits.square().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in module.parameters() if p.grad is not None)
    with torch.no_grad():
        reference = wt.to_module(network, parallel=False)(tokens)
    torch.testing.assert_close(logits.detach().double(), reference, rtol=1e-4, atol=1e-4 * float(reference.abs().max()))


def test_to_module_runs_the_parallel_form_unless_asked_for_the_reference():
    network = network_of("deltanet", {}, TASK)
    assert all(block.attn.parallel for block in wt.to_module(network).blocks)
    assert not any(block.attn.parallel for block in wt.to_module(network, parallel=False).blocks)


def test_the_general_rnn_runs_step_by_step_either_way():
    """The RNN is nonlinear in its state (relu), so it has no chunked form: `parallel` leaves it bit for bit."""
    module = wt.to_module(network_of("rnn", {"activation": "relu"}, TASK))
    tokens = torch.as_tensor(TASK.random_tokens(np.random.default_rng(0), 3))
    logits, gradients = logits_and_gradients(module, tokens, parallel=True)
    expected, expected_gradients = logits_and_gradients(module, tokens, parallel=False)
    assert torch.equal(logits, expected)
    assert all(torch.equal(gradient, expected_gradients[name]) for name, gradient in gradients.items())
