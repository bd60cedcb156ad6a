"""verify.precision: the min-precision search (on checkers whose answer is known in advance, and on the real ones),
the p* verdict it carries, its tables, and `witness min-precision`.

Expected precisions come from running the checkers on every split by hand.
"""

from __future__ import annotations

import json

import pytest

import witness
from cli.main import main
from lab.sweep import Engine
from verify import check, checker, precision
from verify.certify import Construction, certify
from verify.result import Result, Status
from witness.arith.formats import Fixed, Float, parse_format
from witness.arith.semantics import arithmetic
from witness.errors import ParameterError


def cli_json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main(argv + ["--json"])
    out, err = capsys.readouterr()
    assert err == ""
    return code, json.loads(out)


def threshold_checker(needed: dict[int, int | None]):
    """Verifies Float(M, E) iff M >= needed[E] (None: never). A stand-in for a real checker, monotone in M."""
    def checker(fmt, semantics) -> Result:
        need = needed.get(fmt.exponent)
        ok = need is not None and fmt.mantissa >= need
        return Result(Status.VERIFIED if ok else Status.FALSIFIED, "synthetic", {}, 1, 0 if ok else 1)
    return checker


def brute_force_minimum(needed: dict[int, int | None]) -> tuple[int, int] | None:
    """(exponent, mantissa) with the smallest p = 1 + E + M among all verified splits, fewest exponent bits first."""
    splits = [(1 + E + M, E, M) for E in range(2, 12) for M in range(1, 53)
              if needed.get(E) is not None and M >= needed[E]]
    return min(splits)[1:] if splits else None


@pytest.mark.parametrize("needed", [
    {2: 40, 3: 10, 4: 8, 5: 7},  # p = 13 is reached by (4, 8) and (5, 7): the tie goes to fewer exponent bits
    {E: max(1, 20 - 3 * E) for E in range(2, 12)},
    {6: 1},
    {},
])
def test_min_precision_agrees_with_brute_force_on_monotone_checkers(needed):
    result = precision.min_precision(threshold_checker(needed), "float", "theory")
    expected = brute_force_minimum(needed)
    if expected is None:
        assert result.status is Status.UNKNOWN and result.p is None
        return
    E, M = expected
    assert result.status is Status.VERIFIED
    assert (result.split, result.p, result.format) == ({"exponent": E, "mantissa": M}, 1 + E + M, Float(M, E).name)
    assert {trial.format for trial in result.below} == {Float(1 + E + M - 2 - e, e).name for e in range(2, 12)
                                                        if 1 <= 1 + E + M - 2 - e <= 52}
    assert all(trial.status != "verified" and trial.p == result.p - 1 for trial in result.below)
    assert result.unrunnable == ()


def test_min_precision_skips_and_lists_the_formats_a_semantics_cannot_run():
    # strict runs float formats with exponent <= 9 and mantissa <= 24 only (witness.arith.semantics)
    result = precision.min_precision(threshold_checker({2: 40, 3: 10, 4: 8, 5: 7}), "float", "strict")
    assert (result.p, result.format) == (13, "float:8,4")
    assert result.unrunnable == ("float:1,10",)
    assert all(parse_format(trial.format).mantissa <= 24 for trial in result.trials)


def test_min_precision_checks_every_split_one_bit_below_instead_of_trusting_monotonicity():
    # Exponent 2 is not monotone in the mantissa: M = 7 verifies, 8..29 do not, 30.. do. Bisection on exponent 2
    # lands on 30; exponent 3 then gives p = 11; the scan of every 10-bit split finds (7, 2).
    def checker(fmt, semantics) -> Result:
        ok = (fmt.exponent == 2 and (fmt.mantissa == 7 or fmt.mantissa >= 30)) or (fmt.exponent == 3
                                                                                   and fmt.mantissa >= 7)
        return Result(Status.VERIFIED if ok else Status.UNKNOWN, "synthetic", {}, 0, 0)

    result = precision.min_precision(checker, "float", "strict")
    assert (result.p, result.split) == (10, {"exponent": 2, "mantissa": 7})
    assert len(result.below) == 6 and all(trial.status == "unknown" for trial in result.below)


