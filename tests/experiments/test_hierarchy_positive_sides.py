"""The hierarchy's positive sides: chain of thought and the encoder beside the (L+1)-layer decoder and the hybrid
Theorem 1.1 rules out, and the plot of depth against L.

The p* of a real row is checked against the executor directly: the saved network, loaded from its file, is run on
every input of its family at the row's format (verified) and at every format of one bit fewer (each fails), with
the formats written out here rather than taken from `verify.precision`.
"""

from __future__ import annotations

import dataclasses

import pytest

from experiments.hierarchy import load_config
from experiments.hierarchy.jobs import run_job
from experiments.hierarchy.plan import DEPTH_CURVES, POSITIVE_SIDES, first_jobs
from experiments.hierarchy.plots import plot_depths
from experiments.hierarchy.report import positive_sides_section, positive_sides_table
from experiments.hierarchy.rows import EXHAUSTIVE, NOT_AVAILABLE, DepthCurve, PositiveSideRow
from experiments.hierarchy.words import ruled_out, verified_exhaustively
from verify import check
from verify.result import Status
from witness.arith import arithmetic, parse_format
from witness.errors import ParameterError
from witness.io import load

PNG = b"\x89PNG\r\n\x1a\n"


def positive_job(tmp_path, construction: str, L: int, m: int, n: list[int]) -> dict:
    """The plan's job for `construction`, at a family of our choosing."""
    config = load_config(quick=True)
    job = next(job for job in first_jobs(config, tmp_path) if job["kind"] == "positive side"
               and job["construction"] == construction and job["L"] == L)
    return {**job, "params": {"L": L, "m": m, "n": n}}


def split_formats(bits: int) -> list[str]:
    """Every float format of `bits` bits (a sign, an exponent of at least 2 bits, a mantissa of at least 1)."""
    return [f"float:{bits - 1 - exponent},{exponent}" for exponent in range(2, bits - 1)]


@pytest.mark.parametrize("construction", POSITIVE_SIDES)
def test_a_rows_p_star_is_what_running_every_input_gives(tmp_path, construction):
    (tmp_path / "networks").mkdir()
    row = run_job(positive_job(tmp_path, construction, 2, 2, [1]))
    assert row.status == EXHAUSTIVE and row.certificate is None
    network = load(tmp_path / row.network)
    assert row.layers == len(network.layers) and row.inputs == network.task.count() == 32
    assert row.generated == getattr(network.task, "generated_tokens", 0)
    assert row.budget["n_layers"] == row.layers and row.budget["p"] == parse_format(row.format).bits
    at_p = check.exhaustive(network, arithmetic(parse_format(row.format), "strict"))
    assert at_p.status is Status.VERIFIED and at_p.checked == row.inputs
    below = split_formats(row.budget["p"] - 1)
    assert [trial["format"] for trial in row.min_precision["below"]] == below
    for fmt in below:
        assert check.exhaustive(network, arithmetic(parse_format(fmt), "strict")).status is Status.FALSIFIED
    assert row.evidence.startswith(f"verified on every input (exhaustive, 32 inputs, {row.format} strict)")
    assert "certified" not in row.evidence
    assert PositiveSideRow.from_json(row.to_json()) == row


def test_the_depth_curves_are_read_from_compiled_networks_and_plotted(tmp_path):
    jobs = [job for job in first_jobs(load_config(quick=True), tmp_path) if job["kind"] == "depth"]
    curves = {curve.construction: curve for curve in map(run_job, jobs)}
    assert set(curves) == set(DEPTH_CURVES) and all(curve.L == list(range(1, 9)) for curve in curves.values())
    assert curves["composition"].layers == [L + 1 for L in range(1, 9)]
    cot = curves["composition_cot"]
    assert set(cot.layers) == {2} and cot.generated == cot.L
    assert set(curves["composition_cot_pairs"].layers) == {1}
    assert curves["composition_encoder"].causal is False
    assert curves["composition_encoder"].layers == [2, 3, 4, 4, 5, 5, 5, 5]  # ceil(log2 L) + 2
    plot_depths(tmp_path / "depths.png", [curve.to_json() for curve in curves.values()])
    assert (tmp_path / "depths.png").read_bytes()[:8] == PNG
    missing = DepthCurve(construction="x", label="x", causal=None, L=[], layers=[], generated=[], missing="gone")
    plot_depths(tmp_path / "some_missing.png", [curves["composition"].to_json(), missing.to_json()])
    assert (tmp_path / "some_missing.png").read_bytes()[:8] == PNG


