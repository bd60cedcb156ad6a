"""The `witness` command line: compile, run and inspect, their --json output, and one-line errors (exit 2)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.oracles.reference_tasks import composition_answer_from_tokens, composition_token_list
from cli.main import main


@pytest.fixture(scope="module")
def network_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "net.npz"
    assert main(["compile", "composition", "--L", "3", "--m", "4", "--n", "2", "4", "-o", str(path)]) == 0
    return path


def single_json(capsys) -> dict:
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1
    return json.loads(lines[0])


def test_compile_text_and_json(tmp_path, capsys):
    path = tmp_path / "a.npz"
    assert main(["compile", "composition", "--L", "2", "--m", "3", "--n", "2", "-o", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {path}: composition") and "3 layers" in out
    assert main(["compile", "composition", "--L", "1", "--m", "2", "-o", str(tmp_path / "b.npz"), "--json"]) == 0
    payload = single_json(capsys)
    assert payload["params"] == {"L": 1, "m": 2, "n": [], "layout": "paper"}
    assert payload["n_layers"] == 2 and payload["H"] == 1 and payload["p"] == 64
    assert payload["Hdp"] == payload["H"] * max(payload["d_head"], payload["d_model"]) * payload["p"]


def test_run_tokens(network_file, capsys):
    # L = 3, m = 4, n = (2, 4): N = (4, 8, 32), w = (1, 3). The chain: i_0 = 3, i_1 = z_1(3) = 6 mod 4 = 2,
    # i_2 = z_2(w_1 * 4 + 2) = z_2(6) = 7 - 6 = 1, i_3 = z_3(w_2 * 8 + 1) = z_3(25) = 25 - 3 = 22.
    tables = (tuple((a + 3) % 4 for a in range(4)), tuple(7 - a for a in range(8)),
              tuple((a - 3) % 32 for a in range(32)))
    tokens = composition_token_list(4, (2, 4), 3, tables, (1, 3), "paper")
    assert composition_answer_from_tokens(4, (2, 4), tokens) == 22
    text = ",".join(map(str, tokens))
    assert main(["run", str(network_file), "--tokens", text]) == 0
    assert capsys.readouterr().out.strip() == "22"
    assert main(["run", str(network_file), "--tokens", text, "--json"]) == 0
    assert single_json(capsys) == {"output": 22}


def test_run_random(network_file, capsys):
    assert main(["run", str(network_file), "--random", "57", "--seed", "3"]) == 0
    assert capsys.readouterr().out.startswith("57/57 random inputs correct (seed 3")
    assert main(["run", str(network_file), "--random", "57", "--seed", "3", "--json"]) == 0
    payload = single_json(capsys)
    assert (payload["correct"], payload["total"], payload["seed"]) == (57, 57, 3)


def test_inspect(network_file, capsys):
    assert main(["inspect", str(network_file)]) == 0
    out = capsys.readouterr().out
    assert "task composition" in out and "blocks.3: causal attention H=1" in out and "Hdp" in out
    assert main(["inspect", str(network_file), "--json"]) == 0
    payload = single_json(capsys)
    assert {"task", "params", "layers", "H", "d_head", "d_model", "p", "Hdp"} <= set(payload)
    assert payload["task"] == "composition"
    assert payload["params"] == {"L": 3, "m": 4, "n": [2, 4], "layout": "paper"}
    assert len(payload["layers"]) == 4 and payload["H"] == 1 and payload["p"] == 64
    assert payload["Hdp"] == 1 * max(payload["d_head"], payload["d_model"]) * 64


def bad_arguments(tmp_path: Path, network_file: Path) -> list[list[str]]:
    garbage = tmp_path / "garbage.npz"
    garbage.write_text("not weights")
    net = str(network_file)
    return [
        ["compile", "composition", "--L", "0", "--m", "2", "-o", str(tmp_path / "x.npz")],
        ["compile", "composition", "--L", "3", "--m", "2", "--n", "2", "-o", str(tmp_path / "x.npz")],
        ["compile", "composition", "--L", "two", "--m", "2", "-o", str(tmp_path / "x.npz")],
        ["compile", "composition", "--L", "2", "--m", "2", "--n", "2", "--layout", "forward", "-o", "x.npz"],
        ["compile", "composition", "--L", "1", "--m", "2", "--depth", "3", "-o", str(tmp_path / "x.npz")],
        ["compile", "composition", "--m", "2", "-o", str(tmp_path / "x.npz")],
        ["compile", "no_such", "-o", str(tmp_path / "x.npz")],
        ["compile", "composition", "--L", "1", "--m", "2", "-o", str(tmp_path / "missing_dir" / "x.npz")],
        ["run", net, "--tokens", "1,2,3"],
        ["run", net, "--tokens", "0," * 45 + "99"],
        ["run", net, "--tokens", "a,b"],
        ["run", net, "--tokens", "1" + "0" * 30],
        ["run", net],
        ["run", net, "--tokens", "1", "--random", "2"],
        ["run", net, "--random", "0"],
        ["run", str(tmp_path / "absent.npz"), "--random", "3"],
        ["run", str(garbage), "--random", "3"],
        ["inspect", str(garbage), "--json"],
        ["inspect"],
        ["inspect", net, "--extra"],
        ["frobnicate"],
        [],
    ]


def test_errors_are_one_line_with_status_2(tmp_path, network_file, capsys):
    for argv in bad_arguments(tmp_path, network_file):
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        if "--json" in argv:  # docs/conventions.md §7: the same error, as one JSON object on stdout
            assert json.loads(captured.out) == {"error": lines[0].removeprefix("witness: error: "), "exit": 2}, argv
        else:
            assert captured.out == "", argv
        assert len(lines) == 1 and lines[0].startswith("witness: error: "), (argv, captured.err)


def test_installed_console_script(tmp_path):
    script = Path(sys.executable).with_name("witness")
    executable = str(script) if script.exists() else shutil.which("witness")
    assert executable, "the witness console script is not installed"
    ok = subprocess.run([executable, "compile", "composition", "--L", "2", "--m", "2", "--n", "2", "-o", "n.npz"],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    ran = subprocess.run([executable, "run", "n.npz", "--tokens", "3,2,1,0,1,0,1,5", "--json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and json.loads(ran.stdout) == {"output": 1}  # worked by hand in test_tasks.py
    bad = subprocess.run([executable, "run", "n.npz", "--tokens", "3,2,1"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.splitlines()) == 1 and "Traceback" not in bad.stderr
