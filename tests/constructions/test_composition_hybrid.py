"""The hybrid constructions (one linear + L full layers; two linear + L-1 full layers) and certify's linear-layer
reasoning (the linear step of verify/checker/composition.py).

References: tests/reference_tasks.py (a literal re-reading of conventions §1, independent of witness's task code) for the
answers, and exhaustive enumeration for "every input": certify saying verified where exhaustive finds a failure
would be a soundness bug, and the broken variants below show both that certify refuses them and that they are
really broken.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import witness
import witness.execute
from tests.oracles.reference_tasks import all_composition_inputs, composition_answer_from_tokens
from verify import check
from verify import checker
from verify.certify import certify
from verify.certify.networks import weights_of
from verify.precision import min_precision, network_checker
from verify.result import Status
from witness.arith.semantics import arithmetic
from cli.main import main
from witness.mixers import Attention, LinearAttention

HYBRID, SMALL = "composition_hybrid", "composition_hybrid_small_table"
SMALL_FORMATS = ["float:1,3", "float:2,3", "float:3,3", "float:2,4", "fixed:2,1", "fixed:3,2", "fixed:4,3"]


@pytest.fixture(scope="module")
def hybrid():
    return witness.compile(HYBRID, L=2, m=2, n=[2])


@pytest.fixture(scope="module")
def small():
    return witness.compile(SMALL, L=2, m=2, n=[2])


def runnable(fmt: str, semantics: str):
    try:
        return arithmetic(fmt, semantics)
    except witness.ParameterError:
        return None


@pytest.mark.parametrize("name", [HYBRID, SMALL])
@pytest.mark.parametrize("L, m, n", [(1, 3, ()), (2, 2, (2,))])
def test_answers_match_the_reference_on_every_input(name, L, m, n):
    network = witness.compile(name, L=L, m=m, n=list(n))
    inputs = np.array(list(all_composition_inputs(m, n)))
    expected = [composition_answer_from_tokens(m, n, tokens) for tokens in inputs]
    for fmt in ["fp16", "fixed:4,2"]:
        outputs = witness.execute.run(network, inputs, arithmetic(fmt, "strict")).predictions[:, 0]
        assert outputs.tolist() == expected, fmt


def test_layer_kinds_and_reuse_of_the_composition_layers(hybrid, small):
    composition = witness.compile("composition", L=2, m=2, n=[2])
    assert [type(layer.mixer) for layer in hybrid.layers] == [LinearAttention, Attention, Attention]
    assert [type(layer.mixer) for layer in small.layers] == [LinearAttention, LinearAttention, Attention]
    # The full layers are the composition construction's, weight for weight (the small-table network appends
    # directions, so compare on the composition's own directions).
    for built, original in zip(hybrid.layers[1:], composition.layers[1:]):
        for name, array in original.mixer.arrays().items():
            assert np.array_equal(built.mixer.arrays()[name], array)
    width = composition.d_model
    assert small.basis.labels[:width] == composition.basis.labels
    model_axis = {"W_Q": 1, "W_K": 1, "W_V": 1, "W_O": 2, "b_O": 0}  # the d_model axis of each array
    for name, array in composition.layers[2].mixer.arrays().items():
        built = small.layers[2].mixer.arrays()[name]
        if name in model_axis:
            own, appended = np.split(built, [width], axis=model_axis[name])
            assert np.array_equal(own, array) and not appended.any()
        else:
            assert np.array_equal(built, array)


@pytest.mark.parametrize("m", [2, 5, 9, 16])
def test_small_table_state_grows_with_m(m):
    """Layer 1 keeps the table: d_k = m keys, d_v = b_V value bits, H (d_k d_v + d_k) numbers (conventions §2)."""
    network = witness.compile(SMALL, L=2, m=m, n=[2])
    b_V = max(1, math.ceil(math.log2(2 * m)))  # the code width of the value vocabulary N_1 = 2m
    lookup = network.layers[1].mixer
    assert (lookup.d_k, lookup.d_v) == (m, b_V)
    assert lookup.state_numbers == m * b_V + m
    copy = witness.compile(HYBRID, L=2, m=m, n=[2]).layers[0].mixer
    assert copy.state_numbers == b_V + 1  # the seed copy's state does not grow with the table


@pytest.mark.parametrize("name", [HYBRID, SMALL])
@pytest.mark.parametrize("semantics", ["strict", "theory"])
@pytest.mark.parametrize("L, m, n", [(1, 3, ()), (2, 2, (2,)), (3, 2, (2, 2)), (2, 6, (3,))])
def test_certified_for_every_input(name, semantics, L, m, n):
    network = witness.compile(name, L=L, m=m, n=list(n))
    for fmt in ["fp16", "bf16", "fp32"]:
        result = certify(network, arithmetic(fmt, semantics))
        assert result.status is Status.VERIFIED, (fmt, result.detail.get("reason"))
        assert result.checked == network.task.count()
        certificate = result.detail["certificate"]
        linear = [entry for entry in certificate["proof"]["layers"] if entry["mixer"] == "linear"]
        assert len(linear) == (1 if name == HYBRID else 2)
        assert certificate["proof"]["readout"]["worst_margin"] == 2.0
        assert checker.check(json.loads(json.dumps(certificate)), weights_of(network))["confirmed"]


@pytest.mark.parametrize("name", [HYBRID, SMALL])
@pytest.mark.parametrize("semantics", ["strict", "theory"])
def test_certify_verified_implies_exhaustive_verified(name, semantics):
    """Over formats from far too small to ample; the sweep includes formats where exhaustive finds failures.
    (The small-table network at L = 1 has no softmax layer and is exact in every format, so L = 2 here.)"""
    network = witness.compile(name, L=1, m=3) if name == HYBRID else witness.compile(name, L=2, m=3, n=[1])
    verdicts = {}
    for fmt in SMALL_FORMATS + ["fp16"]:
        arith = runnable(fmt, semantics)
        if arith is None:
            continue
        verdicts[fmt] = (certify(network, arith).status, check.exhaustive(network, arith).status)
        assert verdicts[fmt][0] is not Status.VERIFIED or verdicts[fmt][1] is Status.VERIFIED, fmt
    assert verdicts["fp16"] == (Status.VERIFIED, Status.VERIFIED)
    assert any(exhaustive is Status.FALSIFIED for _, exhaustive in verdicts.values())


def _broken(network, name: str, edit) -> witness.Network:
    array = np.array(network.state_dict()[name], dtype=np.float64)  # the stored dtype may be narrower
    edit(array, network.basis)
    return network.with_arrays({name: array})


def _share_key(array, basis):  # the seed copy's key also fires on the query position (`one` is 1 everywhere)
    array[0, basis.index("one"), 0] = 1.0


def _swap_table_keys(array, basis):  # table entries 0 and 1 answer each other's index
    array[0][:, [0, 1]] = array[0][:, [1, 0]]


def _flip_value(array, basis):  # the copied code's first bit is negated
    array[0, basis.group("val")[0], 0] = -1.0


def _no_query(array, basis):  # the seed copy reads nothing
    array[0, basis.index("one"), 0] = 0.0


def _two_owners(array, basis):  # the lookup's query also selects row a+1: reads two table entries at once
    array[0, basis.group("sel0")[0], 1] = 1.0


BROKEN = [(HYBRID, "blocks.0.attn.W_K", _share_key), (HYBRID, "blocks.0.attn.W_V", _flip_value),
          (HYBRID, "blocks.0.attn.W_Q", _no_query), (SMALL, "blocks.1.attn.W_K", _swap_table_keys),
          (SMALL, "blocks.1.attn.W_Q", _two_owners), (SMALL, "blocks.0.attn.W_K", _share_key),
          (SMALL, "blocks.1.attn.W_V", _flip_value)]


@pytest.mark.parametrize("name, array, edit", BROKEN, ids=[f"{n}-{e.__name__}" for n, _, e in BROKEN])
@pytest.mark.parametrize("semantics", ["strict", "theory"])
def test_broken_linear_layers_are_refused_and_really_broken(name, array, edit, semantics):
    network = _broken(witness.compile(name, L=1, m=3), array, edit)
    arith = arithmetic("fp16", semantics)
    assert check.exhaustive(network, arith).status is Status.FALSIFIED
    result = certify(network, arith)
    assert result.status is Status.UNKNOWN


def test_normaliser_and_relu_feature_map(hybrid):
    """A normaliser is outside the argument (unknown); relu leaves the 0/1 keys and the constant query as they are
    (still certified, and exhaustive agrees)."""
    copy = hybrid.layers[0].mixer
    arrays = copy.arrays()
    normalised = LinearAttention(**arrays, normalize=True)
    relu = LinearAttention(**arrays, feature_map="relu")
    arith = arithmetic("fp16", "strict")
    for mixer, status in [(normalised, Status.UNKNOWN), (relu, Status.VERIFIED)]:
        network = witness.Network(hybrid.embedding, (witness.ir.Layer(mixer, hybrid.layers[0].mlp),)
                                   + hybrid.layers[1:], hybrid.readout, hybrid.basis, hybrid.meta)
        assert certify(network, arith).status is status
        if status is Status.VERIFIED:
            assert check.exhaustive(network, arith).status is Status.VERIFIED


def perturbed(network, seed: int, scale: float):
    """Nonzero entries of three arrays moved by N(0, scale) on the 1/64 grid (the dataflow survives)."""
    rng = np.random.default_rng(seed)
    state = network.state_dict()
    changed = {}
    for name in rng.choice(sorted(state), size=3, replace=False):
        array = np.array(state[name], dtype=np.float64)  # the stored dtype may be narrower
        mask = (rng.random(array.shape) < 0.3) & (array != 0)
        array[mask] += np.round(rng.normal(0, scale, mask.sum()) * 64) / 64
        changed[name] = array
    return network.with_arrays(changed)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), scale=st.sampled_from([0.05, 0.5, 2.0]),
       semantics=st.sampled_from(["strict", "theory"]), name=st.sampled_from([HYBRID, SMALL]))
def test_perturbed_networks_are_never_wrongly_certified(seed, scale, semantics, name):
    network = perturbed(witness.compile(name, L=1, m=3), seed, scale)
    arith = arithmetic("fp16", semantics)
    if certify(network, arith).status is Status.VERIFIED:
        assert check.exhaustive(network, arith).status is Status.VERIFIED


def test_perturbations_both_survive_and_break():
    outcomes = set()
    for seed in range(16):
        network = perturbed(witness.compile([HYBRID, SMALL][seed % 2], L=1, m=3), seed, [0.05, 0.5, 2.0][seed % 3])
        arith = arithmetic("fp16", "strict")
        outcomes.add((certify(network, arith).status, check.exhaustive(network, arith).status))
    assert (Status.VERIFIED, Status.VERIFIED) in outcomes
    assert (Status.UNKNOWN, Status.FALSIFIED) in outcomes
    assert (Status.VERIFIED, Status.FALSIFIED) not in outcomes


@pytest.mark.parametrize("fixture", ["hybrid", "small"])
def test_certificate_tampering_is_caught(fixture, request):
    network = request.getfixturevalue(fixture)
    certificate = certify(network, arithmetic("fp16", "strict")).detail["certificate"]
    text = json.dumps(certificate)
    weights = weights_of(network)
    assert checker.check(json.loads(text), weights)["confirmed"]
    linear = [l for l, entry in enumerate(certificate["proof"]["layers"]) if entry["mixer"] == "linear"][-1]
    for tamper, where in [
        (lambda c: c["proof"]["layers"][linear]["cases"][0].__setitem__(
            "target", c["proof"]["layers"][linear]["cases"][0]["target"] + 1), "cases[0].target"),
        (lambda c: c["proof"]["layers"][linear].__setitem__("mixer", "attention"), "mixer"),
        (lambda c: c["proof"]["layers"][linear].__setitem__("cases", c["proof"]["layers"][linear]["cases"][:-1]),
         "cases"),
    ]:
        tampered = json.loads(text)
        tamper(tampered)
        with pytest.raises(checker.Refused, match=rf"proof\.layers\[{linear}\]\.{where.split('[')[0]}.*differs"):
            checker.check(tampered, weights)


@pytest.mark.parametrize("name", [HYBRID, SMALL])
def test_min_precision_is_sound(name):
    """The certify-based p* is verified exhaustively too."""
    network = witness.compile(name, L=1, m=3)
    found = min_precision(network_checker(network, "certify"), "float", "strict", max_bits=16)
    assert found.status is Status.VERIFIED
    assert check.exhaustive(network, arithmetic(found.format, "strict")).status is Status.VERIFIED


def test_cli_compile_run_certify(tmp_path, capsys):
    net, cert = tmp_path / "hybrid.npz", tmp_path / "cert.json"
    assert main(["compile", HYBRID, "--L", "2", "--m", "4", "--n", "4", "-o", str(net)]) == 0
    capsys.readouterr()
    assert main(["certify", str(net), "--format", "fp16", "--semantics", "strict", "--out", str(cert), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "verified"
    assert main(["check-certificate", str(cert), str(net), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "confirmed"
    assert main(["compile", SMALL, "--L", "2", "--m", "0", "-o", str(net)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


# -- the `forward` layout contrast: a recurrent network with no attention ---------------------------------------
FORWARD = "composition_forward_recurrent"


@pytest.mark.parametrize("L, m, n", [(1, 3, ()), (2, 2, (2,)), (3, 2, (1, 1))])
def test_forward_recurrent_answers_every_input(L, m, n):
    network = witness.compile(FORWARD, L=L, m=m, n=list(n))
    assert {layer.mixer.kind for layer in network.layers} == {"rnn"}
    inputs = np.array(list(all_composition_inputs(m, n, "forward")))
    expected = [composition_answer_from_tokens(m, n, tokens, "forward") for tokens in inputs]
    for fmt in ["fp16", "float:2,3", "fixed:3,0"]:  # small integers only: exact even in tiny formats
        outputs = witness.execute.run(network, inputs, arithmetic(fmt, "strict")).predictions[:, 0]
        assert outputs.tolist() == expected, fmt
    assert check.exhaustive(network, arithmetic("fp16", "theory")).status is Status.VERIFIED


def test_forward_recurrent_state_is_logarithmic():
    """Two state units per captured bit: layer 0 holds the seed's b_V bits and the query digits' bits, every other
    layer b_V bits -- O(L log n) numbers in all, not growing with the tables."""
    for m, n in [(4, (4,)), (64, (64,))]:
        network = witness.compile(FORWARD, L=2, m=m, n=list(n))
        b_V = math.ceil(math.log2(m * n[0]))
        b_w = math.ceil(math.log2(n[0]))
        assert [layer.mixer.d_state for layer in network.layers] == [2 * (b_V + b_w), 2 * b_V, 2 * b_V]


def test_forward_recurrent_broken_variants_fail_and_are_not_certified():
    network = witness.compile(FORWARD, L=2, m=2, n=[2])
    arith = arithmetic("fp16", "strict")
    forgetful = np.array(network.state_dict()["blocks.1.attn.W_s"])
    forgetful[0][np.diag_indices(forgetful.shape[1])] = 0.0  # A no longer keeps the captured bit
    untyped = np.array(network.state_dict()["blocks.1.attn.W_x"])
    untyped[0, network.basis.index("type:z1")] = 0.0  # one condition short of its threshold: never captures
    for name, array in [("blocks.1.attn.W_s", forgetful), ("blocks.1.attn.W_x", untyped)]:
        assert check.exhaustive(network.with_arrays({name: array}), arith).status is Status.FALSIFIED, name
    assert certify(network, arith).status is Status.UNKNOWN  # certify has no argument for rnn layers
