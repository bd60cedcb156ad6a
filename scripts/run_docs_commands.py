"""Run the command lines of README.md and docs/*.md as written, and report each one's exit status and time.

    .venv/bin/python scripts/run_docs_commands.py                  # the quick commands (what tests/docs/test_readme.py runs)
    .venv/bin/python scripts/run_docs_commands.py --long           # also the long ones (minutes to an hour each)
    .venv/bin/python scripts/run_docs_commands.py --long --list    # which commands are long, with their costs
    .venv/bin/python scripts/run_docs_commands.py --long --page docs/capacity.md --match "sizes 4 "

What counts as a command: every line of a ```bash block (a line ending in a backslash continues on the next), and
every ```python block. A bash line is `witness ...` (or `.venv/bin/witness ...`), `.venv/bin/python SCRIPT ...`,
`bash scripts/....sh ...`, or an install line (`python3 -m venv`, `pip install`, `source .venv/bin/activate`),
which is checked, never run. Its trailing comment may say what it should do:

* `exit N` -- the exit status it must have (default 0), e.g. `# exit 1: a counterexample`;
* `prints TEXT` -- TEXT (up to a ` (`, a `;` or the end of the comment) must be in its output, spaces aside.

A python block preceded by the line `<!-- long: COST -->` is long. Each page runs in its own fresh folder, in
order (a page's later lines may use the files its earlier lines write); the folder holds a link `docs` to the
repository's docs/ (and `experiments`), so commands that read committed results work as they do from the repository
root. `witness` lines run in this process (`cli.main.main`), scripts as subprocesses.

A command is long when it starts with one of the prefixes in LONG; the test only parses those (`witness` lines with
the real argument parser, scripts by checking that the file and its options exist). `--long` runs them too,
except the ones that rewrite committed files (LONG's `writes`), which also need `--regenerate`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from docs_commands import LINKED, ROOT, Command, commands, pages, relative, static_problem


# -- running -----------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    command: Command
    status: int | None  # None: not run (parsed only)
    seconds: float = 0.0
    output: str = ""
    problem: str | None = None
    skipped: str | None = None  # why a long command was not run

    @property
    def ok(self) -> bool:
        return self.problem is None

    def describe(self) -> str:
        state = self.skipped or (f"exit {self.status}" if self.status is not None else "parsed")
        text = f"{self.command.where}: {self.command.short()} [{state}, {self.seconds:.1f} s]"
        if self.problem:
            text += f"\n    PROBLEM: {self.problem}"
            if self.output.strip():
                text += "\n    output: " + self.output.strip()[-1500:].replace("\n", "\n            ")
        return text


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = folder / name
        if not link.exists():
            link.symlink_to(ROOT / name, target_is_directory=True)


def executable(argv: list[str]) -> list[str]:
    """argv with the repository's .venv and scripts as absolute paths, so it runs from any folder."""
    argv = list(argv)
    if argv[0] == "witness":
        venv = ROOT / ".venv" / "bin" / "witness"
        argv[0] = str(venv) if venv.exists() else "witness"
    elif argv[0].startswith(".venv/"):
        argv[0] = str(ROOT / argv[0]) if (ROOT / argv[0]).exists() else sys.executable
    if len(argv) > 1 and argv[1].startswith(("scripts/", "benchmarks/", "examples/")):
        argv[1] = str(ROOT / argv[1])
    return argv


def run_witness_here(argv: list[str]) -> tuple[int, str]:
    """`witness ARGV` in this process: (exit status, stdout and stderr)."""
    from cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 2
    return int(status or 0), out.getvalue()


