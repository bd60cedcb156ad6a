"""Recurrent mixers (conventions §2): float64 runs against plain recurrences written here, IR validation and files,
budget state bits, and the verifier's guard.

The float64 references below are written from the formulas, mostly in a different shape from the executor's
kernels (linear and decay forms in their parallel "attention" form o_t = sum_s (...) v_s, the delta rule with
explicit matrices I - beta k k^T), so their summation orders differ from the executor's: these tests compare with
a float64 rounding tolerance and check *which function* is computed. Exactness at a format is the job of
tests/test_mixers_strict.py (bit for bit against MPFR).
"""

import numpy as np
import pytest

from witness.errors import ParameterError
from witness.execute import run
from witness.ir import Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import GLA, MIXERS, RNN, DecayAttention, DeltaNet, GatedDeltaNet, LinearAttention, Mamba2, RetNet

H, D_MODEL, D_HEAD, LENGTH, VOCAB = 2, 4, 3, 7, 5


def sigmoid(u):
    return 1.0 / (1.0 + np.exp(-u))


def random_arrays(cls, seed, scale=0.5):
    rng = np.random.default_rng(seed)
    arrays = {name: rng.normal(scale=scale, size=shape) for name, shape in cls.array_shapes(H, D_MODEL, D_HEAD).items()}
    arrays.update({name: np.zeros_like(arrays[name]) for name in cls.zero_arrays})
    return arrays


def one_layer(mixer, seed=0):
    """Embedding, the mixer, an identity readout at every position: logits = x + mixer(x)."""
    rng = np.random.default_rng([seed, 1])
    embedding = Embedding(rng.normal(size=(VOCAB, D_MODEL)), rng.normal(size=(LENGTH, D_MODEL)))
    return Network(embedding, (Layer(mixer),), Readout(np.eye(D_MODEL), np.zeros(D_MODEL), read="all"),
                   Basis(tuple(f"x[{i}]" for i in range(D_MODEL))), Meta())


def embedded(network, tokens):
    return network.embedding.W_E[tokens] + network.embedding.W_pos[: len(tokens)]


def heads(mixer, x, W, b):
    """x W[h] + b[h] for each head: a list over heads of [n, width]."""
    return [x @ W[h] + b[h] for h in range(mixer.n_heads)]


def combine(mixer, outputs):
    return sum(o @ mixer.W_O[h] for h, o in enumerate(outputs)) + mixer.b_O


def reference_linear(m, x):
    """Parallel form: o_t = sum_{s <= t} (phi(q_t) . phi(k_s)) v_s, normalised by sum_{s <= t} phi(q_t) . phi(k_s)."""
    phi = (lambda a: np.maximum(a, 0)) if m.feature_map == "relu" else (lambda a: a)
    outputs = []
    for q, k, v in zip(heads(m, x, m.W_Q, m.b_Q), heads(m, x, m.W_K, m.b_K), heads(m, x, m.W_V, m.b_V)):
        q, k = phi(q), phi(k)
        o = np.zeros((len(x), v.shape[1]))
        for t in range(len(x)):
            weights = np.array([q[t] @ k[s] for s in range(t + 1)])
            o[t] = weights @ v[: t + 1]
            if m.normalize:
                o[t] /= weights.sum()
        outputs.append(o)
    return combine(m, outputs)


def reference_decay(m, x):
    """Parallel form: o_t = sum_{s <= t} (q_t * prod_{s < r <= t} alpha_r) . k_s  v_s (alpha per row or scalar)."""
    outputs = []
    gates = heads(m, x, m.W_alpha, m.b_alpha)
    for h, (q, k, v) in enumerate(zip(heads(m, x, m.W_Q, m.b_Q), heads(m, x, m.W_K, m.b_K), heads(m, x, m.W_V, m.b_V))):
        alpha = sigmoid(gates[h]) if m.gate == "sigmoid" else gates[h]
        alpha = np.broadcast_to(alpha, k.shape)
        o = np.zeros((len(x), v.shape[1]))
        for t in range(len(x)):
            for s in range(t + 1):
                decay = np.prod(alpha[s + 1: t + 1], axis=0)
                o[t] += ((q[t] * decay) @ k[s]) * v[s]
        outputs.append(o)
    return combine(m, outputs)


