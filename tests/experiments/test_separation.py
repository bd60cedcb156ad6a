"""The separation at the theorem's own scale (experiments.separation, `witness separation`, `witness bounds
--construction`): budgets from the description, the covering inequality in Python ints, the certificate checked
and tampered with."""

from __future__ import annotations

import json

import pytest

import witness
from constructions.composition import describe
from verify import checker
from experiments import separation
from verify.certify import Construction, certify
from verify.result import Status
from witness.arith import arithmetic
from witness.arith.formats import Float
from cli.main import main


@pytest.mark.parametrize("L, m, n, bits", [(1, 5, (), 7), (2, 3, (2,), 8), (3, 2, (2, 3), 16), (2, 64, (64,), 11)])
def test_the_description_budget_is_the_built_networks(L, m, n, bits):
    network = witness.compile("composition", L=L, m=m, n=list(n))
    expected = network.budget(bits).as_dict()
    assert separation.budget(Construction(L, m, n), bits) == {key: expected[key] for key in
                                                              ("H", "d_head", "d_model", "d", "p", "Hdp")}


@pytest.fixture(scope="module")
def l1(tmp_path_factory):
    out = tmp_path_factory.mktemp("separation")
    assert main(["separation", "--L", "1", "--out", str(out), "--json"]) == 0
    return out


def test_the_l1_separation_is_covered_and_certified(l1, capsys):
    brief = json.loads((l1 / "separation.json").read_text())
    k, L = brief["k"], brief["params"]["L"]
    assert (L, brief["params"]["m"], brief["prompt_length"]) == (1, 2**k - 2, f"2^{k}")
    # Theorem 1.1's condition, recomputed here with Python ints: Hdp <= n^(2^-6)  <=>  Hdp^64 <= n
    Hdp = brief["H"] * brief["d"] * brief["p"]
    assert Hdp == brief["Hdp"] and Hdp ** 64 <= 2 ** k and brief["covered"] is True
    assert int(brief["theorem"]["largest_Hdp"]) ** 64 <= 2 ** k < (int(brief["theorem"]["largest_Hdp"]) + 1) ** 64
    # one size smaller, even the fewest bits any format that holds the weights has (p*) is not covered
    smaller = separation.budget(separation.family(1, k - 1), brief["p"])
    assert smaller["Hdp"] ** 64 > 2 ** (k - 1)
    # the checker confirms the written certificate and reports the same budget
    summary = checker.check_files(l1 / "certificate.json")
    assert summary["budget"] == {key: brief[key] for key in ("H", "d_head", "d_model", "d", "p", "Hdp")}
    assert summary["format"] == brief["format"] and summary["semantics"] == "theory"
    assert main(["check-certificate", str(l1 / "certificate.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["budget"]["Hdp"] == Hdp
    text = (l1 / "separation.md").read_text()
    assert "The paper proves" in text and str(brief["theorem"]["largest_Hdp"]) in text


@pytest.mark.parametrize("field, value", [("format", "float:1,4"), ("format", "float:2,5"),
                                          ("params", {"L": 1, "m": 14, "n": [], "layout": "paper"})])
def test_a_tampered_separation_certificate_is_refused(l1, field, value):
    forged = json.loads((l1 / "certificate.json").read_text())
    forged["claim"][field] = value
    with pytest.raises(checker.Refused):
        checker.check(forged)


def test_bounds_of_the_construction_at_any_size(capsys):
    assert main(["bounds", "--construction", "composition", "--L", "2", "--m", "2^10312", "--n", "2^10312",
                 "--format", "float:2,5", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert (payload["Hdp"], payload["theorems"]["theorem_1_1"]["covered"]) == (1154976, True)
    assert payload["d_model"] == 144372 and payload["prompt_length_log2"] == "20624"
    assert main(["bounds", "--construction", "composition", "--L", "2", "--m", "2^10311", "--n", "2^10311",
                 "--format", "float:2,5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["theorems"]["theorem_1_1"]["covered"] is False
    assert main(["bounds", "--construction", "composition", "--L", "2", "--m", "4"]) == 2
    assert "--format" in capsys.readouterr().err


@pytest.mark.parametrize("L, sizes", [(1, range(2, 15)), (2, range(1, 8))])
def test_the_closed_form_pretest_skips_only_formats_certify_refuses(L, sizes):
    """A format the scan skips without certify must be one certify refuses, or p* could change: every format the
    scan can try (EXPONENTS x MANTISSAS) at every size of a range where the seed weight C = 2 beta goes from 4 to
    12, each skip compared with a real certify run. Both reasons occur, and an overflow skip is certify's own
    overflow refusal."""
    skipped = {"overflows": 0, "rounds to": 0}
    for k in sizes:
        target = separation.family(L, k)
        refusal = separation.refusals(describe(target.L, target.m, target.n))
        for exponent in separation.EXPONENTS:
            for mantissa in separation.MANTISSAS:
                fmt = Float(mantissa, exponent)
                reason = refusal(fmt)
                if reason is None:
                    continue
                result = certify(target, arithmetic(fmt, "theory"))
                assert result.status is Status.UNKNOWN, (L, k, fmt.name, reason)
                kind = "overflows" if "overflows" in reason else "rounds to"
                assert kind in reason
                assert kind != "overflows" or "overflows" in result.detail["reason"], (L, k, fmt.name)
                skipped[kind] += 1
    assert all(skipped.values()), skipped


def test_the_pretest_at_the_l2_answer_skips_what_certify_refuses():
    """At L = 2's answer, k = 10,312, the theorem covers 8 bits: the pre-test passes float:2,5 alone (p* = 8) of
    the formats of at most 8 bits, and certify refuses each it skips, at this scale too."""
    target = separation.family(2, 10312)
    refusal = separation.refusals(describe(target.L, target.m, target.n))
    formats = [Float(p - 1 - e, e) for p in range(4, 9) for e in separation.EXPONENTS
               if p - 1 - e in separation.MANTISSAS]
    assert [fmt.name for fmt in formats if refusal(fmt) is None] == ["float:2,5"]
    for fmt in formats:
        if refusal(fmt) is not None:
            assert certify(target, arithmetic(fmt, "theory")).status is Status.UNKNOWN, fmt.name