def test_min_precision_fixed_splits_integer_and_fraction():
    def checker(fmt, semantics) -> Result:
        if fmt.integer < 3:
            raise witness.OverflowInFormat(f"{fmt.name} overflow in add at index (0,)")
        ok = fmt.fraction >= 4
        return Result(Status.VERIFIED if ok else Status.FALSIFIED, "synthetic", {}, 1, 0 if ok else 1)

    result = precision.min_precision(checker, "fixed", "theory")
    assert (result.p, result.split, result.format) == (8, {"integer": 3, "fraction": 4}, "fixed:3,4")
    assert [trial.format for trial in result.below] == [f"fixed:{i},{6 - i}" for i in range(7)]
    assert [trial.note.startswith("overflow") for trial in result.below] == [True] * 3 + [False] * 4
    assert result.as_dict()["integer"] == 3 and result.as_dict()["status"] == "verified"


def test_a_min_precision_table_has_a_row_per_case_in_order_wherever_it_ran():
    needs = [{2: 40, 3: 10, 4: 8, 5: 7}, {}, {6: 1}]
    cases = [precision.Case(threshold_checker(needed), "float", "theory") for needed in needs]
    here, on_a_sweep = precision.table(cases), precision.table(cases, Engine())
    expected = [brute_force_minimum(needed) for needed in needs]
    assert [row.result.p for row in here] == [None if split is None else 1 + sum(split) for split in expected]
    assert [row.result for row in on_a_sweep] == [row.result for row in here]
    assert all(row.seconds >= 0 for row in here)
    assert [precision.cell(row.result) for row in here] + [precision.cell(None)] == \
        ["13 (float:8,4)", "unknown", "8 (float:1,6)", ""]


def test_slope_is_the_least_squares_growth_of_p():
    assert precision.slope([(1, 3), (2, 5), (3, 7)]) == pytest.approx(2.0)  # an exact line: p = 2 log2 n + 1
    assert precision.slope([(4, 9)]) is None


@pytest.mark.parametrize("kwargs, message", [({"family": "posit"}, "family"), ({"semantics": "lax"}, "semantics"),
                                             ({"max_bits": 1}, "max_bits")])
def test_min_precision_rejects_bad_arguments(kwargs, message):
    arguments = {"family": "float", "semantics": "strict", "max_bits": 64, **kwargs}
    with pytest.raises(ParameterError, match=message):
        precision.min_precision(threshold_checker({}), **arguments)


def test_cli_min_precision_exhaustive_matches_a_hand_search(capsys):
    code, payload = cli_json(capsys, ["min-precision", "composition", "--L", "1", "--m", "3", "--family", "fixed",
                                      "--semantics", "strict", "--method", "exhaustive"])
    assert code == 0 and payload["status"] == "verified"
    # By hand: every fixed split of p bits, for p = 2, 3, ...; the first p with a verified split is p*.
    network = witness.compile("composition", L=1, m=3)
    first = None
    for p in range(2, 12):
        verified = [i for i in range(p) if check.exhaustive(
            network, arithmetic(Fixed(i, p - 1 - i), "strict")).status is Status.VERIFIED]
        if verified:
            first = (p, verified[0])
            break
    assert (payload["p"], payload["integer"], payload["fraction"]) == (first[0], first[1], first[0] - 1 - first[1])
    assert [entry["format"] for entry in payload["below"]] == [f"fixed:{i},{first[0] - 2 - i}"
                                                              for i in range(first[0] - 1)]
    assert all(entry["status"] == "falsified" for entry in payload["below"])