def reference_delta(m, x):
    """Matrix form: S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t."""
    outputs = []
    betas = heads(m, x, m.W_beta, m.b_beta)
    alphas = heads(m, x, m.W_alpha, m.b_alpha) if isinstance(m, GatedDeltaNet) else None
    for h, (q, k, v) in enumerate(zip(heads(m, x, m.W_Q, m.b_Q), heads(m, x, m.W_K, m.b_K), heads(m, x, m.W_V, m.b_V))):
        S = np.zeros((k.shape[1], v.shape[1]))
        o = np.zeros((len(x), v.shape[1]))
        for t in range(len(x)):
            beta = sigmoid(betas[h][t, 0])
            alpha = 1.0 if alphas is None else sigmoid(alphas[h][t, 0])
            S = alpha * (np.eye(len(k[t])) - beta * np.outer(k[t], k[t])) @ S + beta * np.outer(k[t], v[t])
            o[t] = S.T @ q[t]
        outputs.append(o)
    return combine(m, outputs)


def reference_rnn(m, x):
    """s_t = act(W_s^T s_{t-1} + W_x^T x_t + b_x), output s_t W_O."""
    act = (lambda a: np.maximum(a, 0)) if m.activation == "relu" else (lambda a: a)
    outputs = []
    for h in range(m.n_heads):
        s = np.zeros(m.d_state)
        states = []
        for t in range(len(x)):
            s = act(m.W_s[h].T @ s + m.W_x[h].T @ x[t] + m.b_x[h])
            states.append(s)
        outputs.append(np.array(states))
    return combine(m, outputs)


CASES = [
    (LinearAttention, {}, reference_linear),
    (LinearAttention, {"feature_map": "relu", "normalize": True}, reference_linear),
    (DecayAttention, {"gate": "none"}, reference_decay),
    (DecayAttention, {"gate": "sigmoid"}, reference_decay),
    (RetNet, {}, reference_decay),
    (GLA, {}, reference_decay),
    (Mamba2, {}, reference_decay),
    (DeltaNet, {}, reference_delta),
    (GatedDeltaNet, {}, reference_delta),
    (RNN, {"activation": "relu"}, reference_rnn),
    (RNN, {"activation": "identity"}, reference_rnn),
]


