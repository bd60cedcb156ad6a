"""The covering inequality as the checker evaluates it (verify/checker/covering.py): its nested integer roots agree
with verify.theorems' independent ones, by hand and on random big ints; on the committed separations it reports
what experiments.separation computes, and on a small certificate that no theorem covers it says so."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from experiments import separation
from tests import REPO
from verify import checker, theorems
from verify.checker.covering import floor_root


@pytest.mark.parametrize("n, e, expected", [
    (2**64, 6, 2), (2**64 - 1, 6, 1), (3**64, 6, 3), (3**64 - 1, 6, 2), (10**6, 1, 1000), (10**6 - 1, 1, 999),
    (0, 5, 0), (1, 5, 1), (2, 0, 2), (2, 1, 1), (255, 3, 1), (256, 3, 2)])
def test_nested_integer_roots_by_hand(n, e, expected):
    assert floor_root(n, e) == expected == theorems.floor_root_power_of_two(n, e)


def test_nested_integer_roots_of_a_big_power_and_a_huge_exponent():
    n = 2 ** 2**16
    assert floor_root(n, 16) == 2 and floor_root(n - 1, 16) == 1 and floor_root(n, 10**9) == 1
    assert floor_root(n, 10) == 2 ** 2**6 == theorems.floor_root_power_of_two(n, 10)


@settings(max_examples=300, deadline=None)
@given(st.integers(4, 2**12), st.integers(0, 12), st.integers(-3, 3), st.integers(0, 14))
def test_nested_integer_roots_agree_with_the_theorems_module_next_to_perfect_powers(base, k, offset, e):
    """n = base^(2^k) + offset straddles a perfect 2^k-th power; against verify.theorems and, where 1 <= e <= k,
    the exact answer: floor((base^(2^k) + offset)^(2^-e)) = base^(2^(k-e)), less one when offset < 0 (base >= 4,
    so the next power up or down is more than 3 away)."""
    n = base ** 2**k + offset
    assert floor_root(n, e) == theorems.floor_root_power_of_two(n, e)
    if 1 <= e <= k:
        assert floor_root(n, e) == base ** 2**(k - e) - (offset < 0)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**20_000), st.integers(0, 20))
def test_nested_integer_roots_agree_with_the_theorems_module_on_big_ints(n, e):
    r = floor_root(n, e)
    assert r == theorems.floor_root_power_of_two(n, e)
    assert r ** 2**e <= n < (r + 1) ** 2**e


@pytest.mark.parametrize("L", [1, 2])
def test_the_committed_separations_are_covered_as_experiments_separation_computes(L):
    """The L = 2 certificate (n = 2^20624 + 2^10312 + 2) takes a few seconds to check."""
    folder = REPO / "docs" / "hierarchy" / "separation" / f"L{L}"
    stored = json.loads((folder / "separation.json").read_text(encoding="utf-8"))
    summary = checker.check_files(folder / "certificate.json")
    n = separation.family(L, stored["k"]).task.prompt_length
    computed = separation.covering(L, n, summary["budget"]["Hdp"])
    covering = summary["covering"]
    assert int(str(covering["prompt_length"]), 0) == n
    assert covering["prompt_length_log2"] == stored["prompt_length_log2"]
    for key in ("H", "d", "p", "Hdp"):
        assert covering[key] == stored[key]
    for theorem, entry in computed.items():
        assert covering[theorem]["covered"] is entry["covered"] is True
        written = stored["theorem" if theorem == "theorem_1_1" else "cpw"]
        assert covering[theorem]["largest_Hdp"] == entry["largest_Hdp"] == int(written["largest_Hdp"])
    assert summary["covered"] is stored["covered"] is True


def test_a_small_certificate_is_not_covered(tmp_path, capsys):
    out = tmp_path / "small.json"
    assert main(["certify", "composition", "--L", "1", "--m", "4", "--format", "fp16", "--semantics", "theory",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["check-certificate", str(out), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["covered"] is False and payload["covering"]["prompt_length"] == 6
    assert payload["covering"]["theorem_1_1"] == {"exponent": 6, "condition": "Hdp <= n^(2^-6)", "largest_Hdp": 1,
                                                  "covered": False}
    assert payload["covering"]["cpw"]["covered"] is False


def test_a_separation_whose_theorems_module_disagrees_with_the_checker_is_refused(monkeypatch):
    """experiments.separation takes `covered` from the checker and cross-checks its own evaluation."""
    folder = REPO / "docs" / "hierarchy" / "separation" / "L1"
    assert separation.recheck(folder)["covered"] is True
    monkeypatch.setattr(separation.theorem_bounds, "floor_root_power_of_two", lambda n, k: 1)
    with pytest.raises(separation.ParameterError, match="evaluate theorem_1_1's condition differently"):
        separation.recheck(folder)


def test_check_certificate_says_the_covering_in_one_readable_line(capsys):
    """The text names the huge parameters by shape, not by their hundreds of digits (--json has them all)."""
    assert main(["check-certificate", str(REPO / "docs/hierarchy/separation/L1/certificate.json")]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and len(out) < 400, out
    assert "m: <290-digit integer>" in out and out.rstrip().endswith("Theorem 1.1 covers this budget: yes"), out
