"""The main job's trained side: trained once and stored (`--full`), then replayed (`--stored`): the replayed run
must give the rows the training run gave, its bit-for-bit check must catch a changed network, a store trained
for another question must be refused, and a run that is stopped must leave a folder that says so. Beside them, the
committed capacity curves: every run retrains one point of each and says whether it matched its stored row."""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from verify import checker
from experiments import separation, trained
from experiments.hierarchy import hierarchy, load_config, plan, run_job
from experiments.hierarchy.curves import curve_entry, curves_section
from witness.errors import ParameterError
from witness.io import load

pytest.importorskip("torch")


def tiny_config():
    """L = 1 only, trained probes of 40 steps, the L = 1 separation, and the committed curve docs/capacity/dhead
    (its fastest point trains 1,500 steps: about 5 s on the 2-core machine)."""
    config = load_config(quick=True).select([1])
    effort = {**config.effort, "train_steps": 40, "train_seeds": 1, "mlp_ratio": 0}
    two_sum = dataclasses.replace(config.two_sum, runs=(("trained", 0),),
                                  effort={**config.two_sum.effort, "train_steps": 40, "train_seeds": 1})
    return dataclasses.replace(config, runs=(("random", 0), ("trained", 0)), effort=effort, two_sum=two_sum,
                               separation=(1,), sweep_log2_m=(("strict", (1,)),), curves=("capacity/dhead",))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same configuration trained (a) and then replayed from a's store (b)."""
    a, b = tmp_path_factory.mktemp("trained"), tmp_path_factory.mktemp("replayed")
    config = tiny_config()
    trained_report = hierarchy(a, config)
    replayed_report = hierarchy(b, config, store=trained.Store(a))
    return config, (a, trained_report), (b, replayed_report)


def _trained_rows(report):
    return {row["name"]: row for row in report["rows"] if row.get("weights") == "trained"}


def test_a_replayed_run_gives_the_rows_the_training_run_gave(runs):
    _, (a, first), (b, second) = runs
    assert first["trained"]["mode"] == "trained here" and (a / trained.STORE).is_file()
    assert second["trained"]["mode"] == "replayed" and not (b / trained.STORE).exists()
    left, right = _trained_rows(first), _trained_rows(second)
    assert set(left) == set(right) == {"L1_hybrid_trained_s0", "L1_full_trained_s0", "L1_control_trained_s0",
                                       "sparse_trained_s0"}
    for name, row in left.items():
        again = right[name]
        assert (row["failing"], row["tried"], row["failures"], row["pairs"]) == \
               (again["failing"], again["tried"], again["failures"], again["pairs"]), name
        assert row["trained_accuracy"] == again["trained_accuracy"]
        assert "replayed_from" not in row or row["replayed_from"] is None
        assert again["replayed_from"].endswith(f"networks/{name}.npz") and "replayed from" in again["evidence"]
        assert not trained.same_weights(load(a / row["network"]), load(b / again["network"]))
    assert "capacity" not in json.loads((a / trained.STORE).read_text())  # the store holds no curve


def test_the_replay_check_retrained_one_network(runs):
    _, _, (b, second) = runs
    checks = second["trained"]["checks"]
    assert [check["what"].split()[0] for check in checks] == ["network"] and checks[0]["matched"]
    text = (b / "report.md").read_text()
    assert "replay check passed" in text and "FAILED" not in text


def test_every_run_replays_the_committed_curve_and_says_it_matched(runs):
    """Trained or replayed, the run reports docs/capacity/dhead from its folder (its rows stay there) and retrains
    its fastest point here."""
    _, (a, first), (b, second) = runs
    for out, report in ((a, first), (b, second)):
        curve, = report["capacity"]
        assert curve["folder"] == "docs/capacity/dhead" and "rows" not in curve
        assert curve["replay"] == {"point": {"size": 8, "architecture": "0 full + deltanet", "d_head": 8, "seed": 2},
                                   "matched": True, "differences": []}
        assert curve["summary"] and all("judged" in entry for entry in curve["summary"])
        text = (out / "report.md").read_text()
        section = text.split("## Capacity curves: where trained architectures part", 1)[1].split("\n## ", 1)[0]
        assert "### `docs/capacity/dhead`" in section and "`docs/capacity/dhead/capacity.md` (in the repository)" \
            in section  # a folder outside docs/ names the page as text
        assert ("Replay: point N = 8, 0 full + deltanet, d_head 8, seed 2 retrained here: matched bit for bit"
                in section)
        assert "| N | architecture | d_head | format (p) |" in section  # the judged table
        assert "* **Capacity curve** `docs/capacity/dhead`" in text and "matched bit for bit." in text
        assert "plots/capacity.png" not in text and not (out / "plots" / "capacity.png").exists()


