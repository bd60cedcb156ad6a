"""certify on composition networks and on the construction named by its parameters; the dataflow graph.

(The trusted checker's own tests -- its arithmetic, its independence, the reproducers of wrong `verified`s and the
forged certificates it must refuse -- are in tests/test_checker.py.)

The reference for "every input is answered" is exhaustive enumeration (verify.check.exhaustive, itself tested
against tests/reference_tasks.py): certify saying verified where exhaustive finds a failure would be a soundness
bug, and the tests below look for one on several formats -- including formats too small for the construction, where
exhaustive does fail -- and on randomly perturbed networks.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import witness
from constructions.composition import describe
from verify import check, checker
from verify.certify import Construction, certify
from verify.certify.networks import weights_of
from lab.dataflow import dataflow
from verify.result import Status
from lab import strategies as ws
from witness.arith.semantics import arithmetic
from cli.main import main

SMALL_FORMATS = ["float:1,3", "float:2,3", "float:3,3", "float:2,4", "float:3,4", "float:1,4", "float:1,5",
                 "float:2,5", "fixed:2,1", "fixed:3,1", "fixed:4,1", "fixed:3,2", "fixed:4,3", "fixed:5,4", "fixed:6,3"]


@pytest.fixture(scope="module")
def l1():
    return witness.compile("composition", L=1, m=3)


@pytest.fixture(scope="module")
def l2():
    return witness.compile("composition", L=2, m=2, n=[2])


def runnable(fmt: str, semantics: str):
    try:
        return arithmetic(fmt, semantics)
    except witness.ParameterError:
        return None


@pytest.mark.parametrize("semantics", ["strict", "theory"])
@pytest.mark.parametrize("L, m, n", [(1, 3, []), (2, 2, [2]), (3, 2, [2, 2]), (4, 2, [1, 2, 2])])
def test_construction_is_certified_for_l_1_to_4(L, m, n, semantics):
    network = witness.compile("composition", L=L, m=m, n=n)
    for fmt in ["fp16", "bf16", "fp32"]:
        result = certify(network, arithmetic(fmt, semantics))
        assert result.status is Status.VERIFIED, (fmt, result.detail.get("reason"))
        assert result.checked == network.task.count()
        proof = result.detail["certificate"]["proof"]
        assert len(proof["layers"]) == L + 1
        assert proof["readout"]["worst_margin"] == 2.0  # <code(i), code(i)> - <code(v), code(i)> >= 2


@pytest.mark.parametrize("fixture", ["l1", "l2"])
@pytest.mark.parametrize("semantics", ["strict", "theory"])
def test_certify_verified_implies_exhaustive_verified(fixture, semantics, request):
    """Over formats from far too small to ample: never verified where some input is answered wrongly, and the
    sweep includes formats where exhaustive does find failures (so the implication is tested, not vacuous)."""
    network = request.getfixturevalue(fixture)
    verdicts = {}
    for fmt in SMALL_FORMATS + ["fp16"]:
        arith = runnable(fmt, semantics)
        if arith is None:
            continue
        certified = certify(network, arith).status
        exhaustive = check.exhaustive(network, arith).status
        verdicts[fmt] = (certified, exhaustive)
        assert certified is not Status.VERIFIED or exhaustive is Status.VERIFIED, fmt
    assert verdicts["fp16"] == (Status.VERIFIED, Status.VERIFIED)
    if semantics == "strict":
        assert any(exhaustive is Status.FALSIFIED for _, exhaustive in verdicts.values())


def perturbed(network, seed: int, scale: float, keep_structure: bool):
    """Three weight arrays with ~30% of their entries moved by N(0, scale), on the 1/64 grid; with
    `keep_structure` only nonzero entries move, so the dataflow (and certify's assumptions) can survive."""
    rng = np.random.default_rng(seed)
    state = network.state_dict()
    changed = {}
    for name in rng.choice(sorted(state), size=3, replace=False):
        array = np.array(state[name], dtype=np.float64)  # the stored dtype may be narrower
        mask = (rng.random(array.shape) < 0.3) & ((array != 0) | (not keep_structure))
        array[mask] += np.round(rng.normal(0, scale, mask.sum()) * 64) / 64
        changed[name] = array
    return network.with_arrays(changed)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), scale=st.sampled_from([0.05, 0.5, 2.0]),
       semantics=st.sampled_from(["strict", "theory"]), keep_structure=st.booleans())
def test_perturbed_networks_are_never_wrongly_certified(l1, seed, scale, semantics, keep_structure):
    """certify verified => exhaustive verified, on randomly perturbed networks."""
    network = perturbed(l1, seed, scale, keep_structure)
    arith = arithmetic("fp16", semantics)
    certified = certify(network, arith).status
    assert certified is not Status.FALSIFIED  # certify proves or refuses
    assert certified is not Status.VERIFIED or check.exhaustive(network, arith).status is Status.VERIFIED


