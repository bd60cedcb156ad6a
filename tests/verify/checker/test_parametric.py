"""The parametric proof (a construction by its description, no network file): loosely read fields, rounded
constants and float64-rounded scores are refused; the description means the network `build()` makes, and the
checker's task model is witness's."""

from __future__ import annotations

import numpy as np
import pytest
import witness
import witness.execute
from constructions.composition import build, describe
from verify import checker
from verify.certify import Construction, certify
from verify.certify.composition import description_json
from verify.checker import parametric
from verify.checker.tasks import Composition as CheckerComposition
from verify.result import Status
from witness.arith import arithmetic

from tests.verify.checker.forgery import (
    parametric_forgery,
    rules_of,
)


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
