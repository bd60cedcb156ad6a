"""experiments.capacity: the curve's bookkeeping (checked on hand-made rows), and one tiny curve end to end."""

import dataclasses
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("torch")

from experiments import capacity, capacity_report  # noqa: E402
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
    text = capacity_report.markdown({"spec": capacity.plain_spec(SPEC), "rows": rows, "summary": list(summary.values())})
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
    assert "training or its form may explain the fall" in capacity_report.standing(summary[16, "0 full + deltanet"])
    rows = [dict(r, accuracy=1.0) if (r["size"], r["architecture"]) == (4, "0 full + deltanet") else r for r in rows]
    summary = {(e["size"], e["architecture"]): e for e in capacity.summarise(SPEC, rows)}
    assert capacity_report.standing(summary[4, "0 full + deltanet"]) == "learned too"
    assert capacity_report.standing(summary[16, "0 full + deltanet"]) == ("fell past C, where the control learned: where "
                                                                 "counting forces some input wrong")


def test_an_architecture_that_cannot_express_the_task_is_never_counted_as_evidence():
    """Its points read "cannot express the task" wherever the control learned, in the curve and in the hierarchy's
    summary and rows; a point without the field (stored before the label) reads as it always did."""
    from experiments.hierarchy import judge_against_controls
    from experiments.hierarchy.evidence import CANNOT_EXPRESS, category_of
    from experiments.hierarchy.curves import capacity_words
    from experiments.hierarchy.rows import ProbeRow

    unable = {"expressive": False, "why": "one layer, no MLP"}
    rows = []
    for seed in (0, 1):
        rows += [row(4, "control", seed, 1.0, 0), row(4, "1 full", seed, 0.3, 0) | unable,
                 row(4, "0 full + deltanet", seed, 0.5, 96)]
    summary = {e["architecture"]: e for e in capacity.summarise(dataclasses.replace(SPEC, sizes=(4,)), rows)}
    assert capacity_report.standing(summary["1 full"]) == capacity_report.CANNOT_EXPRESS
    assert capacity_report.standing(summary["0 full + deltanet"]).startswith("fell below C")
    words = capacity_words({"folder": "docs/capacity/x", "spec": capacity.plain_spec(SPEC),
                            "summary": list(summary.values()), "replay": {"matched": True}})
    assert "1 point of other architectures fell there (best: 0 full + deltanet" in words
    assert words.endswith("; 1 full cannot express the task, whatever the weights. Its replayed point matched bit "
                          "for bit.")

    def probe(name, control=False, expressive=None):
        return ProbeRow(L=1, task="composition", name=name, architecture=name, params={}, weights="trained", seed=0,
                        format="fp16", semantics="strict", network=f"networks/{name}.npz", budget={},
                        control=control, failures=[], pairs=[], searched={}, failing=1, tried=100,
                        trained_accuracy=0.5, status="failures found", evidence="searched",
                        expressive=expressive, why="one layer, no MLP" if expressive is False else None)

    judged = {r.name: r for r in judge_against_controls([probe("control", control=True),
                                                          probe("linear", expressive=False), probe("deltanet")])}
    assert category_of(judged["linear"]) == CANNOT_EXPRESS and judged["linear"].evidence == "searched"
    assert judged["linear"].control_learned is None and judged["deltanet"].control_learned is True
    assert judged["linear"].to_json()["why"] == "one layer, no MLP" and "expressive" not in judged["deltanet"].to_json()


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
    # one softmax head without an MLP cannot express L = 1 (lab.architectures.cannot_express): labelled, not counted
    labelled = {r["architecture"] for r in curve["rows"] if r.get("expressive") is False and "no MLP" in r["why"]}
    assert labelled == {"1 full"}
    one_full = [e for e in curve["summary"] if e["architecture"] == "1 full"]
    assert one_full and all(capacity_report.standing(e) == capacity_report.CANNOT_EXPRESS for e in one_full)
    assert "* 1 full: one layer of one softmax head" in (out / "capacity.md").read_text()


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


# -- fair probes: every architecture at each d_head of one Hdp, the same lr sweep, the same MLP -----------------
def test_the_spec_refuses_bad_scans_naming_the_field():
    spec = capacity.CapacitySpec(d_head=4, d_model=32, H=1, d_heads=(8, 16, 32), lr_sweep=(1e-3, 3e-3))
    assert spec.d_heads == (8, 16, 32) and spec.lr_sweep == (1e-3, 3e-3)
    assert capacity.CapacitySpec(d_head=4).d_heads == (4,)  # the default: the protocol of the stored curves
    assert "d_heads" not in capacity.plain_spec(capacity.CapacitySpec()) and "lr_sweep" not in capacity.plain_spec(
        capacity.CapacitySpec())
    refused = [({"d_heads": (8, 64)}, "d_heads: d_head 64 makes the budget's d .* = 64, not the 32 .*another Hdp"),
               ({"d_heads": (8, 8)}, "d_heads lists 8 more than once"),
               ({"d_heads": (0,)}, "d_heads must be >= 1"),
               ({"lr_sweep": (1e-3, -1.0)}, "lr_sweep: a learning rate must be a positive finite number"),
               ({"lr_sweep": (float("nan"),)}, "lr_sweep: a learning rate"),
               ({"lr_sweep": (1e-3, 1e-3)}, "lr_sweep lists 0.001 more than once"),
               ({"lr": 0.0}, "lr: a learning rate"),
               ({"mlp_ratio": -1}, "mlp_ratio must be >= 0")]
    for fields, says in refused:
        with pytest.raises(ParameterError, match=says):
            capacity.CapacitySpec(d_head=4, d_model=32, H=1, **fields)