def hand_report() -> dict:
    """A report.json with depth 2's decoder, two hybrid probes, its bounds, and positive sides made by hand."""
    budget = {"H": 1, "d_head": 7, "d_model": 32, "p": 8, "n_layers": 3, "d": 32, "Hdp": 256, "state_bits": 0}
    decoder = {"stage": "construction", "L": 2, "task": "composition", "name": "L2_composition",
               "architecture": "3 full attention layers (construction)", "params": {"L": 2, "m": 4, "n": [4]},
               "semantics": "strict", "network": "networks/L2_composition.npz",
               "certificate": "certificates/L2_composition.json", "status": "certified", "format": "float:2,5",
               "budget": budget, "evidence": "every input (2^76 inputs) at p* = 8"}
    hybrids = [{"stage": "probe", "L": 2, "task": "composition", "name": f"L2_hybrid_{weights}_s0",
                "architecture": "1 full + 1 linear per gap (probe)", "params": {"L": 2, "m": 4, "n": [4]},
                "format": "float:2,5", "budget": {**budget, "n_layers": 3}, "status": "failures found",
                "failing": 5, "tried": 10} for weights in ("random", "trained")]
    cot = PositiveSideRow(L=2, task="composition", name="L2_composition_cot", construction="composition_cot",
                          architecture="decoder + chain of thought", params={"L": 2, "m": 2, "n": [2]},
                          semantics="strict", network="networks/L2_composition_cot.npz", n_ctx=7, layers=2,
                          generated=2, inputs=4096, min_precision={}, status=EXHAUSTIVE, format="float:2,3",
                          budget={**budget, "d_head": 7, "d_model": 22, "d": 22, "p": 6, "Hdp": 132, "n_layers": 2},
                          evidence=verified_exhaustively(4096, "float:2,3", "strict", "float", 6, 2, 2, 0))
    missing = PositiveSideRow(L=2, task="composition", name="L2_composition_encoder",
                              construction="composition_encoder", architecture="encoder", params={"L": 2, "m": 2,
                                                                                                  "n": [2]},
                              semantics="strict", status=NOT_AVAILABLE, evidence="not installed")
    bounds = {"L": 2, "task": "composition", "Hdp": 256, "n": 22, "applies": {"theorem_1_1.applies": False},
              "thresholds": {"theorem_1_1.min_n": "≈ 2^8192"}}
    return {"rows": [decoder, *hybrids], "bounds": [bounds], "positive_sides": [cot.to_json(), missing.to_json()],
            "depths": []}


def test_the_positive_sides_table_puts_the_decoder_the_new_rows_and_the_ruled_out_hybrid_side_by_side():
    lines = positive_sides_table(hand_report())
    header, body = lines[0], lines[2:]
    assert [cell.strip() for cell in header.strip("|").split("|")] == [
        "L", "architecture", "family", "layers", "generated tokens", "H", "d_head", "d_model", "d", "p* (format)",
        "Hdp", "inputs", "verdict"]
    assert len(body) == 4  # decoder, chain of thought, the encoder not available, the hybrid
    decoder, cot, missing, hybrid = ([cell.strip() for cell in line.strip("|").split("|")] for line in body)
    assert decoder[3:5] == ["3", "0"] and decoder[9:12] == ["8 (float:2,5)", "256", "≈ 7.56e+22"]
    assert "**certified**" in decoder[12] and "certificates/L2_composition.json" in decoder[12]
    assert cot[2:12] == ["m = 2, n = [2]", "2", "2", "1", "7", "22", "22", "6 (float:2,3)", "132", "4,096"]
    assert cot[12].startswith("**verified (exhaustive)**: verified on every input (exhaustive, 4096 inputs, "
                              "float:2,3 strict)") and "certified" not in cot[12]
    assert missing[3] == "—" and missing[11] == "—" and "**not available**" in missing[12]
    assert hybrid[1] == "1 full + 1 linear per gap (probe)" and hybrid[11] == "—"
    assert "L2_hybrid_random_s0 (failures found, 5 / 10), L2_hybrid_trained_s0" in hybrid[12]
    assert "does not cover Hdp = 256" in hybrid[12] and "not a proof" in hybrid[12]
    assert positive_sides_section({**hand_report(), "positive_sides": [], "depths": []}, []) == []


def test_the_ruled_out_words_say_whether_the_theorem_covers_the_budget():
    covered = ruled_out(2, True, "2^963", 33726, "≤ this n", None, ["L2_hybrid_random_s0"])
    assert covered.startswith("Theorem 1.1 rules out L − 1 = 1 full layers plus linear layers at Hdp = 33726")
    uncovered = ruled_out(1, False, 16, 161, "≈ 2^469", "L1_separation", [])
    assert "only for large n" in uncovered and "row L1_separation" in uncovered and "no probe row" in uncovered


def test_positive_sides_must_stand_beside_a_configured_depth_at_an_enumerable_family():
    config = load_config(quick=True)
    assert [level.L for level in config.positive_sides] == [level.L for level in config.levels]
    assert [level.L for level in config.select([2]).positive_sides] == [2]
    with pytest.raises(ParameterError, match="levels"):
        dataclasses.replace(config, positive_sides=((9, 2, (1,) * 8),))
    with pytest.raises(ParameterError, match="exhaustive search enumerates"):
        dataclasses.replace(config, positive_sides=((3, 4, (2, 4)),))
    assert config.to_json()["positive_sides"]["levels"]["2"] == {"m": 2, "n": [1]}
