"""Forged certificates are refused: the reproducers of old wrong `verified`s (the parametric bound counted address
codes, not keys) are now `unknown` and the networks really fail on the adversarial table (many keys sharing a
code); a lowered format, another semantics or task, a broken network re-stamped with its hash, malformed JSON,
and every numeric field of every kind of certificate edited up and down."""

from __future__ import annotations

import json
import sys
from fractions import Fraction

import numpy as np
import pytest
import witness
import witness.execute
from constructions import two_sum_sparse
from constructions.composition import build
from verify import check, checker
from verify.certify import Construction, certify
from verify.certify.networks import weights_of
from verify.checker.numbers import parse_format
from verify.checker.tasks import Composition
from verify.result import Status
from witness.arith import arithmetic

from tests.verify.checker.forgery import (
    certificate_of,
    parametric_forgery,
    rules_of,
)


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


def test_parameters_past_pythons_digit_limit_are_read_and_named_by_their_bit_length(tmp_path):
    """m = 2^20000 has 6,021 decimal digits, past the 4,300 Python converts to text by default (which the command
    line lifts, a caller of the library may not): the checker reads it, proves the parametric claim, and names such
    an integer in a refusal by its bit length, building the message only when it refuses."""
    assert 0 < sys.get_int_max_str_digits() < 6021  # the default limit is in force here
    huge = 2 ** 20000
    assert Composition.from_params({"L": 1, "m": huge, "n": []}).m == huge
    result = certify(Construction(1, huge), arithmetic("fp32", "theory"))
    assert result.status is Status.VERIFIED and result.detail["certificate"]["claim"]["params"]["m"] == huge
    path = tmp_path / "huge.json"  # written and read back whole by the library, the limit still in force
    checker.write_certificate(result.detail["certificate"], path)
    assert checker.check_files(path)["confirmed"] and sys.get_int_max_str_digits() < 6021
    named = "<an integer of 20001 bits>"
    for params, message in [({"L": 1, "m": -huge, "n": []}, f"m must be an integer >= 1, got {named}"),
                            ({"L": 1, "m": huge, "n": [], "x": [huge]}, f"'m': {named}, 'n': [], 'x': [{named}]")]:
        with pytest.raises(checker.Refused) as refusal:
            Composition.from_params(params)
        assert message in str(refusal.value)


def test_a_single_answer_composition_is_certified_not_an_internal_error():
    """m = 1 has one answer column, so no other logit to beat: certify stopped with an OverflowError."""
    network = witness.compile("composition", L=1, m=1)
    assert certify(network, arithmetic("fp16", "strict")).status is Status.VERIFIED


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


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"kind": ' + "9" * 300_001 + "}"])
def test_an_unreadable_certificate_is_one_refusal_not_a_traceback(tmp_path, text):
    """JSON nested past Python's stack, an integer past the digits a certificate may have (whose quadratic
    conversion would take seconds to minutes): a RecursionError, a ValueError before."""
    path = tmp_path / "certificate.json"
    path.write_text(text)
    with pytest.raises(checker.Refused, match="not JSON"):
        checker.load_certificate(path)