def test_perturbations_both_survive_and_break(l1):
    """The implication above is exercised: some perturbed networks are certified, some are wrong somewhere."""
    outcomes = set()
    for seed in range(12):
        network = perturbed(l1, seed, [0.05, 0.5, 2.0][seed % 3], keep_structure=True)
        arith = arithmetic("fp16", "strict")
        outcomes.add((certify(network, arith).status, check.exhaustive(network, arith).status))
    assert (Status.VERIFIED, Status.VERIFIED) in outcomes
    assert (Status.UNKNOWN, Status.FALSIFIED) in outcomes
    assert (Status.VERIFIED, Status.FALSIFIED) not in outcomes


def test_broken_structure_is_unknown(l2):
    arith = arithmetic("fp32", "strict")
    W_K = np.array(l2.state_dict()["blocks.1.attn.W_K"])
    W_K[0, l2.basis.index("val[0]"), 1] = 1.0  # keys now read the token's value: scores depend on content
    result = certify(l2.with_arrays({"blocks.1.attn.W_K": W_K}), arith)
    assert result.status is Status.UNKNOWN
    assert "keys read directions that depend on more than the position" in result.detail["reason"]

    W_V = np.array(l2.state_dict()["blocks.2.attn.W_V"])
    W_V[0, l2.basis.index("R1[0]"), 0] = 1.0  # values read a slot an earlier layer computed
    result = certify(l2.with_arrays({"blocks.2.attn.W_V": W_V}), arith)
    assert result.status is Status.UNKNOWN and "values read" in result.detail["reason"]

    fewer = witness.ir.Network(l2.embedding, l2.layers[:2], l2.readout, l2.basis, l2.meta)  # a layer removed
    assert certify(fewer, arith).status is Status.UNKNOWN

    W_Q = np.array(l2.state_dict()["blocks.2.attn.W_Q"])
    W_Q[0] = 0.0  # no scale: attention is uniform, the fetch is an average
    assert certify(l2.with_arrays({"blocks.2.attn.W_Q": W_Q}), arith).status is Status.UNKNOWN


@settings(max_examples=15, deadline=None)
@given(ws.networks())
def test_random_networks_are_unknown(net_and_tokens):
    network, _ = net_and_tokens
    result = certify(network, arithmetic("fp16", "strict"))
    assert result.status is Status.UNKNOWN and result.detail["reason"]


def test_random_weights_in_the_composition_shape_are_unknown(l2):
    rng = np.random.default_rng(0)
    state = {name: np.round(rng.uniform(-2, 2, array.shape) * 16) / 16 for name, array in l2.state_dict().items()}
    result = certify(l2.with_arrays(state), arithmetic("fp32", "strict"))
    assert result.status is Status.UNKNOWN


def parametric(L, m, n, fmt, semantics="theory"):
    return certify(Construction(L, m, tuple(n)), arithmetic(fmt, semantics))


@pytest.mark.parametrize("L, m, n", [(1, 2**64, []), (2, 2**32, [2**32]), (3, 2**20, [2**20, 2**24]),
                                     (4, 2**16, [2**16, 2**16, 2**16])])
def test_parametric_theory_up_to_tables_of_2_to_the_64(L, m, n):
    result = parametric(L, m, n, "fp32")
    assert result.status is Status.VERIFIED, result.detail.get("reason")
    certificate = result.detail["certificate"]
    assert max(m * np.prod(n, dtype=object), m) == 2**64 or L == 2
    assert checker.check(certificate)["confirmed"]
    # log2(inputs) = log2 m + sum_l N_l log2 N_l + log2 prod n: far beyond any enumeration
    assert float(result.detail["inputs_log2"]) > 2**20 and result.checked == 0


#: Formats from ample to too small for the small families below, with what both checks say under theory: certify
#: verifies exactly where every input is answered (measured by exhaustive enumeration), and refuses elsewhere.
PARAMETRIC_FORMATS = {"fp16": True, "float:3,4": True, "fixed:8,8": True, "float:2,3": True, "fixed:3,2": True,
                      "float:1,3": True, "fixed:3,1": True, "float:1,2": False, "float:2,2": False,
                      "float:3,2": False, "fixed:2,1": False, "fixed:2,2": False}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the smallest formats overflow to inf/NaN, as they should
