"""The trusted checker (verify.checker): independent of what it checks, exact, and judged by what it refuses.

* Independence: its modules import the standard library, numpy, gmpy2 and safetensors and each other, nothing of
  witness, constructions or the rest of verify.
* Arithmetic: `Format.round_array` agrees with the Fraction definition `Format.round` (random values, ties,
  subnormals, overflow); its exp is correctly rounded, compared with MPFR's own IEEE emulation (another path).
* The reproducers of wrong `verified`s (the parametric bound counted address codes, not keys): each is now
  `unknown`, and the networks they were about really fail on the adversarial table (many keys sharing a code).
* Forged certificates: a lowered format, another semantics or task, a broken network re-stamped with its hash, and
  every numeric field of every kind of certificate edited up and down: refused.
* The parametric description means the network `build()` makes, and the checker's task model is witness's.
"""

from __future__ import annotations

import ast
import io
import json
import sys
import zipfile
from fractions import Fraction
from pathlib import Path

import gmpy2
import numpy as np
import pytest

import witness
from constructions import two_sum_sparse
from constructions.composition import build, describe
from verify import check, checker
from verify.certify import Construction, certify
from verify.certify.composition import description_json
from verify.certify.networks import weights_of
from verify.checker import parametric
from verify.checker.numbers import parse_format
from verify.checker.tasks import Composition as CheckerComposition
from verify.result import Status
from witness.arith import arithmetic
from tests import REPO

CHECKER = REPO / "verify" / "checker"
ALLOWED = {"numpy", "gmpy2", "mpmath", "sympy", "safetensors", "verify"}


# -- independence -----------------------------------------------------------------------------------------------
def test_the_checker_imports_nothing_of_what_it_checks():
    seen = set()
    for path in sorted(CHECKER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path.name}: relative import"
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                seen.add(name)
                assert top in sys.stdlib_module_names or top in ALLOWED, f"{path.name} imports {name}"
                if top == "verify":
                    assert name.startswith("verify.checker"), f"{path.name} imports {name}"
    assert "numpy" in seen and "verify.checker.numbers" in seen


# -- arithmetic -------------------------------------------------------------------------------------------------
FORMATS = ["float:1,3", "float:2,3", "float:3,4", "float:5,5", "fp16", "bf16", "float:10,6", "fp32",
           "fixed:3,2", "fixed:6,8", "fixed:12,12"]


@pytest.mark.parametrize("spec", FORMATS)
def test_vectorised_rounding_is_the_fraction_definition(spec):
    fmt = parse_format(spec)
    rng = np.random.default_rng(len(spec))
    largest = float(fmt.largest)
    values = rng.uniform(-1, 1, 3000) * largest * np.exp(-rng.uniform(0, 40, 3000))
    quantum = float(fmt.quantum(Fraction(0)))
    ties = (np.arange(-200, 200) + 0.5) * quantum  # midpoints of the finest grid: ties to even
    binade_ties = np.array([2.0 ** e * (1 + 2.0 ** -(fmt.mantissa + 1)) for e in range(-3, 4)]) if fmt.kind == "float" \
        else np.array([])
    for x in np.concatenate([values, ties, binade_ties, [0.0, -0.0, largest, -float(fmt.largest)]]):
        if abs(x) > largest:
            continue
        assert Fraction(float(fmt.round_array(np.array([x]))[0])) == fmt.round(Fraction(x)), (spec, x)
    with pytest.raises(checker.Refused, match="overflows"):
        fmt.round_array(np.array([largest * 2]))
    with pytest.raises(checker.Refused, match="overflows"):
        fmt.round(Fraction(largest) * 2)


@pytest.mark.parametrize("spec", ["float:2,3", "float:3,4", "fp16", "bf16", "fp32", "fp64"])
def test_exp_is_correctly_rounded(spec):
    """Against MPFR's IEEE emulation of the format (precision, exponent range, subnormals): another code path."""
    fmt = parse_format(spec)
    context = gmpy2.context(precision=fmt.mantissa + 1, emax=fmt.emax + 1, emin=fmt.emin - fmt.mantissa + 1,
                            subnormalize=True)
    rng = np.random.default_rng(1)
    arguments = fmt.round_array(np.maximum(-rng.exponential(4.0, 400), -float(fmt.largest)))
    for x in arguments:
        assert fmt.exp(x) == float(context.exp(gmpy2.mpfr(float(x), 53))), (spec, x)


def test_fixed_exp_rounds_to_the_grid():
    fmt = parse_format("fixed:4,6")
    for x in fmt.round_array(-np.linspace(0, 6, 97)):
        with gmpy2.context(precision=300):
            exact = Fraction(*gmpy2.exp(gmpy2.mpfr(float(x))).as_integer_ratio())  # 300 bits: far from any tie
        assert Fraction(fmt.exp(x)) == round(exact * 64) / 64


# -- the reproducers ------------------------------------------------------------------------------------------
def shared_code_table(m: int) -> np.ndarray:
    """Composition(1, m): z_1 = [0, m-1, m-1, ...], seed 0, query 0 -- the answer is 0, and every other key holds
    the same value, so the off-target mass of layer 1 is (m - 1) keys' worth, not one code's."""
    return np.array([0] + [m - 1] * (m - 1) + [0, m], dtype=np.int64)


@pytest.mark.parametrize("L, m, n, fmt, fails_on_table", [
    (1, 4094, (), "float:1,3", True), (1, 2046, (), "float:1,3", True), (1, 5000, (), "float:1,5", True),
    (3, 16, (16, 16), "float:1,3", False), (1, 2 ** 1000, (), "float:2,5", False),
])
def test_the_old_wrong_verifieds_are_now_unknown(L, m, n, fmt, fails_on_table):
    result = certify(Construction(L, m, n), arithmetic(fmt, "theory"))
    assert result.status is Status.UNKNOWN, result.detail
    if fails_on_table:  # and the built network really answers this input wrongly under that format
        network = build(L, m, n)
        tokens = shared_code_table(m)
        assert network.task.answers(tokens[None])[0] == 0
        output = witness.execute.run(network, tokens, arithmetic(fmt, "theory")).predictions[0, 0]
        assert output == m - 1


