"""`verify.theorems` and `witness bounds`: the theorems' thresholds against hand-computed values.

Theorem 1.1 (Ye et al.): Hdp <= n^(2^-(4L+2)); CPW: Hdp <= n^(2^-4L). Every expected number below is worked out
by hand in the comment next to it, or checked against a plain re-implementation written here.
"""

from __future__ import annotations

import json

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import witness
from verify.theorems import (
    MAX_EXACT_DIGITS,
    HeadShape,
    balanced_prompt_length,
    balanced_seed_range,
    bounds,
    floor_root_power_of_two,
    max_Hdp_at,
    min_prompt_length,
)
from cli.main import main
from witness.errors import ParameterError

LOG2_3 = sympy.log(3) / sympy.log(2)


def reference_prompt_length(L: int, m: int) -> int:
    """n = 2 + N_0 + ... + N_{L-1} with N_0 = m and N_l = m * N_{l-1}, written out step by step."""
    total, size = 2, m
    for _ in range(L):
        total += size
        size *= m
    return total


# -- hand-computed values --------------------------------------------------------------------------------------
def test_theorem_1_1_at_L1_Hdp2_needs_2_to_the_64():
    # L = 1: exponent 2^-(4+2) = 2^-6, so 2 <= n^(1/64) iff n >= 2^64.
    bound = min_prompt_length("theorem_1_1", 1, 2)
    assert bound.value == 18446744073709551616 == 2**64
    assert bound.log2 == 64 and bound.approx_log2 == 64.0
    assert "Theorem 1.1" in bound.source and "2602.01763" in bound.source
    # CPW at L = 1: 2^-4, so n >= 2^16.
    cpw = min_prompt_length("cpw", 1, 2)
    assert cpw.value == 65536 and cpw.log2 == 16 and "2412.02975" in cpw.source


def test_non_power_of_two_budget_has_exact_log2():
    # L = 1, Hdp = 3: n >= 3^64 = 3433683820292512484657849089281, log2 = 64 log2 3.
    bound = min_prompt_length("theorem_1_1", 1, 3)
    assert bound.value == 3433683820292512484657849089281
    assert sympy.expand(bound.log2 - 64 * LOG2_3) == 0
    assert sympy.sympify(bound.as_dict()["log2"]) == bound.log2
    assert bound.as_dict()["exact"] == "3433683820292512484657849089281"


def test_astronomical_thresholds_are_given_by_log2():
    # L = 3, Hdp = 64: n >= 64^(2^14) = 2^(6 * 16384) = 2^98304, about 29,600 digits: too many to write out.
    bound = min_prompt_length("theorem_1_1", 3, 64)
    assert bound.exact is None and bound.value is None and bound.approx is None
    assert bound.log2 == 98304 and str(MAX_EXACT_DIGITS) in bound.note
    assert min_prompt_length("cpw", 3, 64).log2 == 6 * 4096


def test_balanced_seed_range_by_hand():
    # L = 1: n = 2 + m, so 2^64 needs m = 2^64 - 2; CPW's 2^16 needs m = 65534.
    assert balanced_seed_range("theorem_1_1", 1, 2).value == 2**64 - 2
    assert balanced_seed_range("cpw", 1, 2).value == 65534
    # L = 2, Hdp = 2: n >= 2^1024 and n = 2 + m + m^2. m = 2^512 gives 2^1024 + 2^512 + 2, while m = 2^512 - 1
    # gives 2^1024 - 2^512 + 2 < 2^1024, so m = 2^512.
    bound = balanced_seed_range("theorem_1_1", 2, 2)
    assert bound.value == 2**512 and bound.log2 == 512


def test_balanced_seed_range_of_an_astronomical_threshold_is_bracketed():
    # L = 3, Hdp = 64: log2 min_n = 98304, so log2 m is within 1/3 of 98304 / 3 = 32768.
    bound = balanced_seed_range("theorem_1_1", 3, 64)
    assert bound.exact is None and bound.log2 is None
    assert bound.approx_log2 == 32768.0 and "lies in" in bound.note


