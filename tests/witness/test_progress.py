"""Progress: a bar on stderr by default, also when stderr is a file (so logs show where a run is); none with
--quiet; stdout carries only the result."""

import subprocess
import sys


def run(tmp_path, steps, *extra):
    log = tmp_path / "stderr.log"
    argv = [sys.executable, "-m", "cli.main", "train", "composition", "--L", "1", "--m", "3", "--arch", "full",
            "--layers", "2", "--H", "1", "--d-head", "4", "--d-model", "8", "--steps", str(steps),
            "-o", str(tmp_path / "net.npz"), *extra]
    with open(log, "w") as handle:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=handle, text=True, timeout=300)
    return done, log.read_text()


def test_a_bar_goes_to_stderr_even_when_it_is_a_file(tmp_path):
    done, err = run(tmp_path, 1500)  # long enough (over a second) for the bar to be drawn
    assert done.returncode == 0
    assert "train:" in err and "/1500" in err and "step" in err
    assert "train:" not in done.stdout and done.stdout.startswith("accuracy ")


def test_quiet_turns_it_off(tmp_path):
    done, err = run(tmp_path, 1500, "--quiet")
    assert done.returncode == 0 and err == ""