def test_more_bits_can_hurt_and_min_precision_does_not_assume_otherwise():
    """At m = 5000, float:1,5 fails and float:2,5 holds; the search tries every split at every p below p*."""
    from verify import precision

    assert certify(Construction(1, 5000), arithmetic("float:2,5", "theory")).status is Status.VERIFIED
    found = precision.min_precision(precision.composition_checker(1, 5000), "float", "theory")
    assert found.status is Status.VERIFIED and not found.assumes_monotone
    tried = {trial.format for trial in found.trials}
    for p in range(4, found.p):
        assert {f"float:{p - 1 - e},{e}" for e in range(2, p - 1)} <= tried
    assert all(trial.status != "verified" for trial in found.trials if trial.p < found.p)


# -- forged certificates ---------------------------------------------------------------------------------------
def certificate_of(network, fmt, semantics):
    result = certify(network, arithmetic(fmt, semantics))
    assert result.status is Status.VERIFIED, result.detail
    return result.detail["certificate"]


def test_a_lowered_format_is_refused():
    network = witness.compile("composition", L=2, m=4, n=[4])
    certificate = certificate_of(network, "float:5,5", "strict")
    forged = json.loads(json.dumps(certificate))
    forged["claim"]["format"] = "float:2,3"
    assert check.sampled(network, 100, 0, arithmetic("float:2,3", "strict")).status is Status.FALSIFIED
    with pytest.raises(checker.Refused):
        checker.check(forged, weights_of(network))


def test_a_broken_network_restamped_with_its_hash_is_refused():
    network = witness.compile("composition", L=1, m=3)
    certificate = certificate_of(network, "fp16", "strict")
    W_out = np.array(network.layers[0].mlp.W_out)
    W_out[W_out == 1.0] = -1.0  # the edit: the +1 entries of blocks.0.mlp.W_out flipped
    broken = network.with_arrays({"blocks.0.mlp.W_out": W_out})
    assert check.exhaustive(broken, arithmetic("fp16", "strict")).failures == 36  # of 81
    forged = json.loads(json.dumps(certificate))
    forged["claim"]["network"]["sha256"] = weights_of(broken).fingerprint()
    with pytest.raises(checker.Refused):
        checker.check(forged, weights_of(broken))


@pytest.mark.parametrize("field, value", [("semantics", "theory"), ("task", "two_sum"), ("params", {"L": 1, "m": 8}),
                                          ("format", "fp32"), ("semantics", "mixed"), ("format", "float:40,8")])
def test_other_claims_are_refused(field, value):
    network = witness.compile("composition", L=1, m=9)
    forged = json.loads(json.dumps(certificate_of(network, "fp16", "strict")))
    forged["claim"][field] = value
    with pytest.raises(checker.Refused):
        checker.check(forged, weights_of(network))


@pytest.mark.parametrize("forge", [
    lambda c: c.pop("proof"), lambda c: c.update(version=1), lambda c: c.update(extra=1),
    lambda c: c["claim"].pop("network"), lambda c: c["claim"]["network"].update(description={}),
    lambda c: c["claim"].update(params="L=1"), lambda c: c.update(claim=[]),
])
def test_malformed_certificates_are_refused_in_one_line(forge):
    network = witness.compile("composition", L=1, m=5)
    forged = json.loads(json.dumps(certificate_of(network, "fp16", "theory")))
    forge(forged)
    with pytest.raises(checker.Refused) as refusal:
        checker.check(forged, weights_of(network))
    assert "\n" not in str(refusal.value)


def parametric_forgery(L, m, n, edit):
    """A parametric certificate whose description `edit` changed, re-hashed and re-proved as a forger would."""
    genuine = certify(Construction(L, m, n), arithmetic("fp16", "theory")).detail["certificate"]
    claim = json.loads(json.dumps(genuine["claim"]))
    description = claim["network"]["description"]
    edit(description)
    claim["network"]["sha256"] = checker.description_fingerprint(description)
    return {**genuine, "claim": claim}


def rules_of(description, kind, name):
    return next(entry["rules"] for entry in description[kind] if entry["class"] == name)


def test_a_constant_that_the_format_rounds_onto_another_class_is_refused():
    """The forger gives z0 the type constant 32768 and the z1 keys 32760, which fp16 rounds to 32768: the stored
    network ties z0 with every z1 key and answers wrong, while a proof on the unrounded constants would see a gap of
    32 and confirm it. The checker refuses the constant the format cannot hold."""
    def edit(description):
        for rule in rules_of(description, "positions", "z0"):
            if rule["group"] == "type:z0":
                rule["constant"] = 32768.0
        rules_of(description, "positions", "z1").append({"group": "type:z0", "source": "constant", "constant": 32760.0})

    forged = parametric_forgery(1, 8, (), edit)
    with pytest.raises(checker.Refused, match="not exact in fp16"):
        checker.check(forged)
    task = witness.Composition(L=1, m=8)
    network = witness.compile("composition", L=1, m=8)
    stored = network.with_arrays(parametric.materialise(forged["claim"]["network"]["description"],
                                                        CheckerComposition(1, 8, ())))
    tokens = task.random_tokens(seed=0, count=200)
    predictions = witness.execute.run(stored, tokens, arithmetic("fp16", "theory")).predictions[:, 0]
    wrong = predictions != task.answers(tokens)
    assert wrong.sum() > 50  # the forged network really is wrong


def test_a_position_embedding_holding_a_query_digit_is_refused():
    """A position embedding cannot depend on the query token, so a description whose read position carries the
    digit w_1 means no network at all; the proof on it went through before the checker asked what a class can hold."""
    def edit(description):
        digit = rules_of(description, "tokens", "query").pop()
        assert digit["source"] == "digit"
        rules_of(description, "positions", "w").append(digit)

    with pytest.raises(checker.Refused, match="cannot hold a digit code"):
        checker.check(parametric_forgery(2, 2, (2,), edit))