@pytest.mark.parametrize("L, m, n", [(2, 2, [2]), (1, 4, []), (1, 5, [])])
def test_parametric_agrees_with_exhaustive_on_small_families(L, m, n):
    """Parametric theory verified => every input of the built network answered under theory semantics, asserted for
    every format; and never falsified (certify proves or refuses). Both sides are exercised: the formats include
    ones exhaustive falsifies, which certify must not verify."""
    network = witness.compile("composition", L=L, m=m, n=n)
    for fmt, holds in PARAMETRIC_FORMATS.items():
        certified = parametric(L, m, n, fmt).status
        exhaustive = check.exhaustive(network, arithmetic(fmt, "theory")).status
        assert certified is not Status.VERIFIED or exhaustive is Status.VERIFIED, fmt
        assert (certified, exhaustive) == ((Status.VERIFIED, Status.VERIFIED) if holds
                                           else (Status.UNKNOWN, Status.FALSIFIED)), fmt


def test_parametric_refuses_strict_beyond_its_limit():
    result = parametric(2, 2**20, [2**20], "fp32", "strict")
    assert result.status is Status.UNKNOWN and "strict" in result.detail["reason"]


def test_strict_at_two_thousand_tokens():
    network = witness.compile("composition", L=2, m=40, n=[49])
    assert network.task.prompt_length == 2002
    result = certify(network, arithmetic("fp32", "strict"))
    assert result.status is Status.VERIFIED, result.detail.get("reason")
    assert len(result.detail["certificate"]["proof"]["layers"][2]["cases"]) == 40 * 49  # one per address of z_2


def test_certificate_round_trip_through_a_file(l2, tmp_path):
    result = certify(l2, arithmetic("fp16", "strict"))
    path, net = tmp_path / "cert.json", tmp_path / "net.npz"
    path.write_text(json.dumps(result.detail["certificate"]))
    l2.save(net)
    assert checker.check_files(path, net)["confirmed"]
    with pytest.raises(checker.Refused, match="sha256"):
        checker.check(result.detail["certificate"], weights_of(witness.compile("composition", L=2, m=2, n=[1])))


def test_cli_certify_and_check(l2, tmp_path, capsys):
    net, cert = tmp_path / "net.npz", tmp_path / "cert.json"
    l2.save(net)
    assert main(["certify", str(net), "--format", "fp16", "--semantics", "strict", "--out", str(cert), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert (payload["status"], payload["format"], payload["semantics"]) == ("verified", "fp16", "strict")
    assert main(["check-certificate", str(cert), str(net), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "confirmed"

    other = tmp_path / "other.npz"
    witness.compile("composition", L=2, m=3, n=[2]).save(other)
    assert main(["check-certificate", str(cert), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sha256" in err
    assert main(["check-certificate", str(cert), str(net), "--json"]) == 0
    budget = json.loads(capsys.readouterr().out)["budget"]
    assert budget == {**{k: v for k, v in l2.budget(16).as_dict().items() if k in budget}}

    assert main(["certify", "composition", "--L", "3", "--m", "1048576", "--n", "1048576", "16777216",
                 "--format", "fp32", "--semantics", "theory", "--out", str(cert), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "verified"
    assert main(["check-certificate", str(cert)]) == 0
    capsys.readouterr()

    assert main(["certify", str(net), "--format", "float:1,2", "--semantics", "theory", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["status"] == "unknown"
    assert main(["certify", str(net), "--format", "float:1,2", "--semantics", "theory", "--out", str(cert)]) == 3
    assert main(["certify", "composition", "--m", "2"]) == 2
    assert main(["check-certificate", str(tmp_path / "missing.json")]) == 2
    capsys.readouterr()


def test_dataflow_classifies_the_construction(l2, tmp_path):
    flow = dataflow(l2)
    labels = l2.basis.labels
    named = lambda dirs: {labels[d] for d in dirs}  # noqa: E731
    assert named(flow.layers[2].key) == {"type:z2", "idx_w[0]", "idx_v[0]", "idx_v[1]"}
    assert named(flow.layers[2].key) <= named(flow.position_only)
    assert named(flow.layers[2].value) == {"val[0]", "val[1]"} <= named(flow.token_only)
    assert named(flow.layers[2].query) == {"one", "w1[0]", "R1[0]", "R1[1]"}
    assert named(flow.layers[1].mlp_writes) == {"fetch[0]", "fetch[1]", "R1[0]", "R1[1]"}
    graph = flow.graph()
    assert graph.has_edge("idx_v[0]", "blocks.2.attn") and "key" in graph.edges["idx_v[0]", "blocks.2.attn"]["roles"]
    assert graph.has_edge("blocks.1.mlp", "R1[0]")
    path = tmp_path / "graph.png"
    assert main(["inspect", str(_saved(l2, tmp_path)), "--graph", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_description_matches_the_built_network():
    description = describe(3, 2, (2, 3))
    network = witness.compile("composition", L=3, m=2, n=[2, 3])
    for built, described in zip(network.layers, description.layers()):
        for name, array in built.mixer.arrays().items():
            assert np.array_equal(array, described.mixer.arrays()[name])


def _saved(network, folder):
    path = folder / "net.npz"
    network.save(path)
    return path
