"""certify for 2-Sum networks (the checker's verify/checker/two_sum.py), its certificate and re-check, and
min-precision two_sum.

Soundness is judged against exhaustive enumeration (verify.check.exhaustive, itself tested against a plain loop
in tests/reference_tasks.py) on small families, over formats from far too small to ample -- so that exhaustive
does find failures -- and over seeded mutations of the network: certify must never say verified where some input
is answered wrongly. The expected bits of single runs come from tests/reference_tasks.py, a literal double loop.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import witness
import witness.execute
from tests.oracles.reference_tasks import two_sum_answer as reference_bits
from verify import check, checker
from verify.certify import certify
from verify.certify.networks import weights_of
from verify.precision import min_precision, two_sum_checker
from verify.result import Status
from witness.arith.semantics import arithmetic
from cli.main import main

FORMATS = ["float:1,2", "float:2,2", "float:2,3", "float:5,4", "float:7,5", "fp16", "fp32", "fixed:3,0", "fixed:2,2",
           "fixed:4,1", "fixed:5,6", "fixed:6,10"]


def runnable(fmt: str, semantics: str):
    try:
        return arithmetic(fmt, semantics)
    except witness.ParameterError:
        return None


def verdicts(network, formats, semantics):
    """(certify, exhaustive) status per runnable format."""
    out = {}
    for fmt in formats:
        arith = runnable(fmt, semantics)
        if arith is not None:
            out[fmt] = (certify(network, arith).status, check.exhaustive(network, arith).status)
    return out


@pytest.mark.parametrize("semantics", ["strict", "theory"])
@pytest.mark.parametrize("n, M, t, causal", [(4, 4, 2, False), (4, 4, 1, True), (5, 3, 0, False), (3, 6, 4, True),
                                             (6, 2, 0, False)])
def test_certify_verified_implies_exhaustive_verified(n, M, t, causal, semantics):
    """Never verified where some input is answered wrongly; verified at ample formats; and the sweep reaches
    formats where exhaustive does fail, so the implication is tested, not vacuous."""
    network = witness.compile("two_sum", n=n, M=M, t=t, causal=causal)
    found = verdicts(network, FORMATS, semantics)
    for fmt, (certified, exhaustive) in found.items():
        assert certified is not Status.VERIFIED or exhaustive is Status.VERIFIED, fmt
    assert found["fp32"] == (Status.VERIFIED, Status.VERIFIED)
    assert any(exhaustive is Status.FALSIFIED for _, exhaustive in found.values())


# -- seeded mutations: perturbed weights, a shrunk scale, one bit too few --------------------------------------
def perturbed(network, seed: int, scale: float, keep_structure: bool):
    """Two weight arrays with ~30% of their entries moved by N(0, scale), on the 1/64 grid; with `keep_structure`
    only nonzero entries move, so the dataflow (and certify's assumptions) can survive."""
    rng = np.random.default_rng(seed)
    state = network.state_dict()
    changed = {}
    for name in rng.choice(sorted(state), size=2, replace=False):
        array = np.array(state[name])
        mask = (rng.random(array.shape) < 0.3) & ((array != 0) | (not keep_structure))
        array[mask] += np.round(rng.normal(0, scale, mask.sum()) * 64) / 64
        changed[name] = array
    return network.with_arrays(changed)


def shrunk(network, factor: float):
    """The attention scale lambda divided by `factor`: the off-match mass grows."""
    return network.with_arrays({"blocks.0.attn.W_Q": np.array(network.layers[0].mixer.W_Q) / factor})


def mutations():
    """(kind, network, format, semantics): 24 perturbations, 12 shrunk scales, 16 formats one bit short."""
    base = witness.compile("two_sum", n=4, M=4, t=2)
    causal = witness.compile("two_sum", n=4, M=3, t=1, causal=True)
    out = []
    for seed in range(24):
        network = perturbed(base if seed % 2 else causal, seed, [0.05, 0.5, 2.0][seed % 3], seed % 4 < 2)
        out.append(("perturbed", network, "fp16", ["strict", "theory"][seed % 2]))
    for index, factor in enumerate([1.5, 2, 3, 4, 8, 16]):
        for semantics in ("strict", "theory"):
            out.append(("shrunk", shrunk(base if index % 2 else causal, factor), "fp32", semantics))
    # one bit too few: the construction around the formats where exhaustive enumeration starts to hold
    for network in (base, causal):
        for fmt, semantics in (("float:1,2", "strict"), ("float:1,3", "strict"), ("float:2,2", "theory"),
                               ("float:2,3", "theory"), ("fixed:3,0", "theory"), ("fixed:3,1", "theory"),
                               ("fixed:4,1", "strict"), ("fixed:2,2", "strict")):
            out.append(("one bit short", network, fmt, semantics))
    return out


def test_seeded_mutations_are_never_wrongly_certified():
    """>= 50 mutations: certify never says verified where exhaustive finds a failure. Per kind, some mutations
    are wrong somewhere (exhaustive kills them) and certify refuses every one of those."""
    tally: dict[str, list[int]] = {}
    for kind, network, fmt, semantics in mutations():
        arith = arithmetic(fmt, semantics)
        certified = certify(network, arith).status
        exhaustive = check.exhaustive(network, arith).status
        assert not (certified is Status.VERIFIED and exhaustive is not Status.VERIFIED), (kind, fmt, semantics)
        counts = tally.setdefault(kind, [0, 0, 0])  # [mutations, wrong somewhere, certified]
        counts[0] += 1
        counts[1] += exhaustive is Status.FALSIFIED
        counts[2] += certified is Status.VERIFIED
    assert sum(counts[0] for counts in tally.values()) >= 50
    for kind, (total, wrong, certified) in tally.items():
        assert wrong > 0, kind  # the kind does break networks: the implication is exercised
    assert tally["perturbed"][2] > 0  # and harmless perturbations are still proven


def test_without_the_position_test_certify_refuses():
    """The +P_i term is what tells a lone self-match from a partner; without it the network fails somewhere."""
    network = witness.compile("two_sum", n=4, M=4, t=2)
    W_out = np.array(network.layers[0].mlp.W_out)
    W_out[W_out > 0] = 0.0
    broken = network.with_arrays({"blocks.0.mlp.W_out": W_out})
    arith = arithmetic("fp32", "strict")
    assert check.exhaustive(broken, arith).status is Status.FALSIFIED
    result = certify(broken, arith)
    assert result.status is Status.UNKNOWN and "not provably" in result.detail["reason"]


@pytest.mark.parametrize("edit, reason", [
    ("keys read position", "token-only"),
    ("unpaired unit", "no partner unit"),
    ("hidden bias", "no bias"),
    ("two heads of output", "verdict"),
])
def test_broken_structure_is_unknown(edit, reason):
    network = witness.compile("two_sum", n=5, M=4, t=1)
    state = {name: np.array(array) for name, array in network.state_dict().items()}
    labels = network.basis.labels
    if edit == "keys read position":
        state["blocks.0.attn.W_K"][0, labels.index("pos[0]"), 0] = 1.0
    elif edit == "unpaired unit":
        state["blocks.0.mlp.W_in"][:, 1] *= 2
    elif edit == "hidden bias":
        state["blocks.0.mlp.b_in"][0] = 0.5
    else:
        state["blocks.0.mlp.b_out"][labels.index("mix_pos[0]")] = 1.0
    result = certify(network.with_arrays(state), arithmetic("fp32", "strict"))
    assert result.status is Status.UNKNOWN and reason in result.detail["reason"]


def test_random_weights_in_the_two_sum_shape_never_crash_or_mislead():
    """Dense random weights, sparse random edits and zeroed arrays: certify answers (mostly unknown, with a
    reason) and whatever it verifies, exhaustive enumeration confirms."""
    network = witness.compile("two_sum", n=5, M=4, t=1)
    rng = np.random.default_rng(0)
    statuses = []
    for trial in range(45):
        state = {}
        for name, array in network.state_dict().items():
            array = np.array(array)
            if trial % 3 == 0:
                array = np.round(rng.normal(0, 1, array.shape) * 8) / 8
            elif trial % 3 == 1:
                edit = rng.random(array.shape) < 0.1
                array[edit] = np.round(rng.normal(0, 2, edit.sum()) * 4) / 4
            elif rng.random() < 0.3:
                array = np.zeros_like(array)
            state[name] = array
        mutated = network.with_arrays(state)
        arith = arithmetic(["fp16", "fixed:5,6", "float:3,4"][trial % 3], ["strict", "theory"][trial % 2])
        result = certify(mutated, arith)
        statuses.append(result.status)
        if result.status is Status.VERIFIED:
            assert check.exhaustive(mutated, arith).status is Status.VERIFIED
        else:
            assert result.status is Status.UNKNOWN and result.detail["reason"]
    assert Status.UNKNOWN in statuses


@pytest.mark.parametrize("n, M, t, causal, fmt, semantics", [
    (64, 64, 0, False, "fp32", "strict"), (64, 64, 7, True, "fp16", "theory"), (256, 100, 3, False, "fp32", "strict"),
    (256, 256, 255, True, "bf16", "theory"),
])
def test_larger_families_are_certified(n, M, t, causal, fmt, semantics):
    """Sizes where enumeration (M^n inputs) is hopeless; a sample is run too, against the double loop."""
    network = witness.compile("two_sum", n=n, M=M, t=t, causal=causal)
    arith = arithmetic(fmt, semantics)
    result = certify(network, arith)
    assert result.status is Status.VERIFIED, result.detail.get("reason")
    assert float(result.detail["inputs_log2"]) == pytest.approx(n * np.log2(M), rel=1e-5)
    batch = np.random.default_rng(n + M).integers(0, M, size=(8, n))
    batch[0, : n // 2] = (t - batch[0, 0]) % M  # many matches at once
    predicted = witness.execute.run(network, batch, arith).predictions
    assert predicted.tolist() == [reference_bits(row, M, t, causal) for row in batch]


def test_mixed_semantics_and_a_claim_about_another_task_are_refused():
    network = witness.compile("two_sum", n=4, M=4, t=0)
    assert certify(network, arithmetic("fp16", "mixed")).status is Status.UNKNOWN
    composition = witness.compile("composition", L=1, m=3)
    weights = weights_of(composition)
    claim = {"task": "two_sum", "params": network.meta.params, "format": "fp32", "semantics": "strict",
             "network": {"sha256": weights.fingerprint()}}
    with pytest.raises(checker.Refused, match="the network file is about composition"):
        checker.prove(claim, weights)


# -- certificates -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def certified():
    network = witness.compile("two_sum", n=12, M=8, t=3, causal=True)
    return network, certify(network, arithmetic("fp16", "theory")).detail["certificate"]


def test_certificate_is_confirmed(certified):
    network, certificate = certified
    summary = checker.check(json.loads(json.dumps(certificate)), weights_of(network))
    assert summary["confirmed"] and summary["inputs"] == str(8 ** 12)
    proof = certificate["proof"]
    assert len(proof["scores"]) == 8 and len(proof["readout"]["cases"]) == 12 + 11


@pytest.mark.parametrize("tamper, where", [
    (lambda c: c["proof"]["scores"][2].update(partner=5), "scores[2].partner"),
    (lambda c: c["proof"]["scores"][0].update(score_gap=1e6), "scores[0].score_gap"),
    (lambda c: c["proof"]["scores"][1].update(off_match_numerator=1e-30), "scores[1].off_match_numerator"),
    (lambda c: c["proof"]["scores"].pop(), "proof.scores"),
    (lambda c: c["proof"]["readout"]["cases"][3].update(margin=1e3), "cases[3].margin"),
    (lambda c: c["proof"]["readout"]["cases"][4].update(verdict_bound=-c["proof"]["readout"]["cases"][4]
                                                        ["verdict_bound"]), "cases[4].verdict_bound"),
    (lambda c: c["proof"]["readout"]["cases"].pop(0), "readout.cases"),
    (lambda c: c.update(status="unknown"), "kind, version, claim and proof"),
])
def test_tampered_certificates_are_rejected(certified, tamper, where):
    network, certificate = certified
    tampered = json.loads(json.dumps(certificate))
    tamper(tampered)
    with pytest.raises(checker.Refused, match=where.replace("[", r"\[").replace("]", r"\]")):
        checker.check(tampered, weights_of(network))


def test_certificate_for_another_network_is_rejected(certified):
    _, certificate = certified
    with pytest.raises(checker.Refused, match="sha256"):
        checker.check(certificate, weights_of(witness.compile("two_sum", n=12, M=8, t=4, causal=True)))


# -- minimal precision ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family, semantics", [("float", "theory"), ("fixed", "strict")])
def test_min_precision_is_verified_at_p_and_not_below(family, semantics):
    found = min_precision(two_sum_checker(8, 4, 1), family, semantics)
    assert found.status is Status.VERIFIED
    network = witness.compile("two_sum", n=8, M=4, t=1)
    assert certify(network, arithmetic(found.format, semantics)).status is Status.VERIFIED
    assert found.below and all(trial.status != "verified" for trial in found.below)
    assert all(trial.p == found.p - 1 for trial in found.below)


def test_min_precision_by_exhaustive_is_at_most_the_certified_one():
    """certify is sound, so the p* it proves can only lie at or above the one exhaustive enumeration finds."""
    for family in ("float", "fixed"):
        proven = min_precision(two_sum_checker(4, 3, 1), family, "strict")
        enumerated = min_precision(two_sum_checker(4, 3, 1, method="exhaustive"), family, "strict")
        assert enumerated.p <= proven.p


# -- command line -----------------------------------------------------------------------------------------------
def test_cli_compile_certify_check(tmp_path, capsys):
    net, cert = str(tmp_path / "net.npz"), str(tmp_path / "cert.json")
    assert main(["compile", "two_sum", "--n", "64", "--M", "64", "--t", "0", "--causal", "-o", net]) == 0
    assert main(["certify", net, "--format", "fp32", "--semantics", "strict", "--out", cert, "--json"]) == 0
    capsys.readouterr()
    assert main(["certify", net, "--format", "fp32", "--semantics", "strict", "--out", cert, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert (payload["status"], payload["format"], payload["inputs_log2"]) == ("verified", "fp32", "384")
    assert main(["check-certificate", cert, net, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "confirmed"
    assert main(["certify", net, "--format", "float:3,4", "--semantics", "strict", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["status"] == "unknown"


def test_cli_run_random_counts_whole_instances(tmp_path, capsys):
    path = str(tmp_path / "net.npz")
    network = witness.compile("two_sum", n=6, M=4, t=2)
    network.save(path)
    assert main(["run", path, "--random", "30", "--seed", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["correct"] == 30
    W_out = np.array(network.layers[0].mlp.W_out)
    W_out[W_out > 0] = 0.0  # no position test: a lone self-match answers 1
    network.with_arrays({"blocks.0.mlp.W_out": W_out}).save(path)
    assert main(["run", path, "--random", "30", "--seed", "1", "--json"]) == 1  # a failure found
    payload = json.loads(capsys.readouterr().out)
    assert payload["total"] == 30 and payload["correct"] < 30
    example = payload["counterexample"]
    assert list(example["expected"]) == reference_bits(example["tokens"], 4, 2, False)
    assert list(example["output"]) != list(example["expected"])


def test_cli_min_precision_two_sum(capsys):
    assert main(["min-precision", "two_sum", "--n", "8", "--M", "4", "--t", "1", "--family", "float",
                 "--semantics", "theory", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["status"] == "verified" and payload["below"]
    assert all(trial["status"] != "verified" and trial["p"] == payload["p"] - 1 for trial in payload["below"])


@pytest.mark.parametrize("argv", [
    ["min-precision", "two_sum", "--n", "8", "--M", "4", "--family", "float", "--semantics", "theory"],
    ["min-precision", "two_sum", "--L", "1", "--n", "8", "--M", "4", "--t", "0", "--family", "float",
     "--semantics", "theory"],
    ["min-precision", "composition", "--L", "1", "--m", "3", "--t", "0", "--family", "float", "--semantics",
     "theory"],
])
def test_cli_min_precision_refuses_mixed_up_options(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "min-precision" in err and "Traceback" not in err