def test_parametric_scores_that_float64_rounds_are_refused_under_theory():
    """The parametric proof computed the scores exactly but never asked whether the executor's float64 stand-in does:
    one extra head coordinate adds 2^15 * 2^15 to the query and key, 2^60 to every score. The exact model's ranking
    is unchanged, but float64 rounds 2^60 + s to 2^60 for every small s, so `witness run --semantics theory` attends
    uniformly; it was confirmed and answers 540 of 1,024 inputs wrongly (an adversarial review)."""
    big = 32768.0

    def edit(description):
        D, c = description["d_model"], description["d_head"]
        description["groups"].update(bq=[D, 1], bk=[D + 1, 1])
        description.update(d_model=D + 2, d_head=c + 1)
        for layer in description["layers"]:
            layer["W_Q"].append([D, c, 1, big])
            layer["W_K"].append([D + 1, c, 1, big])
        for entry in description["positions"]:
            entry["rules"].append({"group": "bk", "source": "constant", "constant": big})
        rules_of(description, "positions", "w").append({"group": "bq", "source": "constant", "constant": big})

    forged = parametric_forgery(1, 4, (), edit)
    with pytest.raises(checker.Refused, match="not exact in float64"):
        checker.prove(forged["claim"])
    from witness.ir import Basis, Meta
    from witness.mixers import network_from_state
    description = forged["claim"]["network"]["description"]
    arrays = parametric.materialise(description, CheckerComposition(1, 4, ()))
    network = network_from_state(arrays, build(1, 4).structure(),
                                 Basis(tuple(f"d{i}" for i in range(description["d_model"]))),
                                 Meta(task="composition", params={"L": 1, "m": 4, "n": [], "layout": "paper"}))
    task = witness.Composition(L=1, m=4)
    tokens = np.concatenate(list(task.enumerate_tokens()))
    predictions = witness.execute.run(network, tokens, arithmetic("fp16", "theory")).predictions[:, 0]
    assert (predictions != task.answers(tokens)).sum() > 500  # the forged network really is wrong under witness run


def _digit_as(value):
    def edit(description):
        rules_of(description, "tokens", "query").append({"group": "junk", "source": "digit", "width": 1,
                                                          "digit": value})
        description["groups"]["junk"] = [description["d_model"], 1]
        description["d_model"] += 1
    return edit


def _field(path, value):
    def edit(description):
        node = description
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit, refusal", [
    (_digit_as(1.0), "names no query digit"), (_digit_as(True), "names no query digit"),
    (_field(("d_head",), 3.0), "d_head must be an integer"), (_field(("d_model",), "13"), "must be an integer"),
    (_field(("layers", 0, "d_mlp"), 8.5), "d_mlp must be an integer"),
    (_field(("readout", "bias"), 1.0), "the readout holds its group only"),
    (_field(("positions", 0, "note"), "x"), "a class entry holds its class and rules only")])
def test_a_description_field_read_loosely_is_refused(edit, refusal):
    """A fifth review: a digit rule written 1.0 or true passed `in range(1, L)` (confirmed, yet the description
    denotes no network: materialising it fails), widths written 3.0 or "13" were truncated with int(), and extra
    fields of the readout or a class were ignored. Each reading now has one spelling."""
    with pytest.raises(checker.Refused, match=refusal):
        checker.check(parametric_forgery(2, 2, (1,), edit))


def test_a_class_listed_twice_is_refused():
    """Two rule lists for one class: which one the network has would depend on the reader."""
    def edit(description):
        description["positions"].append({"class": "z1", "rules": []})

    with pytest.raises(checker.Refused, match="listed twice"):
        checker.check(parametric_forgery(1, 8, (), edit))


def test_a_target_weight_is_never_taken_as_one():
    """pi = 1/(1 + off-target mass) is below 1 whenever the mass is positive. Computed as an MPFR quotient rounded
    down, 1 + mass was rounded down first: under 2^-255 it became 1 and pi = 1, so the proof took the head output
    to be v w_out exactly. The forger (an adversarial review) makes the mass ~e^-256 (W_Q 256), puts v w_out on an
    fp16 tie, 3 (1 + 2^-10), which rounds to even (3.00390625), and lets the MLP write the code only there. The
    true output is pi v w_out < the tie, which fp16 rounds down to 3.001953125, where the MLP writes 0."""
    def edit(description):
        first = description["layers"][0]
        first["W_Q"] = [[0, 0, 1, 256.0]]
        first["W_V"] = [[6, 0, 3, 3.0]]
        first["W_O"] = [[0, 9, 3, 1.0 + 2.0 ** -10]]
        first["W_in"] = [[9, 0, 3, 512.0], [9, 3, 3, 512.0], [9, 6, 3, -512.0], [9, 9, 3, -512.0],
                         [9, 12, 3, 2.0], [9, 15, 3, -2.0]]
        first["b_in"] = [[0, 3, -1537.0], [3, 3, -1538.0], [6, 3, -1537.0], [9, 3, -1538.0]]
        first["W_out"] = [[0, 12, 3, 1.0], [3, 12, 3, -1.0], [6, 12, 3, -1.0], [9, 12, 3, 1.0],
                          [12, 9, 3, -0.5], [15, 9, 3, 0.5]]
        first["b_out"] = []
        first["d_mlp"] = 18

    tie = 3 * (1 + 2.0 ** -10)
    assert np.float16(tie) == 3.00390625 and np.float16(np.nextafter(tie, 0)) == 3.001953125
    forged = parametric_forgery(1, 8, (), edit)
    with pytest.raises(checker.Refused, match="still depends on the fetched value"):
        checker.prove(forged["claim"])
    genuine = parametric_forgery(1, 8, (), lambda description: description["layers"][0].update(W_Q=[[0, 0, 1, 256.0]]))
    weights = [entry["target_weight_at_least"] for entry in checker.prove(genuine["claim"])["layers"]]
    assert weights[0] < 1


