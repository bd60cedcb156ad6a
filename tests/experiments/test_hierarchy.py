"""`witness hierarchy --quick`: every certified row re-checked from its certificate, every failure replayed.

The replay does not trust the report: each saved network is loaded from its file and run by the executor at the
row's format and semantics, and the answer it should have given comes from tests/reference_tasks.py (plain loops
over the task's definition), not from witness.tasks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest

from tests.oracles.reference_tasks import composition_answer_from_tokens, two_sum_answer
from verify import checker
from experiments.hierarchy import judge_against_controls, load_config
from experiments.hierarchy.evidence import CONTROL, EVIDENCE, NO_EVIDENCE, UNTRAINED, category_of
from experiments.hierarchy.rows import ProbeRow, outcome_row_from_json
from witness.arith import arithmetic, parse_format
from cli.main import main
from witness.errors import FileFormatError, ParameterError
from witness.execute import run
from witness.io import load

STATUSES = {"certified", "unknown", "failures found", "none found", "not available"}


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("hierarchy")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["hierarchy", "--quick", "--out", str(out), "--json"]) == 0
    lines = stdout.getvalue().strip().splitlines()
    assert len(lines) == 1  # --json prints exactly one object
    return out, json.loads(lines[0])


def reference_answer(row: dict, tokens: list[int]):
    params = row["params"]
    if row["task"] == "composition":
        return composition_answer_from_tokens(params["m"], tuple(params["n"]), tokens)
    return two_sum_answer(tokens, params["M"], params["t"], params.get("causal", False))


def replay(out: Path, row: dict, tokens: list[int]):
    network = load(out / row["network"])
    predictions = run(network, np.asarray([tokens]), arithmetic(parse_format(row["format"]), row["semantics"]))
    values = [int(v) for v in predictions.predictions[0]]
    return values[0] if network.readout.read == "last" else values


def test_report_covers_every_level_and_writes_its_files(report):
    out, payload = report
    assert json.loads((out / "report.json").read_text()) == payload
    assert {row["status"] for row in payload["rows"]} <= STATUSES
    levels = [L for L, _, _ in load_config(quick=True).levels]
    certified = sorted(row["L"] for row in payload["rows"] if row["stage"] == "construction"
                       and row.get("construction") == "composition" and row["status"] == "certified")
    assert certified == levels  # the (L+1)-layer construction is certified at every configured depth
    separated = [row for row in payload["rows"] if row["stage"] == "separation"]
    assert [row["L"] for row in separated] == list(load_config(quick=True).separation) == [1]
    assert all(row["covered"] and row["status"] == "certified" for row in separated)
    assert "**yes**: the separation" in (out / "report.md").read_text()
    probed = {(row["L"], row["architecture"]) for row in payload["rows"] if row["stage"] == "probe"}
    assert {L for L, _ in probed if L is not None} == set(levels)
    text = (out / "report.md").read_text()
    for row in payload["rows"]:
        assert row["architecture"] in text
    for plot in payload["plots"]:
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the hierarchy draws no capacity plot: a committed curve's own capacity.png lies beside its page
    assert payload["plots"] == ["plots/min_precision.png", "plots/outcomes.png", "plots/depths.png"]
    assert payload["capacity"] == [] and payload["config"]["curves"] == []  # --quick names no committed curve
    curves = text.split("## Capacity curves: where trained architectures part\n\n", 1)[1].split("\n## ", 1)[0]
    assert curves.startswith("This configuration names no committed curve")
    assert {item["task"] for item in payload["bounds"]} >= {"composition"}


def test_every_positive_side_is_verified_by_running_every_input_and_stands_beside_its_decoder(report):
    out, payload = report
    levels = load_config(quick=True).positive_sides
    sides = payload["positive_sides"]
    assert sorted((row["L"], row["construction"]) for row in sides) == sorted(
        (level.L, name) for level in levels for name in ("composition_cot", "composition_cot_pairs",
                                                          "composition_encoder"))
    section = (out / "report.md").read_text().split("## The positive sides", 1)[1].split("\n## ", 1)[0]
    for row in sides:
        assert row["status"] == "verified (exhaustive)" and row["certificate"] is None
        assert row["layers"] == len(load(out / row["network"]).layers)
        assert f"verified on every input (exhaustive, {row['inputs']} inputs, {row['format']} strict)" in section
    for level in levels:
        assert f"| {level.L} | {level.L + 1} full attention layers (construction) |" in section
        assert f"L{level.L}_hybrid_random_s0 (" in section
    assert "![layers against L](plots/depths.png)" in section


def test_every_certified_row_is_rechecked_from_its_certificate(report):
    out, payload = report
    certified = [row for row in payload["rows"] if row["status"] == "certified"]
    assert certified
    for row in certified:
        certificate = checker.load_certificate(out / row["certificate"])
        assert certificate["claim"]["format"] == row["format"]
        assert certificate["claim"]["semantics"] == row["semantics"]
        network = None if row["network"] is None else out / row["network"]
        assert checker.check_files(out / row["certificate"], network)["confirmed"]


def test_a_certificate_for_another_network_is_rejected(report):
    out, payload = report
    certified = [row for row in payload["rows"] if row["status"] == "certified"]
    first, second = certified[0], certified[1]
    with pytest.raises(checker.Refused, match="sha256"):
        checker.check_files(out / first["certificate"], out / second["network"])


def test_every_failure_and_pair_replays_through_the_executor(report):
    out, payload = report
    replayed = 0
    for row in payload["rows"]:
        for failure in row.get("failures", []):
            expected = reference_answer(row, failure["tokens"])
            assert failure["expected"] == expected
            output = replay(out, row, failure["tokens"])
            assert output == failure["output"] and output != expected
            replayed += 1
        for pair in row.get("pairs", []):
            assert reference_answer(row, pair["a"]) != reference_answer(row, pair["b"])
            assert replay(out, row, pair["a"]) == replay(out, row, pair["b"]) == pair["output"]
            replayed += 1
    assert replayed  # random networks at these sizes do fail, so the quick run has failures to replay


def test_a_failure_replays_with_witness_run(report, capsys, monkeypatch):
    out, payload = report
    row = next(row for row in payload["rows"] if row.get("failures"))
    failure = row["failures"][0]
    monkeypatch.chdir(out)  # the report's paths are relative to its folder
    capsys.readouterr()
    assert main(["run", row["network"], "--tokens", ",".join(map(str, failure["tokens"])), "--format",
                 row["format"], "--semantics", row["semantics"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == failure["output"]


def test_bad_configuration_and_levels_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"levels": {}}')
    with pytest.raises(FileFormatError):
        load_config(bad)
    with pytest.raises(ParameterError):
        load_config(quick=True).select([9])
    assert main(["hierarchy", "--quick", "--out", str(tmp_path), "--L", "9"]) == 2
    assert main(["hierarchy", "--out", str(tmp_path), "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("witness: error:") for line in err)


@pytest.mark.parametrize("curves, says", [
    (["/work/docs/capacity/dhead"], "must be a folder relative to docs/ without \"..\""),
    (["../docs/capacity/dhead"], "must be a folder relative to docs/ without \"..\""),
    (["hierarchy"], "no capacity.json there"),
    (["capacity/dhead", "capacity/dhead/"], "lists capacity/dhead more than once"),
    ("capacity/dhead", "must be a list of folders"),
])
def test_a_bad_curves_entry_is_refused_in_one_line(tmp_path, capsys, curves, says):
    raw = json.loads((Path(__file__).parents[2] / "experiments" / "hierarchy.json").read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**raw, "curves": curves}))
    with pytest.raises(ParameterError, match="^curves") as refused:
        load_config(bad)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert main(["hierarchy", "--out", str(tmp_path / "out"), "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("witness: error: curves") and says in err[0]


def test_a_folder_whose_capacity_json_is_no_curve_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr("experiments.hierarchy.config.DOCS", tmp_path)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "capacity.json").write_text('{"spec": {"L": 1}, "rows": []}')
    with pytest.raises(FileFormatError, match="^curves: .*not a curve `witness capacity` wrote") as refused:
        dataclasses.replace(load_config(quick=True), curves=("broken",))
    assert "\n" not in str(refused.value)


def probe_row(L, name, failing, tried, control=False, weights="trained"):
    return ProbeRow(L=L, task="composition", name=name, architecture=f"arch {name}", params={}, weights=weights,
                    seed=0, format="float:2,5", semantics="strict", network=f"networks/{name}.npz", budget={},
                    control=control, failures=[], pairs=[], searched={}, failing=failing, tried=tried,
                    trained_accuracy=None, status="failures found", evidence="counted")


def test_a_trained_probe_counts_only_where_its_control_learned():
    rows = [probe_row(1, "control1", 2, 200, control=True), probe_row(1, "hybrid1", 150, 200),
            probe_row(2, "control2", 100, 200, control=True), probe_row(2, "hybrid2", 190, 200),
            probe_row(2, "random2", 199, 200, weights="random"), probe_row(3, "hybrid3", 5, 200)]
    judged = {row.name: row for row in judge_against_controls(rows)}
    assert judged["hybrid1"].control_learned and "counts as evidence" in judged["hybrid1"].evidence
    assert "not that none exists" in judged["hybrid1"].evidence
    assert category_of(judged["hybrid1"]) == EVIDENCE
    assert judged["hybrid2"].control_learned is False and "no evidence" in judged["hybrid2"].evidence
    assert "failed 100 of 200 inputs at float:2,5" in judged["hybrid2"].evidence
    assert category_of(judged["hybrid2"]) == NO_EVIDENCE
    assert judged["random2"].evidence == "counted"  # random weights are judged by their own words
    assert "no trained control" in judged["hybrid3"].evidence and judged["hybrid3"].control_learned is None
    assert category_of(judged["control1"]) == CONTROL and category_of(judged["random2"]) == UNTRAINED


def test_the_report_leads_with_a_summary_that_keeps_proof_and_evidence_apart(report):
    out, payload = report
    text = (out / "report.md").read_text()
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections[0] == "## Summary"
    summary = text.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert 3 <= len(summary) <= 10 and all(line.startswith("* **") for line in summary)
    assert summary[0].startswith("* **Smoke run**")  # --quick says what it is before anything else
    proven = sum(row["category"] == "proven" for row in payload["rows"])
    constructions = sum(row["stage"] == "construction" and row["status"] == "certified" for row in payload["rows"])
    assert f"{constructions} constructions" in summary[1] and proven == constructions + 1  # + the L = 1 separation
    untrained = [row for row in payload["rows"] if row["category"] == "untrained weights"]
    assert untrained and f"{len(untrained)} probes with random or hand-set weights" in text
    headline = text.split("## Certified constructions and trained networks", 1)[1].split("\n## ", 1)[0]
    elsewhere = text.split("## Untrained weights", 1)[1].split("\n## ", 1)[0]
    for row in untrained:  # random-weight rows stay out of the headline table
        assert f"`{row['network']}`" not in headline and f"`{row['network']}`" in elsewhere
    assert payload["complete"] is True and "NOT FINISHED" not in text


def test_every_row_of_report_json_reads_back_into_its_type_and_writes_the_same_json(report):
    _, payload = report
    from experiments.hierarchy.rows import BoundsRow, DepthCurve, PositiveSideRow, PrecisionPoint

    for data in payload["rows"]:
        row = outcome_row_from_json(data)
        assert {**row.to_json(), "category": category_of(row)} == data
        assert list(row.to_json()) == [key for key in data if key != "category"]  # the key order too
    for data in payload["precision"]:
        assert PrecisionPoint.from_json(data).to_json() == data
    for data in payload["bounds"]:
        assert list(BoundsRow.from_json(data).to_json().items()) == list(data.items())
    for data in payload["positive_sides"]:
        assert list(PositiveSideRow.from_json(data).to_json().items()) == list(data.items())
    for data in payload["depths"]:
        assert DepthCurve.from_json(data).to_json() == data


def test_a_row_writes_no_key_for_a_value_it_never_had():
    from experiments.hierarchy.rows import ConstructionRow

    missing = ConstructionRow(L=1, task="composition", name="L1_x", construction="x", architecture="a", params={},
                              semantics="strict", status="not available", evidence="construction 'x' is not installed")
    assert list(missing.to_json()) == ["stage", "L", "task", "name", "construction", "architecture", "params",
                                       "semantics", "network", "certificate", "status", "evidence"]
    untrained, trained_here = probe_row(1, "random", 1, 2, weights="random"), probe_row(1, "trained", 1, 2)
    assert "replayed_from" not in untrained.to_json() and trained_here.to_json()["replayed_from"] is None
    assert "control_learned" not in trained_here.to_json() and "table_bits" not in trained_here.to_json()