def test_a_tiny_fair_curve_records_every_field_and_a_chosen_lr_of_the_sweep(tmp_path):
    out = tmp_path / "fair"
    argv = ["capacity", "--sizes", "4", "--seeds", "1", "--steps", "20", "--H", "1", "--d-head", "2", "--d-heads",
            "2", "8", "--d-model", "8", "--lr-sweep", "1e-3", "1e-2", "--mlp-ratio", "1", "--mixers", "deltanet",
            "--eval-inputs", "32", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    curve = json.loads((out / "capacity.json").read_text())
    assert curve["spec"]["d_heads"] == [2, 8] and curve["spec"]["lr_sweep"] == [1e-3, 1e-2]
    rows = curve["rows"]
    assert {(r["architecture"], r["d_head"]) for r in rows} == {(a, d) for a in ("control", "1 full",
                                                                               "0 full + deltanet") for d in (2, 8)}
    for r in rows:
        assert (r["mlp_ratio"], r["steps"], r["seed"], r["format"], r["semantics"]) == (1, 20, 0, "fp16", "strict")
        assert r["lr"] in (1e-3, 1e-2) and r["lr_sweep"]["lr"] == r["lr"]
        assert r["lr_sweep"]["steps"] == 5 and [lr for lr, _ in r["lr_sweep"]["tried"]] == [1e-3, 1e-2]
        assert r["budget"]["d_head"] == r["d_head"] and r["budget"]["Hdp"] == 8 * 16  # one budget for all
    summary = curve["summary"]
    assert [(e["architecture"], e["d_head"]) for e in summary] == [(r["architecture"], r["d_head"]) for r in rows]
    assert all(e["lrs"] == [r["lr"]] for e, r in zip(summary, rows))
    text = (out / "capacity.md").read_text()
    assert "d_head 2, 8 (every architecture at each, all one Hdp" in text and "| d_head | lr (chosen) | Hdp |" in text
    assert "among 0.001, 0.01 by `lab.train.sweep_lr` (5 steps at each" in text
    assert "an MLP of width 1·d_model after every layer" in text


ROOT = Path(__file__).resolve().parents[2]
STORED_CURVES = ["docs/capacity/capacity", "docs/capacity/small/capacity", "docs/capacity/L2/capacity",
                 "docs/capacity/dhead/capacity", "docs/capacity/L2-d16/capacity"]


@pytest.mark.parametrize("stem", STORED_CURVES)
def test_the_stored_curves_still_render_byte_for_byte(stem):
    """Curves stored before rows recorded d_head, mlp_ratio, lr and format read as their old protocol: the page
    is the committed one, from the stored summary and from one recomputed now."""
    curve = json.loads((ROOT / f"{stem}.json").read_text(encoding="utf-8"))
    page = (ROOT / f"{stem}.md").read_text(encoding="utf-8")
    assert capacity_report.markdown(curve) == page
    spec = capacity.CapacitySpec(**curve["spec"])
    assert capacity_report.markdown({**curve, "summary": capacity.summarise(spec, curve["rows"])}) == page
    assert capacity.plain_spec(spec) == curve["spec"]  # an old curve's spec reads back as it was written
    assert capacity.read_curve((ROOT / stem).parent) == curve  # each is a curve the hierarchy's `curves` may name


def test_a_stored_curve_of_the_old_row_format_is_reused(tmp_path):
    """A stored row without the fields rows gained (d_head, mlp_ratio, lr, format, semantics) is read as the old
    protocol's, replayed and kept, and the merged curve's rows hold those fields."""
    base = ["--seeds", "1", "--steps", "3", "--H", "1", "--d-head", "2", "--d-model", "8", "--mixers", "deltanet",
            "--eval-inputs", "32", "--quiet"]
    part = tmp_path / "part"
    assert main(["capacity", "--sizes", "4", "--out", str(part)] + base) == 0
    stored = json.loads((part / "capacity.json").read_text())
    new_fields = ("d_head", "mlp_ratio", "lr", "format", "semantics")
    old = {**stored, "rows": [{k: v for k, v in r.items() if k not in new_fields} for r in stored["rows"]]}
    (part / "capacity.json").write_text(json.dumps(old))
    assert main(["capacity", "--sizes", "4", "6", "--out", str(tmp_path / "merged"), "--reuse", str(part)]
                + base) == 0
    merged = json.loads((tmp_path / "merged" / "capacity.json").read_text())
    assert [r for r in merged["rows"] if r["size"] == 4] == stored["rows"]


@pytest.mark.parametrize("options, says", [
    (["--d-heads", "2", "16"], "d_head 16 makes the budget's d"),
    (["--d-heads", "2", "2"], "d_heads lists 2 more than once"),
    (["--d-heads", "x"], "--d-heads"),
    (["--lr-sweep", "1e-3", "-1"], "lr_sweep: a learning rate must be a positive finite number"),
    (["--lr-sweep", "nan"], "lr_sweep: a learning rate"),
    (["--mlp-ratio", "-1"], "mlp_ratio must be >= 0"),
])
def test_the_command_refuses_bad_scans_in_one_line(tmp_path, capsys, monkeypatch, options, says):
    def must_not_train(*args, **kwargs):
        raise AssertionError("trained despite a bad option")

    monkeypatch.setattr("experiments.capacity.capacity", must_not_train)
    argv = ["capacity", "--sizes", "4", "--H", "1", "--d-head", "2", "--d-model", "8", "--out",
            str(tmp_path / "c"), "--quiet"] + options
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


# -- judged at a format where the control learned on every seed ---------------------------------------------------
JUDGED_SPEC = dataclasses.replace(SPEC, judge_formats=("float:1,5", "float:2,5"))


def judged_row(size, architecture, seed, fp16, at_2_5, at_1_5, state_bits):
    return {**row(size, architecture, seed, fp16, state_bits), "d_head": 2,
            "accuracy_at": {"float:2,5": at_2_5, "float:1,5": at_1_5}}


def test_each_point_is_judged_at_the_fewest_bits_where_its_control_learned_on_every_seed():
    """N = 4: the control keeps >= 0.98 on both seeds down to float:2,5 (8 bits), not at float:1,5 (one seed at
    0.5), so every N = 4 point is judged at float:2,5, its C at 8 bits. N = 16: one control seed is at 0.97 even
    at fp16, so no N = 16 point is judged."""
    rows = []
    for seed, (small_1_5, large_fp16) in enumerate([(1.0, 1.0), (0.5, 0.97)]):
        rows += [judged_row(4, "control", seed, 1.0, 0.99, small_1_5, 0),
                 judged_row(16, "control", seed, large_fp16, 0.6, 0.3, 0),
                 judged_row(4, "1 full", seed, 0.5, 0.4, 0.1, 0), judged_row(16, "1 full", seed, 0.3, 0.2, 0.1, 0),
                 judged_row(4, "0 full + deltanet", seed, 1.0, 0.6 + 0.1 * seed, 0.2, 96),
                 judged_row(16, "0 full + deltanet", seed, 0.2, 0.1, 0.1, 96)]
    summary = {(e["size"], e["architecture"]): e for e in capacity.summarise(JUDGED_SPEC, rows)}
    hybrid = summary[4, "0 full + deltanet"]["judged"]
    assert (hybrid["format"], hybrid["bits"], hybrid["state_bits"], hybrid["Hdp"]) == ("float:2,5", 8, 48, 64)
    assert (hybrid["min"], hybrid["max"]) == (0.6, 0.7) and hybrid["mean"] == pytest.approx(0.65)
    assert hybrid["ratio"] == 8 / 48 and hybrid["fell_below_c"]
    assert summary[4, "0 full + deltanet"]["mean"] == 1.0  # at fp16 it learned; at the judged format it fell
    assert summary[4, "control"]["judged"]["min"] == 0.99
    assert all(summary[16, name]["judged"] is None for name in ("control", "1 full", "0 full + deltanet"))
    text = capacity_report.markdown({"spec": capacity.plain_spec(JUDGED_SPEC), "rows": rows,
                                     "summary": list(summary.values())})
    assert "Judged at the format of fewest bits among float:1,5, float:2,5, fp16" in text
    assert ("| 4 | 0 full + deltanet | float:2,5 (8) | 64 | 48 | 0.167 | 0.650 (0.600–0.700) | fell below C, where "
            "the control learned: not forced by counting") in text
    assert "| 16 | 1 full | — | — | — | — | — | no evidence: the control learned on every seed at none" in text


def test_judge_formats_are_measured_on_every_row_and_bad_ones_refused(tmp_path, capsys):
    out = tmp_path / "judged"
    argv = ["capacity", "--sizes", "4", "--seeds", "1", "--steps", "5", "--H", "1", "--d-head", "2", "--d-model",
            "8", "--mixers", "deltanet", "--eval-inputs", "32", "--quiet", "--judge-formats", "float:2,5"]
    assert main(argv + ["--out", str(out)]) == 0
    curve = json.loads((out / "capacity.json").read_text())
    assert curve["spec"]["judge_formats"] == ["float:2,5"]
    assert all(set(r["accuracy_at"]) == {"float:2,5"} for r in curve["rows"])
    assert "judge_formats" not in capacity.plain_spec(SPEC)  # the stored curves' specs stay as they were
    for bad, says in (("fp16", "judge_formats lists fp16, the format every row is measured at anyway"),
                      ("float:9,9,9", "float:9,9,9")):
        assert main(argv[:-1] + [bad, "--out", str(tmp_path / "bad")]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1