def test_largest_budget_at_a_prompt_length():
    # floor(n^(1/64)) at L = 1: 2 exactly from n = 2^64, 1 just below it.
    assert max_Hdp_at("theorem_1_1", 1, 2**64).value == 2
    assert max_Hdp_at("theorem_1_1", 1, 2**64 - 1).value == 1
    assert max_Hdp_at("theorem_1_1", 1, 3**64).value == 3
    assert max_Hdp_at("theorem_1_1", 1, 3**64 - 1).value == 2
    # CPW at L = 1 takes the 16th root: (2^64)^(1/16) = 16.
    assert max_Hdp_at("cpw", 1, 2**64).value == 16
    assert floor_root_power_of_two(10**6, 1) == 1000 and floor_root_power_of_two(10**6, 2) == 31


def test_report_lists_every_bound_with_its_paper():
    report = bounds(2, 64, n=1024, B=8, shape=HeadShape(2, 4, 8))
    # 2^(3 L^2) = 2^12 linear layers per gap; state 2 * (16 + 4) * 8 = 320 bits.
    assert report.bound("theorem_1_1.linear_layers_per_gap").value == 4096
    assert report.bound("linear_state.bits").value == 320
    # log2 1024 = 10; the sparse scale B log2 n = 80. Their constants are unknown and the report says so.
    full, sparse = report.bound("theorem_1_2.full_scale"), report.bound("theorem_1_2.sparse_scale")
    assert full.exact == 10 and sparse.exact == 80
    assert all("no constant" in item.note and "Theorem 1.2" in item.source for item in (full, sparse))
    assert {item.name: item.holds for item in report.applies} == {"theorem_1_1.applies": False, "cpw.applies": False}
    assert all(item.source for item in report.bounds)
    # Without a shape, the worst case over H*d*p = 64 is d = 64: 64 * 65 = 4160 bits.
    assert bounds(2, 64).bound("linear_state.max_bits").value == 4160


def test_theorem_applies_exactly_from_its_threshold():
    assert bounds(1, 2, n=2**64).applies[0].holds
    assert not bounds(1, 2, n=2**64 - 1).applies[0].holds
    # Hdp = 1 is covered at every n (1 <= n^(anything)).
    assert all(item.holds for item in bounds(3, 1, n=2).applies)


def test_bad_parameters_raise_one_clear_error():
    for call, words in [(lambda: bounds(0, 64), "L must be >= 1"), (lambda: bounds(2, 0), "Hdp must be >= 1"),
                        (lambda: bounds(2, 64, n=1), "n must be >= 2"), (lambda: bounds(2, 64, B=4), "needs n"),
                        (lambda: bounds(2, 63, shape=HeadShape(2, 4, 8)), "differs"),
                        (lambda: HeadShape(1, 0, 1), "d must be >= 1"), (lambda: bounds(2, 2.5), "integer"),
                        (lambda: bounds(255, 64), "float range"),
                        (lambda: min_prompt_length("theorem_9", 1, 2), "unknown theorem")]:
        with pytest.raises(ParameterError, match=words):
            call()
    assert bounds(254, 2).bound("theorem_1_1.min_n").log2 == 2**1018  # the largest L whose log2 fits a float


# -- properties ------------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 3), Hdp=st.integers(1, 10**4), n=st.integers(2, 10**40))
def test_min_n_and_max_Hdp_describe_the_same_condition(L, Hdp, n):
    for theorem, k in (("theorem_1_1", 4 * L + 2), ("cpw", 4 * L)):
        largest = max_Hdp_at(theorem, L, n).value
        assert largest**(2**k) <= n < (largest + 1) ** (2**k)  # the floor of the 2^k-th root, checked directly
        smallest_n = min_prompt_length(theorem, L, Hdp).value
        covered = Hdp <= largest
        # An unwritten min_n has over 4000 digits, so it exceeds every n drawn here.
        assert covered == (smallest_n is not None and n >= smallest_n)


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 4), Hdp=st.integers(1, 50))
def test_thresholds_grow_with_budget_and_depth(L, Hdp):
    for theorem in ("theorem_1_1", "cpw"):
        here = min_prompt_length(theorem, L, Hdp).approx_log2
        assert min_prompt_length(theorem, L, Hdp + 1).approx_log2 > here
        assert min_prompt_length(theorem, L + 1, Hdp).approx_log2 >= here
    # Theorem 1.1 asks for a longer prompt than CPW at the same depth (its exponent is 2^-(4L+2) < 2^-4L).
    assert min_prompt_length("theorem_1_1", L, Hdp).approx_log2 >= min_prompt_length("cpw", L, Hdp).approx_log2


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 3), Hdp=st.integers(1, 6))
def test_balanced_seed_range_is_the_smallest_reaching_min_n(L, Hdp):
    for theorem in ("theorem_1_1", "cpw"):
        target = min_prompt_length(theorem, L, Hdp)
        m = balanced_seed_range(theorem, L, Hdp).value
        if target.value is None:
            continue
        assert reference_prompt_length(L, m) >= target.value
        assert m == 1 or reference_prompt_length(L, m - 1) < target.value