def test_a_forged_curve_is_caught_by_its_replay_and_the_report_says_so(tmp_path, monkeypatch):
    """One stored accuracy edited by one ulp: the retrained point no longer matches, and the section says it did not.
    Its page is linked where the report lies in docs/ too (as the committed docs/hierarchy/report.md does)."""
    docs = tmp_path / "docs"
    forged = docs / "capacity" / "forged"
    forged.mkdir(parents=True)
    curve = json.loads((Path(__file__).parents[2] / "docs" / "capacity" / "dhead" / "capacity.json").read_text())
    fastest = min(curve["rows"], key=lambda row: row["seconds"])
    fastest["accuracy"] = float(np.nextafter(fastest["accuracy"], 0.0))
    (forged / "capacity.json").write_text(json.dumps(curve))
    monkeypatch.setattr("experiments.hierarchy.config.DOCS", docs)
    config = dataclasses.replace(load_config(quick=True), curves=("capacity/forged",))
    curves = plan.committed_curves(config)
    job, = plan.curve_jobs(curves)
    replay = run_job(job)
    assert replay.folder == "docs/capacity/forged" and not replay.matched
    difference, = replay.differences  # only the edited field differs
    assert difference.startswith("accuracy ") and difference.endswith(f"(stored {fastest['accuracy']!r})")
    report = {"capacity": [curve_entry(curves[replay.folder], replay)]}
    section = "\n".join(curves_section(report, docs / "hierarchy"))
    assert "[docs/capacity/forged/capacity.md](../capacity/forged/capacity.md)" in section
    assert f"seed 2 retrained here: **did NOT match** — {difference}." in section
    assert "matched bit for bit" not in section


def test_the_replay_check_catches_one_changed_weight(runs, tmp_path):
    _, (a, _), _ = runs
    store = trained.Store(a)
    name = "L1_full_trained_s0"
    network = load(store.path(name))
    key = "blocks.0.attn.W_Q"
    changed = network.state_dict()[key].copy()
    changed.flat[0] = np.nextafter(changed.flat[0], np.inf)  # one ulp: nothing coarser than bits would see it
    forged = tmp_path / "forged.npz"
    network.with_arrays({key: changed}).save(forged)
    honest = trained.replay_network_job({"entry": store.networks[name], "file": str(store.path(name))})
    caught = trained.replay_network_job({"entry": store.networks[name], "file": str(forged)})
    assert honest.matched and not caught.matched and key in caught.detail


def test_a_replayed_separation_is_rechecked_here(runs, tmp_path):
    _, (a, first), (b, second) = runs
    computed, = [row for row in first["rows"] if row["stage"] == "separation"]
    rechecked, = [row for row in second["rows"] if row["stage"] == "separation"]
    assert rechecked["status"] == "certified" and rechecked["budget"] == computed["budget"]
    assert "re-checked here" in rechecked["evidence"] and rechecked["replayed_from"].endswith("separation/L1")
    assert checker.check_files(b / rechecked["certificate"])["confirmed"]
    forged = tmp_path / "L1"
    shutil.copytree(a / "separation" / "L1", forged)
    summary = json.loads((forged / "separation.json").read_text())
    (forged / "separation.json").write_text(json.dumps({**summary, "k": summary["k"] + 1}))
    with pytest.raises(ParameterError, match="another m, n or budget"):  # the certificate is for the other size
        separation.recheck(forged)


def test_a_store_trained_for_another_question_is_refused(runs):
    config, (a, _), _ = runs
    store = trained.Store(a)
    longer = dataclasses.replace(config, effort={**config.effort, "train_steps": 41})
    with pytest.raises(ParameterError, match="trained with training"):
        hierarchy(a.parent / "refused", longer, store=store)
    with pytest.raises(ParameterError, match="no trained.json"):
        trained.Store(a / "networks")


def test_a_store_written_with_a_capacity_curve_is_still_replayed(runs, tmp_path):
    """Stores written while the hierarchy trained its own curve hold its rows under "capacity": they are ignored."""
    _, (a, _), _ = runs
    old = tmp_path / "old"
    shutil.copytree(a, old)
    stored = json.loads((old / trained.STORE).read_text())
    (old / trained.STORE).write_text(json.dumps({**stored, "capacity": {"spec": {"L": 1}, "rows": []}}))
    assert set(trained.Store(old).networks) == set(stored["networks"])


def test_a_stopped_run_leaves_a_folder_that_says_so(tmp_path):
    out = tmp_path / "stopped"
    process = subprocess.Popen([sys.executable, "-m", "cli.main", "hierarchy", "--quick", "--workers", "1",
                                "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    report = out / "report.md"
    deadline = time.monotonic() + 120
    while not report.exists() and time.monotonic() < deadline:  # written before the first job starts
        time.sleep(0.2)
    assert report.exists() and "NOT FINISHED" in report.read_text()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    text = report.read_text()
    assert text.startswith("# The hierarchy — NOT FINISHED") and "(interrupted)" in text
    assert json.loads((out / "report.json").read_text())["complete"] is False
    assert err.decode().strip().splitlines()[-1] == "witness: interrupted"