@pytest.mark.parametrize("cls, options, reference", CASES, ids=[f"{c.kind}-{o}" for c, o, _ in CASES])
@pytest.mark.parametrize("seed", range(3))
def test_float64_run_is_the_recurrence(cls, options, reference, seed):
    arrays = random_arrays(cls, seed)
    if options.get("normalize"):  # relu features with positive biases: the normaliser stays away from 0
        arrays["b_Q"], arrays["b_K"] = np.abs(arrays["b_Q"]) + 2, np.abs(arrays["b_K"]) + 2
    mixer = cls(**arrays, **options)
    network = one_layer(mixer, seed)
    tokens = np.random.default_rng([seed, 2]).integers(0, VOCAB, size=(4, LENGTH))
    logits = run(network, tokens).logits
    for row, sequence in enumerate(tokens):
        x = embedded(network, sequence)
        expected = x + reference(mixer, x)
        assert np.isfinite(expected).all()
        # Different summation orders (see the module docstring): agreement to float64 rounding, not bit for bit.
        np.testing.assert_allclose(logits[row], expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls, options, reference", CASES[:1] + CASES[7:8], ids=["linear", "deltanet"])
def test_float64_check_notices_a_wrong_recurrence(cls, options, reference):
    """The comparison above can fail: a mixer whose state forgets the past (decay 0) differs from the reference."""
    arrays = random_arrays(cls, 0)
    network = one_layer(cls(**arrays, **options))
    tokens = np.random.default_rng(2).integers(0, VOCAB, size=(1, LENGTH))
    x = embedded(network, tokens[0])
    forgetful = one_layer(DecayAttention(**{k: v for k, v in arrays.items() if not k.endswith("beta")},
                                         W_alpha=np.zeros((H, D_MODEL, 1)), b_alpha=np.zeros((H, 1)), gate="none"))
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(run(forgetful, tokens).logits[0], x + reference(network.layers[0].mixer, x),
                                   rtol=1e-9, atol=1e-12)


# -- the IR: validation and files --------------------------------------------------------------------------------
def test_every_recurrent_kind_is_registered():
    assert {"linear", "decay", "retnet", "gla", "mamba2", "deltanet", "gated_deltanet", "rnn"} <= set(MIXERS)


@pytest.mark.parametrize("build, message", [
    (lambda a: GLA(**{**a(GLA), "W_alpha": np.zeros((H, D_MODEL, 1)), "b_alpha": np.zeros((H, 1))}),
     "one decay per state row"),
    (lambda a: RetNet(**{**a(RetNet), "W_alpha": np.ones((H, D_MODEL, 1))}), "input-independent"),
    (lambda a: Mamba2(**a(Mamba2), gate="none"), "gate 'sigmoid'"),
    (lambda a: DecayAttention(**{**a(DecayAttention), "W_alpha": np.zeros((H, D_MODEL, 2))}), r"\[H, d_model, 1\]"),
    (lambda a: LinearAttention(**a(LinearAttention), feature_map="elu"), "feature_map"),
    (lambda a: LinearAttention(**a(LinearAttention), normalize="yes"), "normalize"),
    (lambda a: RNN(**a(RNN), activation="tanh"), "activation"),
    (lambda a: DeltaNet(**{**a(DeltaNet), "b_beta": np.zeros(H)}), "b_beta"),
    (lambda a: LinearAttention(**{**a(LinearAttention), "W_Q": np.zeros((D_MODEL, D_HEAD))}), "W_Q"),
])
def test_bad_mixers_are_refused(build, message):
    with pytest.raises(ParameterError, match=message):
        build(lambda cls: random_arrays(cls, 0))


KINDS = [(LinearAttention, {"feature_map": "relu", "normalize": True}), (DecayAttention, {"gate": "none"}),
         (RetNet, {}), (GLA, {}), (Mamba2, {}), (DeltaNet, {}), (GatedDeltaNet, {}), (RNN, {"activation": "identity"})]


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("cls, options", KINDS, ids=[c.kind for c, _ in KINDS])
def test_files_round_trip_every_kind_with_its_options(tmp_path, suffix, cls, options):
    from witness.io import load

    network = one_layer(cls(**random_arrays(cls, 1), **options))
    path = tmp_path / f"net{suffix}"
    network.save(path)
    back = load(path)
    assert type(back.layers[0].mixer) is cls
    assert back.structure() == network.structure()
    assert back.structure()["layers"][0] == {"mixer": cls.kind, **options, "mlp": False}
    for name, array in network.state_dict().items():
        assert np.array_equal(back.state_dict()[name], array), name


# -- budget ------------------------------------------------------------------------------------------------------
def test_state_bits_count_the_recurrent_state(tmp_path, capsys):
    import json

    from cli.main import main

    rng = np.random.default_rng(0)
    d_k, d_v, d_state = 3, 2, 5
    linear = LinearAttention(rng.normal(size=(H, D_MODEL, d_k)), rng.normal(size=(H, D_MODEL, d_k)),
                             rng.normal(size=(H, D_MODEL, d_v)), rng.normal(size=(H, d_v, D_MODEL)),
                             np.zeros((H, d_k)), np.zeros((H, d_k)), np.zeros((H, d_v)), np.zeros(D_MODEL))
    rnn = RNN(rng.normal(size=(1, D_MODEL, d_state)), np.zeros((1, d_state)), rng.normal(size=(1, d_state, d_state)),
              rng.normal(size=(1, d_state, D_MODEL)), np.zeros(D_MODEL))
    attention_layer = one_layer(GLA(**random_arrays(GLA, 0))).layers[0]
    network = Network(one_layer(rnn).embedding, (Layer(linear), attention_layer, Layer(rnn)),
                      Readout(np.eye(D_MODEL), np.zeros(D_MODEL)), Basis(tuple(f"x[{i}]" for i in range(D_MODEL))))
    p = 16
    per_layer = [H * (d_k * d_v + d_k) * p, H * (D_HEAD * D_HEAD + D_HEAD) * p, 1 * d_state * p]
    budget = network.budget(p).as_dict()
    assert budget["state_bits_per_layer"] == per_layer == [288, 384, 80]
    assert budget["state_bits"] == sum(per_layer)
    path = tmp_path / "hybrid.npz"
    network.save(path)
    assert main(["inspect", str(path), "--format", "fp16", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["state_bits"], shown["state_bits_per_layer"]) == (sum(per_layer), per_layer)
    assert [layer["mixer"] for layer in shown["layers"]] == ["linear", "gla", "rnn"]
    assert main(["inspect", str(path), "--format", "fp16"]) == 0
    assert f"state bits  {sum(per_layer)}" in capsys.readouterr().out


def test_attention_only_networks_have_no_state_bits():
    import witness

    budget = witness.compile("composition", L=1, m=2).budget(16).as_dict()
    assert budget["state_bits"] == 0 and set(budget["state_bits_per_layer"]) == {0}


# -- the verifier's guard ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("replacement", ["deltanet", "rnn"])
def test_certify_says_unknown_for_a_recurrent_layer_it_does_not_know(replacement):
    import witness
    from verify.certify import certify
    from lab.dataflow import dataflow
    from witness.arith import arithmetic

    network = witness.compile("composition", L=1, m=2)
    assert certify(network, arithmetic("fp16", "strict")).status.value == "verified"
    first = network.layers[0].mixer
    if replacement == "deltanet":
        mixer = DeltaNet(**first.arrays(), W_beta=np.zeros((1, first.d_model, 1)), b_beta=np.zeros((1, 1)))
    else:
        mixer = RNN(first.W_V, first.b_V, np.zeros((1, first.d_head, first.d_head)), first.W_O, first.b_O)
    swapped = Network(network.embedding, (Layer(mixer, network.layers[0].mlp),) + network.layers[1:],
                      network.readout, network.basis, network.meta)
    dataflow(swapped)  # reads the recurrent layer's arrays without failing
    result = certify(swapped, arithmetic("fp16", "strict"))
    assert result.status.value == "unknown"
    assert f"blocks.0.attn is a {replacement} layer" in result.detail["reason"]


# -- theory and mixed: the state leaves each step rounded -------------------------------------------------------
@pytest.mark.parametrize("semantics", ["theory", "mixed"])
@pytest.mark.parametrize("cls, options", KINDS, ids=[c.kind for c, _ in KINDS])
def test_the_state_is_stored_in_the_format_after_every_step(semantics, cls, options):
    from witness.arith import FP16, arithmetic

    arrays = random_arrays(cls, 3)
    if options.get("normalize"):
        arrays["b_Q"], arrays["b_K"] = np.abs(arrays["b_Q"]) + 2, np.abs(arrays["b_K"]) + 2
    network = one_layer(cls(**arrays, **options), 3)
    tokens = np.random.default_rng(4).integers(0, VOCAB, size=(3, LENGTH))
    state = run(network, tokens, arithmetic(FP16, semantics), trace=True).trace["blocks.0.attn.hook_state"]
    assert np.isfinite(state).all() and np.array_equal(FP16.round(state), state)
    float64_state = run(network, tokens, trace=True).trace["blocks.0.attn.hook_state"]
    assert not np.array_equal(FP16.round(float64_state), float64_state)  # so the rounding above did something


def test_plots_draw_hybrids_and_skip_recurrent_layers_for_patterns():
    pytest.importorskip("matplotlib")
    from lab import plots
    from witness.mixers import Attention

    recurrent = one_layer(DeltaNet(**random_arrays(DeltaNet, 0)))
    attention = Attention(**random_arrays(LinearAttention, 1))  # the same eight arrays, d_k = d_v = d_head
    hybrid = Network(recurrent.embedding, (recurrent.layers[0], Layer(attention)), recurrent.readout,
                     recurrent.basis, recurrent.meta)
    tokens = [0, 1, 2]
    plots.overview(hybrid, tokens)
    assert len(plots.attention_patterns(hybrid, tokens).axes) == H + 1  # layer 1's heads and one colorbar
    with pytest.raises(ParameterError, match="blocks.0 is a deltanet layer, which has no attention pattern"):
        plots.attention_patterns(hybrid, tokens, layers=[0])
