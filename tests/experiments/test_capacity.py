"""experiments.capacity: the curve's bookkeeping (checked on hand-made rows), and one tiny curve end to end."""

import json
import math

import pytest

pytest.importorskip("torch")

from experiments import capacity  # noqa: E402
from cli.main import main  # noqa: E402
from witness.errors import ParameterError  # noqa: E402

SPEC = capacity.CapacitySpec(L=1, sizes=(4, 16), H=1, d_head=2, d_model=8, seeds=(0, 1), steps=5,
                             mixers=("deltanet",), eval_inputs=64)


def row(size, architecture, seed, accuracy, state_bits):
    return {"size": size, "architecture": architecture, "seed": seed, "accuracy": accuracy,
            "accuracy_fp64": accuracy, "hop_weight": 0.0, "table_bits": size * math.log2(size),
            "budget": {"H": 1, "d": 8, "p": 16, "Hdp": 128, "state_bits": state_bits}}


def test_summary_judges_each_point_by_its_control():
    rows = []
    for seed, (control_small, control_large) in enumerate([(1.0, 0.5), (1.0, 0.7)]):
        rows += [row(4, "control", seed, control_small, 0), row(16, "control", seed, control_large, 0),
                 row(4, "1 full", seed, 0.4, 0), row(16, "1 full", seed, 0.3, 0),
                 row(4, "0 full + deltanet", seed, 0.9, 96), row(16, "0 full + deltanet", seed, 0.2, 96)]
    summary = {(e["size"], e["architecture"]): e for e in capacity.summarise(SPEC, rows)}
    assert summary[4, "control"]["control_learned"] and not summary[16, "control"]["control_learned"]
    hybrid = summary[16, "0 full + deltanet"]
    assert (hybrid["mean"], hybrid["min"], hybrid["max"], hybrid["seeds"]) == (0.2, 0.2, 0.2, 2)
    assert hybrid["ratio"] == 64 / 96 and not hybrid["control_learned"]
    assert summary[16, "control"]["mean"] == pytest.approx(0.6)
    text = capacity.markdown({"spec": capacity.plain_spec(SPEC), "rows": rows, "summary": list(summary.values())})
    assert "no evidence (control did not learn)" in text
    assert "fell below C, where the control learned: not forced by counting (training or the architecture's form)" in text
    assert "control: did NOT learn" in text and "does not prove that none exists" in text


def test_a_fall_past_c_is_qualified_when_the_architecture_fell_below_c_too():
    rows = []
    for seed in (0, 1):
        rows += [row(4, "control", seed, 1.0, 0), row(16, "control", seed, 1.0, 0),
                 row(4, "1 full", seed, 0.4, 0), row(16, "1 full", seed, 0.3, 0),
                 row(4, "0 full + deltanet", seed, 0.9, 32), row(16, "0 full + deltanet", seed, 0.2, 32)]
    summary = {(e["size"], e["architecture"]): e for e in capacity.summarise(SPEC, rows)}
    assert summary[16, "0 full + deltanet"]["ratio"] == 2.0
    assert "training or its form may explain the fall" in capacity.standing(summary[16, "0 full + deltanet"])
    rows = [dict(r, accuracy=1.0) if (r["size"], r["architecture"]) == (4, "0 full + deltanet") else r for r in rows]
    summary = {(e["size"], e["architecture"]): e for e in capacity.summarise(SPEC, rows)}
    assert capacity.standing(summary[4, "0 full + deltanet"]) == "learned too"
    assert capacity.standing(summary[16, "0 full + deltanet"]) == ("fell past C, where the control learned: where "
                                                                 "counting forces some input wrong")


def test_bad_specs_are_refused():
    with pytest.raises(ParameterError, match="recurrent kinds"):
        capacity.CapacitySpec(mixers=("attention",))
    with pytest.raises(ParameterError, match="multiple of 2"):
        capacity.CapacitySpec(L=2, sizes=(5,)).task_for(5)


def test_a_tiny_curve_end_to_end(tmp_path):
    out = tmp_path / "cap"
    argv = ["capacity", "--sizes", "4", "--seeds", "1", "--steps", "3", "--H", "1", "--d-head", "2", "--d-model",
            "8", "--mixers", "deltanet", "--eval-inputs", "32", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    curve = json.loads((out / "capacity.json").read_text())
    assert {r["architecture"] for r in curve["rows"]} == {"control", "1 full", "0 full + deltanet"}
    assert all(r["steps"] == 3 and r["eval_inputs"] == 32 for r in curve["rows"])
    assert (out / "capacity.png").stat().st_size > 0 and "N·log2 N / C" in (out / "capacity.md").read_text()
    assert "no hop targets" in (out / "capacity.md").read_text()


def test_an_L2_curve_trains_with_the_hop_weight_it_is_given_and_says_so(tmp_path):
    out = tmp_path / "cap2"
    argv = ["capacity", "--L", "2", "--sizes", "4", "--seeds", "1", "--steps", "2", "--H", "1", "--d-head", "2",
            "--d-model", "8", "--mixers", "rnn", "--eval-inputs", "16", "--hop-weight", "0.5", "--out", str(out),
            "--quiet"]
    assert main(argv) == 0
    curve = json.loads((out / "capacity.json").read_text())
    assert {r["hop_weight"] for r in curve["rows"]} == {0.5}
    assert "hop targets (each intermediate hop read out after its layer) of weight 0.5" in (
        out / "capacity.md").read_text()


def test_a_curve_reusing_stored_rows_equals_the_curve_trained_whole_and_a_stale_one_is_refused(tmp_path, capsys):
    """--reuse keeps the stored sizes and trains the rest; the result must be the curve a fresh run of every size
    writes, row for row. A stored row the code no longer reproduces, or another protocol, is refused in one line."""
    base = ["--seeds", "1", "--steps", "3", "--H", "1", "--d-head", "2", "--d-model", "8", "--mixers", "deltanet",
            "--eval-inputs", "32", "--quiet"]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(["capacity", "--sizes", "4", "6", "--out", str(whole)] + base) == 0
    assert main(["capacity", "--sizes", "4", "--out", str(part)] + base) == 0
    stored = json.loads((part / "capacity.json").read_text())
    assert main(["capacity", "--sizes", "4", "6", "--out", str(part), "--reuse", str(part)] + base) == 0

    def without_seconds(curve):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in curve["rows"]]

    extended = json.loads((part / "capacity.json").read_text())
    assert without_seconds(extended) == without_seconds(json.loads((whole / "capacity.json").read_text()))
    assert [r["seconds"] for r in extended["rows"] if r["size"] == 4] == [r["seconds"] for r in stored["rows"]]
    capsys.readouterr()

    stale = json.loads((part / "capacity.json").read_text())
    for r in stale["rows"]:
        r["final_loss"] += 1e-9
    (part / "capacity.json").write_text(json.dumps(stale))
    assert main(["capacity", "--sizes", "4", "6", "8", "--out", str(part), "--reuse", str(part)] + base) == 2
    assert "retrained here gives final_loss" in capsys.readouterr().err
    assert main(["capacity", "--sizes", "4", "6", "--out", str(whole), "--reuse", str(whole), "--steps", "4"]
                + base[:2] + base[4:]) == 2
    err = capsys.readouterr().err
    assert "steps = 3" in err and len(err.strip().splitlines()) == 1