def run_python_block(code: str, where: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            exec(compile(code, where, "exec"), {"__name__": "__docs__"})
            status = 0
        except Exception as exc:  # the block failed: report it as exit 1 with its error
            print(f"{type(exc).__name__}: {exc}")
            status = 1
    return status, out.getvalue()


def run_subprocess(argv: list[str], folder: Path, timeout: float | None) -> tuple[int, str]:
    try:
        done = subprocess.run(executable(argv), cwd=folder, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return 124, f"timed out after {timeout} s\n{exc.stdout or ''}{exc.stderr or ''}"
    return done.returncode, done.stdout + done.stderr


def judge(command: Command, status: int, output: str) -> str | None:
    if status != command.expect:
        return f"exit {status}, expected {command.expect}"
    wanted = command.prints
    if wanted is not None and " ".join(wanted.split()) not in " ".join(output.split()):
        return f"its output does not contain {wanted!r}"
    return None


def run_command(command: Command, folder: Path, *, in_process: bool = True, timeout: float | None = None
                ) -> Outcome:
    start = time.perf_counter()
    previous = Path.cwd()
    os.chdir(folder)
    try:
        if command.language == "python":
            status, output = run_python_block(command.text, command.where)
        elif command.kind == "witness" and in_process:
            status, output = run_witness_here(command.argv[1:])
        else:
            status, output = run_subprocess(command.argv, folder, timeout)
    finally:
        os.chdir(previous)
    seconds = time.perf_counter() - start
    return Outcome(command, status, seconds, output, judge(command, status, output))


def run_page(page: Path, folder: Path, *, long: bool = False, regenerate: bool = False, match: str | None = None,
             timeout: float | None = None, report=None) -> list[Outcome]:
    """Run a page's commands in order in `folder`: the quick ones always, the long ones with `long` (those that
    rewrite committed files only with `regenerate` too; only those `match`, a regular expression, finds); the rest are
    checked without running. Every command is checked statically first."""
    prepare(folder)
    outcomes = []
    for command in commands(page):
        problem = static_problem(command)
        entry = command.long
        if problem is not None:
            outcome = Outcome(command, None, problem=problem)
        elif command.kind == "setup":
            outcome = Outcome(command, None, skipped="install line: checked, not run")
        elif entry is None:
            outcome = run_command(command, folder)
        elif not long:
            outcome = Outcome(command, None, skipped=f"long ({entry.cost}): parsed")
        elif match is not None and not re.search(match, command.text):
            outcome = Outcome(command, None, skipped="long: not matched")
        elif entry.writes and not regenerate:
            outcome = Outcome(command, None, skipped=f"rewrites {entry.writes}: needs --regenerate")
        else:
            outcome = run_command(command, folder, in_process=False, timeout=timeout)
        outcomes.append(outcome)
        if report is not None:
            report(outcome)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", action="store_true", help="also run the long commands (minutes to an hour each)")
    parser.add_argument("--regenerate", action="store_true",
                        help="with --long: also the commands that rewrite committed files in docs/")
    parser.add_argument("--list", action="store_true", help="list the commands and how each is treated; run nothing")
    parser.add_argument("--page", action="append", help="only this page (repeatable), e.g. docs/cli.md")
    parser.add_argument("--match", help="with --long: only the long commands this regular expression finds")
    parser.add_argument("--keep", type=Path, help="run in this folder (one sub-folder per page) and keep it")
    parser.add_argument("--timeout", type=float, default=None, help="seconds a long command may take")
    args = parser.parse_args(argv)
    chosen = [ROOT / page for page in args.page] if args.page else pages()
    if args.list:
        for page in chosen:
            for command in commands(page):
                entry = command.long
                how = ("install line" if command.kind == "setup" else "quick: runs" if entry is None else
                       f"long, {entry.cost}" + (f"; rewrites {entry.writes}" if entry.writes else ""))
                print(f"{command.where:28} {how:60} {command.short(70)}")
        return 0
    failed = 0

    def report(outcome: Outcome) -> None:
        nonlocal failed
        failed += not outcome.ok
        mark = "FAIL" if not outcome.ok else "ok  "
        print(f"{mark} {outcome.describe()}", flush=True)

    with contextlib.ExitStack() as stack:
        base = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="witness-docs-")))
        for page in chosen:
            run_page(page, base / relative(page).replace("/", "_"), long=args.long, regenerate=args.regenerate, match=args.match,
                     timeout=args.timeout, report=report)
    print(f"{failed} problem(s)" if failed else "every command did what its page says")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
