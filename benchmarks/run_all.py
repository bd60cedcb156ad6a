"""Run every benchmark in this folder and print one table of the ratios they measured.

    .venv/bin/python benchmarks/run_all.py                # quick settings (a few minutes on 2 cores)
    .venv/bin/python benchmarks/run_all.py --full         # each benchmark's own default settings
    .venv/bin/python benchmarks/run_all.py --update-docs  # also rewrite the table in docs/benchmarks.md

Each benchmark is a script that prints its own tables, every ratio measured against a baseline run in the same
process. This script runs each one as a subprocess (`QUICK_ARGS` names its quick settings; a script not listed
there runs with `--quick` when its --help offers it, else with no arguments) and reads the ratio columns back out
of its output: a column is a ratio when its header is one of `RATIO_HEADERS` (`x time`, `sparse/full`, ...), and
the tables print right-aligned, so a row's value is the field that ends where the header ends. `ratio  N` written
inline on a row counts too, labelled by the text before the colon of the last line that was not a row. A row's
label is its leading text columns. A script that fails is listed with its exit status, and this script exits
non-zero.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- run_all:begin -->", "<!-- run_all:end -->"

#: Quick settings of the scripts whose --quick is missing or still too slow for a run of everything.
QUICK_ARGS = {
    "strict_overhead.py": ["--inputs", "256", "--repeat", "3"],
    "sparse_vs_full.py": ["--sizes", "32", "64", "--inputs", "16", "--repeat", "1", "--attempts", "2"],
}
#: Column headers that hold a ratio (each against the baseline named by the benchmark's own table).
RATIO_HEADERS = ("x tokens", "x time", "x memory", "x smallest", "x executor", "ratio", "torch/exec",
                 "inputs-worth", "sparse/full")
NUMBER = re.compile(r"^-?[\d,]*\.?\d+(e[-+]?\d+)?$")


def arguments(script: Path, full: bool) -> list[str]:
    if full:
        return []
    if script.name in QUICK_ARGS:
        return QUICK_ARGS[script.name]
    usage = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True).stdout
    return ["--quick"] if "--quick" in usage else []


def _label(line: str, header: str) -> str:
    """The row's leading text columns (the tables pad columns with two or more spaces), up to its first number; a
    number in the first column is named by the header above it (`n = 16 strict`)."""
    words = []
    for position, chunk in enumerate(re.split(r"\s{2,}", line.strip())):
        if NUMBER.match(chunk):
            if position:
                break
            end = line.index(chunk) + len(chunk)
            chunk = f"{header[:end].strip()} = {chunk}"
        words.append(chunk)
    return " ".join(words)


def ratios(output: str) -> list[tuple[str, str, str]]:
    """(row label, ratio column, value) for every ratio the output's tables print."""
    found = []
    columns: list[tuple[str, int]] = []  # (header, end position) of the current table's ratio columns
    header = context = ""
    for line in output.splitlines():
        headers = [(name, match.end()) for name in RATIO_HEADERS
                   for match in re.finditer(rf"(?<!\S){re.escape(name)}(?!\S)", line)]
        inline = re.search(r"\bratio\s+(-?\d+\.?\d*)", line)
        if headers and not inline:
            columns, header = headers, line
            continue
        if inline:
            label = re.split(r"\s{2,}", line[:inline.start()].strip())[0]
            found.append((f"{context}: {label}" if context else label, "ratio", inline.group(1)))
            continue
        fields = {match.end(): match.group() for match in re.finditer(r"\S+", line)}
        values = [(name, fields.get(end)) for name, end in columns]
        if not line.strip() or not values or not all(value and NUMBER.match(value) for _, value in values):
            columns = [] if not line.strip() else columns
            context = line.split(":")[0].strip() if ":" in line else context  # e.g. `fp16 strict: baseline ...`
            continue
        found += [(_label(line, header), name, value) for name, value in values]
    return found


def run_one(script: Path, full: bool) -> dict:
    args = arguments(script, full)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, cwd=HERE.parent)
    return {"script": script.name, "args": args, "code": done.returncode, "seconds": time.perf_counter() - start,
            "ratios": ratios(done.stdout), "output": done.stdout, "error": done.stderr.strip().splitlines()[-1:]}


def machine() -> str:
    import numpy

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}, "
            f"Python {platform.python_version()}, numpy {numpy.__version__}; load average {os.getloadavg()[0]:.1f} "
            "when the run began (other jobs on the machine slow absolute times, less so the ratios)")


def table(results: list[dict]) -> list[str]:
    lines = ["| benchmark | settings | measurement | ratio column | ratio |", "|---|---|---|---|---:|"]
    for result in results:
        settings = " ".join(result["args"]) or "defaults"
        if result["code"] != 0:
            lines.append(f"| {result['script']} | {settings} | failed (exit {result['code']}): "
                         f"{' '.join(result['error'])} | | |")
            continue
        if not result["ratios"]:
            lines.append(f"| {result['script']} | {settings} | no ratio column recognised; run it to read its output "
                         "| | |")
        lines += [f"| {result['script']} | {settings} | {label} | {column} | {value} |"
                  for label, column, value in result["ratios"]]
    return lines


def update_docs(lines: list[str], header: str) -> None:
    block = "\n".join([BEGIN, header, "", *lines, END])
    text = DOCS.read_text(encoding="utf-8")
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n## Every benchmark at once (`benchmarks/run_all.py`)\n\n{block}\n{rest}"
    DOCS.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="each benchmark's default (longer) settings")
    parser.add_argument("--update-docs", action="store_true", help=f"rewrite the table in {DOCS.name}")
    args = parser.parse_args(argv)
    helpers = {Path(__file__).name, "timing.py"}  # timing.py is the shared timer, not a benchmark
    scripts = sorted(path for path in HERE.glob("*.py") if path.name not in helpers)
    results = []
    for script in scripts:
        print(f"running {script.name} ...", file=sys.stderr, flush=True)
        results.append(run_one(script, args.full))
    seconds = ", ".join(f"{result['script']} {result['seconds']:.0f} s" for result in results)
    header = (f"Machine: {machine()}. Settings: {'each benchmark' + chr(39) + 's defaults' if args.full else 'quick'}"
              f". Wall time: {seconds}. Every ratio compares runs made in one process of one benchmark; the "
              f"benchmark's own docstring says what its baseline is.")
    lines = table(results)
    print(header + "\n")
    print("\n".join(lines))
    if args.update_docs:
        update_docs(lines, header)
    return 0 if all(result["code"] == 0 for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