@pytest.mark.parametrize("L,m", [(1, 5), (2, 3), (3, 2), (3, 4)])
def test_prompt_length_formula_matches_the_task(L, m):
    task = witness.Composition(L=L, m=m, n=(m,) * (L - 1))
    assert task.prompt_length == reference_prompt_length(L, m)
    assert balanced_prompt_length(L, m) == task.prompt_length


# -- command line ----------------------------------------------------------------------------------------------
def test_cli_json(capsys):
    assert main(["bounds", "--L", "1", "--Hdp", "2", "--n", "1024", "--B", "8", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and len(captured.out.strip().splitlines()) == 1
    payload = json.loads(captured.out)
    assert (payload["L"], payload["Hdp"], payload["n"], payload["B"]) == (1, 2, 1024, 8)
    by_name = {item["name"]: item for item in payload["bounds"]}
    assert by_name["theorem_1_1.min_n"]["exact"] == "18446744073709551616"
    assert by_name["theorem_1_1.min_n"]["log2"] == "64"
    assert by_name["cpw.min_n"]["exact"] == "65536"
    assert by_name["theorem_1_2.sparse_scale"]["exact"] == "80"
    assert [item["holds"] for item in payload["applies"]] == [False, False]


def test_cli_text_and_shape(capsys):
    assert main(["bounds", "--L", "2", "--shape", "2", "4", "8"]) == 0
    out = capsys.readouterr().out
    assert "bounds for L = 2, Hdp = 64" in out and "2602.01763" in out and "2412.02975" in out
    assert "linear_state.bits" in out and "320" in out


@pytest.mark.parametrize("argv,words", [
    (["--L", "0", "--Hdp", "64"], "L must be >= 1"),
    (["--L", "2", "--Hdp", "0"], "Hdp must be >= 1"),
    (["--L", "2"], "give --Hdp or --shape"),
    (["--L", "2", "--Hdp", "x"], "invalid int value"),
    (["--L", "2", "--Hdp", "64", "--B", "4"], "needs n"),
    (["--L", "2", "--Hdp", "63", "--shape", "2", "4", "8"], "differs"),
    (["--L", "2", "--Hdp", "8", "--format", "fp16"], "needs --network"),
])
def test_cli_errors_are_one_line(capsys, argv, words):
    assert main(["bounds", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and words in captured.err


def test_cli_network_sets_n_and_reports_its_budget(tmp_path, capsys):
    path = tmp_path / "net.npz"
    assert main(["compile", "composition", "--L", "2", "--m", "4", "--n", "4", "-o", str(path), "--json"]) == 0
    compiled = json.loads(capsys.readouterr().out)
    assert main(["bounds", "--L", "2", "--Hdp", "8", "--network", str(path), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["n"] == 2 + 4 + 16  # N_0 = 4, N_1 = 4 * 4
    by_name = {item["name"]: item for item in payload["bounds"]}
    assert by_name["network.Hdp"]["exact"] == str(compiled["Hdp"])
    assert main(["bounds", "--L", "2", "--Hdp", "8", "--network", str(path), "--format", "fp16", "--json"]) == 0
    at_fp16 = {item["name"]: item for item in json.loads(capsys.readouterr().out)["bounds"]}["network.Hdp"]
    assert int(at_fp16["exact"]) * 64 == compiled["Hdp"] * 16  # the same H and d, p = 16 bits instead of 64
    assert main(["bounds", "--L", "3", "--Hdp", "8", "--network", str(path)]) == 2
    assert "L = 3" in capsys.readouterr().err
    assert main(["bounds", "--L", "2", "--Hdp", "8", "--n", "23", "--network", str(path)]) == 2
    assert "prompt length 22" in capsys.readouterr().err
    with pytest.raises(ParameterError, match="needs n"):
        bounds(2, 8, network_Hdp=100)