def file_parts(path):
    """The arrays and the JSON header of a witness .npz file, as a forger edits them."""
    with np.load(path, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    return arrays, json.loads(arrays.pop(witness.io.HEADER_KEY).tobytes())


def write_file(path, arrays, head):
    head = {**head, "shapes": {name: list(a.shape) for name, a in arrays.items()},
            "dtypes": {name: a.dtype.name for name, a in arrays.items()}}
    np.savez(path, **arrays, **{witness.io.HEADER_KEY: np.frombuffer(json.dumps(head).encode(), np.uint8)})


def reproved(path, claim):
    """The forger's step: hash the edited file with the checker's own fingerprint and ask the checker for the proof."""
    weights = checker.load_weights(path)
    return checker.prove(dict(claim, network={"sha256": weights.fingerprint()}), weights)


@pytest.mark.parametrize("option, value", [("feature_map", "Relu"), ("normalize", 0), ("normalize", True)])
def test_linear_layer_options_the_executor_would_not_read_as_the_proof_does_are_refused(tmp_path, option, value):
    """A feature map spelled "Relu" was proved as the identity and `normalize: 0` as no normaliser; the executor
    refuses such files, so no wrong answer followed, but the checker must not confirm a network nobody can run."""
    path = tmp_path / "hybrid.npz"
    witness.io.save(witness.compile("composition_hybrid", L=1, m=3), path)
    claim = composition_claim(3, "strict")
    assert reproved(path, claim)
    arrays, head = file_parts(path)
    linear = next(layer for layer in head["structure"]["layers"] if layer["mixer"] == "linear")
    linear[option] = value
    write_file(path, arrays, head)
    with pytest.raises(checker.Refused, match="feature_map identity or relu and no normaliser"):
        reproved(path, claim)


def test_a_2sum_layer_without_its_causal_flag_is_not_read_as_bidirectional(tmp_path):
    """The executor runs a layer whose header omits `causal` as causal (the option's default); the checker read the
    absence as false. A genuine bidirectional 2-Sum file with only that entry deleted, re-hashed and re-proved, was
    confirmed, and the executor answers it wrong."""
    path = tmp_path / "two_sum.npz"
    witness.io.save(witness.compile("two_sum", n=6, M=4, t=1, causal=False), path)
    claim = {"task": "two_sum", "params": {"n": 6, "M": 4, "t": 1, "causal": False}, "format": "fp32",
             "semantics": "strict"}
    assert reproved(path, claim)
    arrays, head = file_parts(path)
    del head["structure"]["layers"][0]["causal"]
    write_file(path, arrays, head)
    with pytest.raises(checker.Refused, match="causal flag"):
        reproved(path, claim)
    task = witness.TwoSum(n=6, M=4, t=1, causal=False)
    tokens = np.concatenate(list(task.enumerate_tokens()))
    predictions = witness.execute.run(witness.io.load(path), tokens, arithmetic("fp32", "strict")).predictions
    assert (predictions != task.answers(tokens)).any(axis=1).sum() > 1000  # the file really runs causal


@pytest.mark.parametrize("option", ["block", "k"])
def test_a_block_sparse_span_the_executor_refuses_to_load_is_refused(tmp_path, option):
    """A fifth review: a genuine (2,1)-sparse file with block or k raised to 2^25 in its header (the executor loads
    spans up to 2^24 only) was confirmed. No wrong answer followed, as nothing runs it; the checker now requires
    the executor's limits."""
    path = tmp_path / "sparse.npz"
    witness.io.save(witness.compile("two_sum_sparse", n=8, M=4, t=0, block=2, k=1), path)
    claim = {"task": "two_sum", "params": {"n": 8, "M": 4, "t": 0, "causal": False}, "format": "fp32",
             "semantics": "strict"}
    assert reproved(path, claim)
    arrays, head = file_parts(path)
    head["structure"]["layers"][0][option] = 2 ** 25
    write_file(path, arrays, head)
    with pytest.raises(checker.Refused, match=r"must be integers in \[1, 2\^24\]"):
        reproved(path, claim)
    with pytest.raises(witness.FileFormatError, match=option):
        witness.io.load(path)


def with_unread_direction(tmp_path, m, layer, units, head_writes=0.0, bias=0.0):
    """composition L = 1, m, stored with one more residual direction, "junk", that nothing reads, written by
    `units` added to blocks.{layer}.mlp: (reads {direction: weight}, hidden bias, output weight), by the head column
    that writes fetch[0] times `head_writes`, and by the MLP's output bias `bias`. Only the range check sees it."""
    path = tmp_path / "composition.npz"
    arrays, head, basis = with_new_directions(path, witness.compile("composition", L=1, m=m), ["junk"])
    junk, W_O = len(basis) - 1, arrays["blocks.0.attn.W_O"]
    W_O[0, np.flatnonzero(W_O[0, :, basis.index("fetch[0]")])[0], junk] = head_writes
    mlp = f"blocks.{layer}.mlp."
    arrays[mlp + "b_out"][junk] = bias
    units_in, units_out = np.zeros((len(basis), len(units))), np.zeros((len(units), len(basis)))
    for h, (reads, _, weight) in enumerate(units):
        for direction, coefficient in reads.items():
            units_in[basis.index(direction), h] = coefficient
        units_out[h, junk] = weight
    arrays[mlp + "W_in"] = np.concatenate([arrays[mlp + "W_in"], units_in], axis=1)
    arrays[mlp + "b_in"] = np.concatenate([arrays[mlp + "b_in"], [b for _, b, _ in units]])
    arrays[mlp + "W_out"] = np.concatenate([arrays[mlp + "W_out"], units_out])
    write_file(path, arrays, {**head, "basis": basis})
    return path


#: The axis of each array that runs over residual directions.
RESIDUAL_AXIS = {"W_E": 1, "W_pos": 1, "W_O": 2, "W_out": 1, "W_Q": 1, "W_K": 1, "W_V": 1, "b_O": 0, "b_out": 0,
                 "W_in": 0, "W_U": 0}


def with_new_directions(path, network, labels):
    """`network` saved at `path`, then read back as a forger edits it: float64 arrays with residual directions
    `labels` appended, zero everywhere, and the basis that names them."""
    witness.io.save(network, path)
    arrays, head = file_parts(path)
    for name, a in arrays.items():
        axis = RESIDUAL_AXIS.get(name.rsplit(".", 1)[-1])
        arrays[name] = a.astype(np.float64)
        if axis is not None:
            arrays[name] = np.pad(arrays[name], [(0, len(labels) if i == axis else 0) for i in range(a.ndim)])
    return arrays, head, head["basis"] + list(labels)


def wrong_answers(path, m, semantics, fmt="fp16"):
    task = witness.Composition(L=1, m=m)
    tokens = np.concatenate(list(task.enumerate_tokens()))
    with np.errstate(all="ignore"):  # the forged runs overflow float64 on purpose
        predictions = witness.execute.run(witness.io.load(path), tokens, arithmetic(fmt, semantics)).predictions
    return int((predictions[:, 0] != task.answers(tokens)).sum())


def composition_claim(m, semantics, fmt="fp16"):
    return {"task": "composition", "params": {"L": 1, "m": m, "n": [], "layout": "paper"}, "format": fmt,
            "semantics": semantics}


@pytest.mark.parametrize("w_in, w_out, step", [(2.0, [65504.0, -65504.0], "a product"),
                                               (1.0, [30000.0] * 3 + [-30000.0] * 3, "a partial sum")])
def test_an_mlp_output_whose_steps_overflow_is_refused_however_small_its_sum(tmp_path, w_in, w_out, step):
    """Hidden units relu(w_in fetch[0]) times w_out: their exact sum is 0, so the one-input range bound (exact
    extremes plus relative rounding errors) was a few hundred, but under strict fp16 a product (first case) or a
    partial sum (second) overflows, inf - inf is NaN, and zero query weights carry the NaN into the next layer (the
    first case was found by an adversarial review; the checker confirmed it)."""
    path = with_unread_direction(tmp_path, 3, 0, [({"fetch[0]": w_in}, 0.0, w) for w in w_out])
    with pytest.raises(checker.Refused, match=f"blocks.0.mlp output .*: {step} .* may overflow fp16"):
        reproved(path, composition_claim(3, "strict"))
    assert wrong_answers(path, 3, "strict") > 20  # the NaN reaches the answer


def test_a_twin_pair_is_not_moved_ahead_of_the_terms_between_them_under_strict(tmp_path):
    """relu(z) and relu(-z) are never both positive, so a bound on an exact sum may count the pair once; but the
    strict fold counted it at the first twin's place, where 66 small terms after it are absorbed, while the
    executor adds them first and the second twin's 32304 last: 924 + 64608 overflows (an adversarial review's
    forgery, confirmed, wrong on 5 of 1024 inputs). Under strict every unit now counts in its own place."""
    pair = {"fetch[0]": 1.0, "fetch[1]": 1.0}
    units = [(pair, 0.0, 32304.0)] + [({}, 14.0, 1.0)] * 66 + [({k: -v for k, v in pair.items()}, 0.0, 32304.0)]
    path = with_unread_direction(tmp_path, 4, 1, units)
    with pytest.raises(checker.Refused, match="overflows fp16"):
        reproved(path, composition_claim(4, "strict"))
    assert wrong_answers(path, 4, "strict") > 0


@pytest.mark.parametrize("semantics", ["strict", "theory"])
def test_an_mlp_output_that_is_its_own_input_is_bounded_before_the_residual_add(tmp_path, semantics):
    """The head writes junk = 32768 fetch[0] (-32768 at position 0), and one unit relu(-junk) times 1.03125 plus the
    bias 32000 writes it back: the residual y + out stays below 65504, but the stored MLP output 33792 + 32000 is
    inf (an adversarial review's forgery, confirmed under both semantics, wrong on 512 of 1024 inputs; every value
    is an integer, so the exact model fails too)."""
    path = with_unread_direction(tmp_path, 4, 0, [({"junk": -1.0}, 0.0, 1.03125)], head_writes=32768.0,
                                 bias=32000.0)
    with pytest.raises(checker.Refused, match="the MLP output .* may overflow fp16"):
        reproved(path, composition_claim(4, semantics))
    assert wrong_answers(path, 4, semantics) > 100


def test_an_mlp_sum_that_float64_rounds_is_refused_under_theory(tmp_path):
    """A fourth review's forgery: bias-only units write junk = 8 8 + 2^-24 2^-24 - 8 8 + 1 + 2^-11, exactly
    1 + 2^-11 + 2^-48, which fp16 stores as 1 + 2^-10; float64 loses the 2^-48 and stores the tie 1 + 2^-11 as 1. The
    readout adds 8200 - 8192 junk to answer 0: nothing in the exact model, +8 in the executor's theory run. The
    exact-model proof was confirmed; every MLP sum must now be exact in float64."""
    units = [({}, 8.0, 8.0), ({}, 2.0 ** -24, 2.0 ** -24), ({}, 8.0, -8.0), ({}, 1.0, 1.0), ({}, 2.0 ** -11, 1.0)]
    path = with_unread_direction(tmp_path, 4, 0, units)
    arrays, head = file_parts(path)
    arrays["unembed.W_U"][head["basis"].index("junk"), 0] = -8192.0
    arrays["unembed.b_U"] = arrays["unembed.b_U"] + np.eye(1, arrays["unembed.b_U"].size)[0] * 8200.0
    write_file(path, arrays, head)
    with pytest.raises(checker.Refused, match="blocks.0.mlp: a sum inside the MLP is not exact in float64"):
        reproved(path, composition_claim(4, "theory"))
    assert wrong_answers(path, 4, "theory") > 500  # of 1024


def _query_reads_value_tokens(tmp_path):
    """Value tokens hold junk = 2^600 and layer 0's query reads it with weight 2^600: finite at the read position
    (a query token), 2^1200 = inf at every other one, where NaN then reaches layer 1's keys."""
    path = with_unread_direction(tmp_path, 4, 0, [])
    arrays, head = file_parts(path)
    junk = head["basis"].index("junk")
    task = witness.Composition(L=1, m=4)
    last = np.unique(np.concatenate(list(task.enumerate_tokens()))[:, -1])
    others = np.setdiff1d(np.arange(arrays["embed.W_E"].shape[0]), last)
    arrays["embed.W_E"][others, junk] = 2.0 ** 600
    arrays["blocks.0.attn.W_Q"][0, junk, 0] = 2.0 ** 600
    write_file(path, arrays, head)
    return path


@pytest.mark.parametrize("forge, refusal", [
    (lambda tmp: with_unread_direction(tmp, 4, 0, [({"junk": 2.0 ** 600}, 0.0, 0.0)], head_writes=2.0 ** 600),
     "blocks.0.mlp hidden units may overflow float64"),
    (_query_reads_value_tokens, "blocks.0.attn queries may overflow float64")])
def test_a_value_the_exact_model_holds_but_float64_overflows_is_refused_under_theory(tmp_path, forge, refusal):
    """fp64 theory, where the exact model holds 2^1200 inside a block but the executor's float64 stand-in gets inf,
    and inf times a zero weight is NaN in every direction: an MLP unit with no output weight (a fourth review's
    forgery, confirmed, wrong on 832 of 1024 inputs) and a query at the positions the proof does not follow (wrong
    on all 1024). Both were confirmed; every bound inside a block must now stay below 2^1020. The executor's theory
    run no longer answers either: its stand-in step that leaves the finite numbers raises StandInOverflow."""
    path = forge(tmp_path)
    with pytest.raises(checker.Refused, match=refusal):
        reproved(path, composition_claim(4, "theory", "fp64"))
    with pytest.raises(witness.StandInOverflow, match="float64 stand-in"):
        wrong_answers(path, 4, "theory", "fp64")


def _flat_mix_just_below_fp32_overflow(tmp_path, N=1007):
    """composition L = 2, m = 1, n = [N] with layer 0 rewritten (a fifth review's forgery): the seed position attends
    flat over the N entries of z_2, whose value coordinate is V = 2 - 2^-24 - 3 2^-48 for every token >= 1, and
    W_O = 2^127 writes it to a direction "dstar" that nothing reads. The exact head V 2^127 lies below fp32's
    overflow midpoint (2 - 2^-24) 2^127; the executor's float64 mix of N equal values exceeds V by about 60 2^-53,
    so the stored head is inf there, and inf times the next layer's zero key weights is NaN."""
    path = tmp_path / "flat.npz"
    new = ["big1", "big2", "pstar", "dstar"]
    arrays, head, basis = with_new_directions(path, witness.compile("composition", L=2, m=1, n=[N]), new)
    big1, big2, pstar, dstar = (basis.index(label) for label in new)
    n = N + 3
    arrays["embed.W_E"][1:N, big1] = 1.0
    arrays["embed.W_E"][1:N, big2] = 2.0 ** -24
    arrays["pos_embed.W_pos"][n - 2, pstar] = 1.0
    p, m = "blocks.0.attn", "blocks.0.mlp"
    arrays[f"{p}.W_V"][:] = 0.0
    arrays[f"{p}.W_V"][0, big1, 0] = 2 - 2.0 ** -23
    arrays[f"{p}.W_V"][0, big2, 0] = 1 - 3 * 2.0 ** -24
    arrays[f"{p}.W_O"][:] = 0.0
    arrays[f"{p}.W_O"][0, 0, dstar] = 2.0 ** 127
    arrays[f"{p}.W_Q"][0, pstar, 1] = 60.0
    arrays[f"{p}.W_K"][0, basis.index("type:z2"), 1] = 1.0
    arrays[f"{m}.W_in"][:] = 0.0
    arrays[f"{m}.W_out"][:] = 0.0
    for label in basis:
        if label.startswith("R0["):
            arrays[f"{m}.b_out"][basis.index(label)] = -1.0  # the code of i_0 = 0, the only seed (m = 1)
    write_file(path, arrays, dict(head, basis=basis))
    return path


def test_a_theory_mix_is_bounded_with_float64_error_at_every_position(tmp_path):
    """The range check bounded a theory mix by its largest value, true of the exact model only: the forgery above
    was confirmed at fp32 theory, and `witness run --semantics theory` answers 16 of 20 random inputs wrongly. The
    mix bound is now widened by float64's softmax error, as the read position's head already was."""
    path = _flat_mix_just_below_fp32_overflow(tmp_path)
    claim = {"task": "composition", "params": {"L": 2, "m": 1, "n": [1007], "layout": "paper"}, "format": "fp32",
             "semantics": "theory"}
    with pytest.raises(checker.Refused, match="head output.*overflow"):
        reproved(path, claim)
    tokens = np.array([1] * 1007 + [0, 0, 1007])
    with np.errstate(all="ignore"):
        outputs = witness.execute.run(witness.io.load(path), tokens, arithmetic("fp32", "theory"), trace=True)
    assert not np.isfinite(outputs.trace["blocks.0.attn.hook_result"]).all()
    assert outputs.predictions[0, 0] != witness.Composition(L=2, m=1, n=(1007,)).answers(tokens[None])[0]


def test_a_linear_state_product_that_float64_rounds_is_refused_under_theory(tmp_path):
    """A fifth review's forgery of composition_hybrid (L = 1, m = 2): at z0 the linear layer's key is
    k = 1 + 2^-11 - 2^-43 and the value v = val (1 + 2^-43), each exact in float64, but fl64(k v) = 1 + 2^-11 is an
    fp16 tie (stored as 1) while the exact product lies above it (stored as 1 + 2^-10). An extra MLP unit
    relu(fetch[0] - 1) (-2048) writes R0[0] only in the exact model. The proof took the state entry as the float64
    product and was confirmed; a theory state product must now be exact in float64."""
    path = tmp_path / "hybrid.npz"
    arrays, head, basis = with_new_directions(path, witness.compile("composition_hybrid", L=1, m=2),
                                              ["fx_a", "fx_b", "fx_e"])
    a, b, e = len(basis) - 3, len(basis) - 2, len(basis) - 1
    z0, val0, fetch0, r0 = 2, basis.index("val[0]"), basis.index("fetch[0]"), basis.index("R0[0]")
    arrays["pos_embed.W_pos"][z0, a] = 1.0
    arrays["pos_embed.W_pos"][z0, b] = 2.0 ** -20
    arrays["blocks.0.attn.W_K"][0, a, 0] = 2.0 ** -11
    arrays["blocks.0.attn.W_K"][0, b, 0] = -(2.0 ** -23)
    arrays["embed.W_E"][:, e] = arrays["embed.W_E"][:, val0] * 2.0 ** -20
    coordinate = int(np.flatnonzero(arrays["blocks.0.attn.W_V"][0, val0])[0])
    arrays["blocks.0.attn.W_V"][0, e, coordinate] = 2.0 ** -23
    unit = np.zeros((len(basis), 1))
    unit[fetch0] = 1.0
    arrays["blocks.0.mlp.W_in"] = np.concatenate([arrays["blocks.0.mlp.W_in"], unit], axis=1)
    arrays["blocks.0.mlp.b_in"] = np.append(arrays["blocks.0.mlp.b_in"], -1.0)
    arrays["blocks.0.mlp.W_out"] = np.concatenate([arrays["blocks.0.mlp.W_out"], -2048.0 * np.eye(1, len(basis), r0)])
    write_file(path, arrays, dict(head, basis=basis))
    with pytest.raises(checker.Refused, match="state"):
        reproved(path, composition_claim(2, "theory"))
    k, v = 1 + Fraction(1, 2 ** 11) - Fraction(1, 2 ** 43), 1 + Fraction(1, 2 ** 43)
    fp16 = parse_format("fp16")
    assert fp16.round(Fraction(float(k) * float(v))) == 1 and fp16.round(k * v) == 1 + Fraction(1, 2 ** 10)


def test_a_single_answer_composition_is_certified_not_an_internal_error():
    """m = 1 has one answer column, so no other logit to beat: certify stopped with an OverflowError."""
    network = witness.compile("composition", L=1, m=1)
    assert certify(network, arithmetic("fp16", "strict")).status is Status.VERIFIED


def test_the_checker_assumes_the_float64_exp_error_the_executor_assumes():
    """The checker imports nothing of witness, so it restates the bound on numpy's exp that both rely on."""
    from verify.checker.numbers import FLOAT64_EXP_ERROR
    from witness.arith.semantics import EXP_RELATIVE_ERROR
    assert FLOAT64_EXP_ERROR == Fraction(EXP_RELATIVE_ERROR)


@pytest.mark.parametrize("constant, reason", [(10 ** 400, "not a float64"), (2 ** 53 + 1, "not a float64"),
                                              (True, "not a float64"), ("1", "not a float64")])
def test_description_constants_that_are_no_float64_are_refused_in_one_line(constant, reason):
    def edit(description):
        rules = rules_of(description, "positions", "z0")
        next(rule for rule in rules if rule["source"] == "constant")["constant"] = constant

    with pytest.raises(checker.Refused, match=reason) as refusal:
        checker.check(parametric_forgery(1, 8, (), edit))
    assert "\n" not in str(refusal.value)


def test_a_certificate_with_a_repeated_key_is_refused(tmp_path):
    """With a key twice, a first-wins reader and a last-wins reader read different claims."""
    network = witness.compile("composition", L=1, m=5)
    text = json.dumps(certificate_of(network, "fp16", "theory"))
    path = tmp_path / "repeated.json"
    path.write_text(text.replace('"format": "fp16"', '"format": "float:1,2", "format": "fp16"', 1))
    with pytest.raises(checker.Refused, match="repeats the key"):
        checker.load_certificate(path)


def test_format_digits_outside_ascii_are_refused():
    with pytest.raises(checker.Refused, match="unknown format"):
        parse_format("float:\u0661\u0660,\u0665")


def numeric_fields(node, path=()):
    """Every number in a certificate (JSON numbers, and exact ones written as strings) with its path."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from numeric_fields(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from numeric_fields(value, path + (index,))
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, node
    elif isinstance(node, str) and path and path[-2:-1] != ("network",):
        try:
            yield path, Fraction(node)
        except ValueError:
            pass


def edited(certificate, path, value):
    forged = json.loads(json.dumps(certificate))
    node = forged
    for key in path[:-1]:
        node = node[key]
    old = node[path[-1]]
    node[path[-1]] = str(value) if isinstance(old, str) else value
    return forged


def mutation_counts(certificate, weights, limit=400):
    """(fields, fields with an edit refused, edits refused, edits) over up to `limit` numeric fields, each edited
    up and down (integers by one, other numbers by a relative 2^-10 and an absolute 2^-20)."""
    fields = list(numeric_fields(certificate))
    step = max(1, len(fields) // limit)
    counts = [0, 0, 0, 0]
    for path, value in fields[::step]:
        refused = 0
        for sign in (1, -1):
            if isinstance(value, int) and not isinstance(value, bool):
                new = value + sign
            else:
                new = type(value)(value) * (1 + sign * Fraction(1, 1024)) + sign * Fraction(1, 2 ** 20)
                new = float(new) if isinstance(value, float) else new
            try:
                checker.check(edited(certificate, path, new), weights)
            except checker.Refused:
                refused += 1
        counts[0] += 1
        counts[1] += refused > 0
        counts[2] += refused
        counts[3] += 2
    return counts


def kinds():
    composition = witness.compile("composition", L=2, m=3, n=[2])
    hybrid = witness.compile("composition_hybrid", L=2, m=2, n=[2])
    pair_sum = witness.compile("two_sum", n=6, M=4, t=1)
    sparse = two_sum_sparse.build(8, 4, 1, block=2, k=1)
    return {
        "composition file": (certificate_of(composition, "fp16", "strict"), weights_of(composition)),
        "hybrid file": (certificate_of(hybrid, "fp16", "theory"), weights_of(hybrid)),
        "parametric": (certify(Construction(2, 3, (2,)), arithmetic("fp16", "theory")).detail["certificate"], None),
        "2-Sum": (certificate_of(pair_sum, "fp32", "strict"), weights_of(pair_sum)),
        "2-Sum sparse": (certificate_of(sparse, "fp16", "theory"), weights_of(sparse)),
    }


@pytest.mark.parametrize("kind", ["composition file", "hybrid file", "parametric", "2-Sum", "2-Sum sparse"])
def test_every_numeric_field_edited_up_and_down_is_refused(kind):
    certificate, weights = kinds()[kind]
    assert checker.check(certificate, weights)["confirmed"]
    fields, caught, refused, edits = mutation_counts(certificate, weights)
    assert fields >= 20 and caught == fields, (kind, fields, caught, refused, edits)


# -- the parametric description and the task model --------------------------------------------------------------
@pytest.mark.parametrize("L, m, n", [(1, 4, ()), (1, 7, ()), (2, 3, (2,)), (2, 2, (5,)), (3, 2, (2, 3))])
def test_the_description_materialises_to_the_built_network(L, m, n):
    arrays = parametric.materialise(description_json(describe(L, m, n)), CheckerComposition(L, m, tuple(n)))
    built = build(L, m, n).state_dict()
    assert set(arrays) == set(built)
    for name, array in built.items():
        assert np.array_equal(arrays[name], array), name


def test_the_checker_task_model_reads_what_witness_answers():
    for L, m, n in [(1, 5, ()), (2, 3, (2,)), (3, 2, (3, 2))]:
        ours, theirs = CheckerComposition(L, m, n), witness.Composition(L, m, n)
        tokens = theirs.random_tokens(seed=L, count=50)
        assert ours.prompt_length == theirs.prompt_length and ours.vocab == theirs.vocab_size
        rest = tokens[:, -1] - ours.value_vocab
        index = np.zeros(len(tokens), dtype=np.int64)
        for step in range(L + 1):
            index = tokens[np.arange(len(tokens)), ours.read_position(step, rest, index)]
            rest = ours.advance(step, rest) if step >= 1 else rest
        assert index.tolist() == list(theirs.answers(tokens))


def test_tables_beyond_the_float_range_certify_and_check():
    """At m = 2^1100 the input count and the key counts are Python ints far beyond float64; nothing overflows."""
    result = certify(Construction(1, 2 ** 1100), arithmetic("fp16", "theory"))
    assert result.status is Status.VERIFIED, result.detail
    summary = checker.check(result.detail["certificate"])
    assert summary["inputs"] is None and int(summary["inputs_log2"].split("e+")[1]) >= 334  # log2 ~ m log2 m
    assert summary["budget"]["d_model"] == 5 * 1100 + 3


def test_the_checker_reads_the_file_format_the_executor_writes():
    """The checker restates the file format (it imports nothing of witness); the two statements must agree."""
    from verify.checker import files
    assert (files.NETWORK_KIND, files.NETWORK_VERSION) == (witness.io.FILE_KIND, witness.io.FILE_VERSION)
    assert files.STORED_DTYPES == witness.io.STORAGE_DTYPE_NAMES
    assert files.HEADER_KEY == witness.io.HEADER_KEY


def _header_edit(key, value):
    return lambda arrays, head: head.update({key: value})


def _array_edit(name, change):
    return lambda arrays, head: arrays.update({name: change(arrays[name])})


def _basis_repeated(arrays, head):
    head["basis"] = [head["basis"][0]] * len(head["basis"])


@pytest.mark.parametrize("edit, refusal", [
    (_header_edit("kind", "not-a-network"), "kind"),
    (_header_edit("version", 99), "file version 99"),
    (_array_edit("embed.W_E", lambda a: a.astype(np.int64)), "stored as int64"),
    (_array_edit("blocks.0.attn.b_Q", lambda a: a[0]), "blocks.0.attn.b_Q has shape"),
    (_array_edit("blocks.0.attn.W_O", lambda a: np.concatenate([a, a])), "blocks.0.attn.W_O has shape"),
    (_array_edit("blocks.0.attn.W_V", lambda a: np.concatenate([a, a[..., :1]], axis=2)), "d_v"),
    (_array_edit("unembed.b_U", lambda a: a[:1]), "unembed.b_U has shape"),
    (_basis_repeated, "repeats a label"),
])
def test_a_file_the_executor_would_not_load_is_refused_by_name(tmp_path, edit, refusal):
    """Each edit, re-stamped with the checker's own fingerprint, was confirmed before (its proof reads arrays by
    name alone, e.g. a 1-D b_Q as one scalar for every coordinate); the executor refuses every one of them."""
    path = tmp_path / "net.npz"
    witness.io.save(witness.compile("composition", L=1, m=3), path)
    arrays, head = file_parts(path)
    edit(arrays, head)
    write_file(path, arrays, head)
    with pytest.raises(witness.errors.FileFormatError):
        witness.io.load(path)
    with pytest.raises(checker.Refused, match=refusal):
        reproved(path, composition_claim(3, "strict"))


def _npy_named_npz(path, arrays, head):
    np.save(path.with_suffix(".npy"), arrays["embed.W_E"])
    path.with_suffix(".npy").rename(path)


def _header_as_raw_bytes(path, arrays, head):
    np.savez(path, **arrays)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(witness.io.HEADER_KEY, json.dumps(head))


def _replace_member(path, name, data):
    with zipfile.ZipFile(path) as archive:
        members = {member: archive.read(member) for member in archive.namelist()}
    members[name] = data
    with zipfile.ZipFile(path, "w") as archive:
        for member, content in members.items():
            archive.writestr(member, content)


def _array_as_raw_bytes(path, arrays, head):
    write_file(path, arrays, head)
    _replace_member(path, "unembed.b_U.npy", b"not an .npy member")


def _bfloat16_safetensors(path, arrays, head):
    raw = np.zeros(3, np.uint16).tobytes()
    meta = json.dumps({"x": {"dtype": "BF16", "shape": [3], "data_offsets": [0, len(raw)]},
                       "__metadata__": {witness.io.HEADER_KEY: json.dumps(head)}}).encode()
    path.write_bytes(len(meta).to_bytes(8, "little") + meta + raw)


def _deep_header(path, arrays, head):
    write_file(path, arrays, head)
    deep = json.dumps({**head, "notes": None}).replace("null", "[" * 100_000 + "]" * 100_000).encode()
    _replace_member(path, witness.io.HEADER_KEY + ".npy", _npy_bytes(np.frombuffer(deep, np.uint8)))


def _npy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize("forge, suffix, refusal", [
    (_npy_named_npz, ".npz", "not a zip archive"), (_header_as_raw_bytes, ".npz", "uint8 array"),
    (_array_as_raw_bytes, ".npz", "unembed.b_U is not an array"),
    (_bfloat16_safetensors, ".safetensors", "dtype numpy cannot read"),
    (_deep_header, ".npz", "not a readable weights file"),
])
def test_an_unreadable_weights_file_is_one_refusal_not_a_traceback(tmp_path, forge, suffix, refusal):
    """Each of these stopped the checker with an AttributeError, TypeError or RecursionError (the executor's loader
    too, but for the first two)."""
    source = tmp_path / "source.npz"
    witness.io.save(witness.compile("composition", L=1, m=3), source)
    arrays, head = file_parts(source)
    path = tmp_path / f"forged{suffix}"
    forge(path, arrays, head)
    with pytest.raises(checker.Refused, match=refusal) as refused:
        checker.load_weights(path)
    assert "\n" not in str(refused.value)
    with pytest.raises(witness.errors.FileFormatError):
        witness.io.load(path)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"kind": ' + "9" * 5000 + "}"])
def test_an_unreadable_certificate_is_one_refusal_not_a_traceback(tmp_path, text):
    """JSON nested past Python's stack, an integer past its digit limit: a RecursionError, a ValueError before."""
    path = tmp_path / "certificate.json"
    path.write_text(text)
    with pytest.raises(checker.Refused, match="not JSON"):
        checker.load_certificate(path)