def test_cli_min_precision_bad_input(capsys):
    assert main(["min-precision", "composition", "--L", "1", "--m", "3", "--family", "posit",
                 "--semantics", "strict"]) == 2
    assert "family" in capsys.readouterr().err
    assert main(["min-precision", "two_sum", "--L", "1", "--m", "3", "--family", "float",
                 "--semantics", "strict"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the smallest formats overflow to inf/NaN, as they should
@pytest.mark.parametrize("family, semantics", [("float", "strict"), ("fixed", "strict"), ("float", "theory")])
def test_min_precision_by_certify_is_sound_against_exhaustive(family, semantics):
    network = witness.compile("composition", L=1, m=3)
    found = precision.min_precision(precision.network_checker(network, "certify"), family, semantics, max_bits=24)
    assert found.status is Status.VERIFIED
    fmt = parse_format(found.format)
    assert check.exhaustive(network, arithmetic(fmt, semantics)).status is Status.VERIFIED
    by_exhaustive = precision.min_precision(precision.network_checker(network, "exhaustive"), family, semantics,
                                            max_bits=24)
    assert by_exhaustive.p <= found.p  # certify may need more bits than the truth, never fewer


def test_cli_min_precision_by_certify_is_confirmed_by_exhaustive(capsys):
    code, payload = cli_json(capsys, ["min-precision", "composition", "--L", "2", "--m", "2", "--n", "2",
                                      "--family", "float", "--semantics", "theory"])
    assert (code, payload["status"], payload["method"]) == (0, "verified", "certify")
    assert payload["p"] == 1 + payload["mantissa"] + payload["exponent"]
    network = witness.compile("composition", L=2, m=2, n=[2])
    arith = arithmetic(Float(payload["mantissa"], payload["exponent"]), "theory")
    assert check.exhaustive(network, arith).status is Status.VERIFIED
    assert payload["below"] and all(entry["status"] != "verified" for entry in payload["below"])


# -- the verdict at p* ------------------------------------------------------------------------------------------
#: The JSON fields of a verified float result (witness min-precision prints them, the hierarchy stores them).
FLOAT_FIELDS = {"status", "family", "semantics", "format", "p", "below", "unrunnable", "trials", "max_bits",
                "assumes_monotone", "violations", "exponent", "mantissa"}


@pytest.mark.parametrize("search", ["every-split", "bisect"])
def test_the_result_carries_the_checkers_verdict_at_p_star(search):
    calls = []

    def checker_(fmt, semantics) -> Result:
        calls.append(fmt.name)
        ok = fmt.mantissa >= 5 and fmt.exponent >= 3
        return Result(Status.VERIFIED if ok else Status.UNKNOWN, "synthetic", {"format": fmt.name}, 0, 0, None,
                      {"seen": fmt.name})

    found = precision.min_precision(checker_, "float", "theory", max_bits=16, search=search)
    assert (found.format, found.p) == ("float:5,3", 9)
    assert found.verdict == Result(Status.VERIFIED, "synthetic", {"format": "float:5,3"}, 0, 0, None,
                                   {"seen": "float:5,3"})
    assert found.certificate is None  # the synthetic checker proves nothing
    assert calls.count("float:5,3") == 1  # the verdict is the one the search got, not a second run
    assert set(found.as_dict()) == FLOAT_FIELDS and "verdict" not in json.dumps(found.as_dict())


def test_nothing_verified_carries_no_verdict():
    found = precision.min_precision(threshold_checker({}), "float", "theory", max_bits=8)
    assert (found.status, found.verdict, found.certificate) == (Status.UNKNOWN, None, None)


def test_certify_at_p_star_needs_no_second_run():
    """The hierarchy's case: the certificate of p*'s format comes with the search, and the trusted checker confirms
    it claims that format."""
    found = precision.min_precision(precision.composition_checker(1, 6, ()), "float", "theory", max_bits=16)
    assert found.status is Status.VERIFIED and found.verdict.method == "certify"
    certificate = found.certificate
    assert certificate["claim"]["format"] == found.format and certificate["claim"]["semantics"] == "theory"
    assert checker.check(certificate)["confirmed"]
    again = certify(Construction(1, 6), arithmetic(parse_format(found.format), "theory"))
    assert again.detail["certificate"] == certificate


def test_a_verified_result_without_the_checkers_verified_verdict_is_refused():
    fields = dict(status=Status.VERIFIED, family="float", semantics="theory", format="float:5,3", p=9,
                  split={"exponent": 3, "mantissa": 5}, below=(), unrunnable=(), trials=(), max_bits=16)
    with pytest.raises(ParameterError, match="verified Result"):
        precision.PrecisionResult(**fields)
    with pytest.raises(ParameterError, match="verified Result"):
        precision.PrecisionResult(**fields, verdict=Result(Status.UNKNOWN, "synthetic", {}, 0, 0))
    unknown = dict(fields, status=Status.UNKNOWN, format=None, p=None, split={})
    with pytest.raises(ParameterError, match="verified Result"):
        precision.PrecisionResult(**unknown, verdict=Result(Status.VERIFIED, "synthetic", {}, 0, 0))
