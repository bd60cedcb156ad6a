"""Command-line start-up: the CPU time of `witness --help` and of a small compile against a bare interpreter.

    .venv/bin/python benchmarks/startup.py [--quick] [--repeat 7]

The baseline is `python -c pass` with this interpreter (the same virtual environment, so the same site start-up);
the rows are `witness --help` and `witness compile composition --L 1 --m 4 -o FILE`, each run as its own process.
Each time is the fastest of --repeat runs, in CPU seconds (user + system) of the child process, read from
`resource.getrusage(RUSAGE_CHILDREN)` (other jobs on a shared machine then inflate both sides less). `x time` is
the ratio to the bare interpreter, `+ s` the difference: the CPU a command pays for witness's imports before it
works. The targets are + s within 0.5 for --help and within 0.8 for the compile; tests/cli/test_startup.py checks
which modules these commands import (sympy, numba, hypothesis, networkx, torch, dask stay out), not their times.
With PYTHONDONTWRITEBYTECODE set, witness's own modules are compiled at every start (the output says so).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

#: Where each row's CPU time should stay, above the bare interpreter's (CPU seconds).
TARGETS = {"witness --help": 0.5, "witness compile (L = 1, m = 4)": 0.8}


def witness_command() -> list[str]:
    """The installed `witness` script beside this interpreter, else `python -m cli.main` (the same imports)."""
    script = Path(sys.executable).parent / "witness"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli.main"]


def child_cpu(argv: list[str], repeats: int) -> float:
    """CPU seconds (user + system) of the fastest of `repeats` runs of `argv`, each checked to exit 0."""
    best = float("inf")
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per row; the fastest counts (default 7)")
    parser.add_argument("--quick", action="store_true", help="3 runs per row")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeat
    witness = witness_command()
    with tempfile.TemporaryDirectory() as folder:
        rows = [("python -c pass (baseline)", [sys.executable, "-c", "pass"]),
                ("witness --help", [*witness, "--help"]),
                ("witness compile (L = 1, m = 4)",
                 [*witness, "compile", "composition", "--L", "1", "--m", "4", "-o", str(Path(folder) / "x.npz")])]
        times = [(label, child_cpu(argv, repeats)) for label, argv in rows]
    bare = times[0][1]
    if os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.flags.dont_write_bytecode:
        print("note: PYTHONDONTWRITEBYTECODE is set, so witness's own modules are compiled from source at every start "
              "(about 0.1 CPU-s more than an install that keeps its .pyc files)")
    print(f"start-up CPU time (user + system, fastest of {repeats} runs) against a bare interpreter, {bare:.3f} s")
    print(f"{'command':<32} {'CPU s':>7} {'x time':>7} {'+ s':>6} {'target + s':>11}")
    for label, seconds in times:
        target = TARGETS.get(label)
        print(f"{label:<32} {seconds:>7.3f} {seconds / bare:>7.2f} {seconds - bare:>6.3f} "
              f"{'' if target is None else f'<= {target}':>11}")


if __name__ == "__main__":
    main()
