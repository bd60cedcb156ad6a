"""What the command groups share: the exit statuses, the one-line usage error, a subcommand's --json and --quiet,
the number-format options, output paths checked before any work, counts of inputs checked against the time they
would take, and where a sweep's jobs run."""

from __future__ import annotations

import argparse
import functools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

# Only what building the parser needs is imported at module level (each already loaded by `witness` itself, or
# light); a command imports what it runs inside its handler, so `witness --help` starts at once
# (tests/cli/test_startup.py, benchmarks/startup.py).
from witness.arith import Arithmetic, Format, arithmetic, parse_format
from witness.arith.formats import FORMAT_SYNTAX
from witness.arith.semantics import MEANINGS, SEMANTICS
from witness.errors import WitnessError

#: Exit statuses (docs/conventions.md §7): 0 verified / confirmed / no failure found, 1 a counterexample,
#: 2 bad input, 3 unknown.
EXIT_FALSIFIED, EXIT_BAD_INPUT, EXIT_UNKNOWN = 1, 2, 3


class CliError(WitnessError):
    """A command-line usage problem."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage block; we promise one line
        raise CliError(message)


class Later:
    """Help text computed when argparse shows it (`%(name)s` formats it with str), not when the parser is built."""

    def __init__(self, text):
        self._text = text

    def __str__(self) -> str:
        return self._text()


def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress bars on stderr")


def add_command(commands, name: str, handler, help_text: str, **parser_options: Any) -> argparse.ArgumentParser:
    """`witness NAME`: a subcommand with --json and --quiet whose handler gets the parsed arguments."""
    cmd = commands.add_parser(name, help=help_text, **parser_options)
    add_output_options(cmd)
    cmd.set_defaults(handler=handler)
    return cmd


def emit(args: argparse.Namespace, payload: dict[str, Any], text: str) -> None:
    print(json.dumps(payload) if args.json else text)


def with_meaning(payload: dict[str, Any]) -> dict[str, Any]:
    """A verdict's JSON with its semantics' meaning beside the name (`semantics_meaning`), which the text says as
    `semantics_text`."""
    return {**payload, "semantics_meaning": MEANINGS[payload["semantics"]]}


def budget_text(budget: dict) -> str:
    return ", ".join(f"{name} {budget[name]}" for name in ("H", "d_head", "d_model", "d", "p", "Hdp"))


def one_or_each(values: list[int]) -> int | list[int]:
    """`--linear-per-gap 2` (one number for every gap) or `--linear-per-gap 1 0 2` (one per gap)."""
    return values[0] if len(values) == 1 else values


# -- number format and semantics: shared by every command that runs a network ---------------------------------
def add_format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", metavar="FMT",
                        help=f"number format, {FORMAT_SYNTAX}; default: the network's claimed format (fp64 if none)")


def add_arithmetic_options(parser: argparse.ArgumentParser) -> None:
    """`--format FMT --semantics SEM`; read them back with `arithmetic_from_args`."""
    add_format_option(parser)
    parser.add_argument("--semantics", default="strict", metavar="SEM",
                        help=f"rounding semantics, one of {', '.join(SEMANTICS)} (default strict: every operation "
                             "rounded, as on p-bit hardware)")


def format_from_args(args: argparse.Namespace, network) -> Format:
    return parse_format(args.format or network.meta.claimed_format or "fp64")


def arithmetic_from_args(args: argparse.Namespace, network) -> Arithmetic:
    return arithmetic(format_from_args(args, network), args.semantics)


# -- output paths: checked before any work, so a mistake costs nothing ---------------------------------------
def _cannot_create_in(folder: Path) -> str | None:
    """Why nothing can be created in the existing folder `folder`, or None when something can. Permissions alone do
    not say (root passes every check, yet /proc or a read-only mount refuse), so a probe file is created there
    and removed at once."""
    import tempfile

    if not os.access(folder, os.W_OK | os.X_OK):
        return "permission denied"
    try:
        handle, probe = tempfile.mkstemp(prefix=".witness-probe-", dir=folder)
    except FileNotFoundError:  # /proc and the like: the folder is there, but takes no new entries
        return "the system takes no new files there"
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(handle)
    os.unlink(probe)
    return None


def _path_problems(check):
    """`check(path, option)` with a path the system cannot even look at (a NUL byte, a folder one may not list) also
    refused in one line."""
    @functools.wraps(check)
    def checked(path: Path, option: str) -> None:
        if "\0" in str(path):  # pathlib answers "no such file" to every question about such a name
            raise CliError(f"{option} {path!r}: cannot use this path (a NUL character)")
        try:
            check(Path(path), option)
        except (OSError, ValueError) as exc:
            raise CliError(f"{option} {path}: cannot use this path ({getattr(exc, 'strerror', None) or exc})") from None
    return checked


@_path_problems
def check_output_folder(path: Path, option: str) -> None:
    """Refuse (CliError, exit 2) an output folder the command could not write, before any work: `path` must be a
    folder one can create files in, or not exist yet with its nearest existing ancestor a folder one can create
    folders in (the command makes the missing ones)."""
    if path.is_dir():
        reason = _cannot_create_in(path)
        if reason is not None:
            raise CliError(f"{option} {path}: cannot write in this folder ({reason})")
        return
    if path.exists() or path.is_symlink():
        raise CliError(f"{option} {path}: exists and is not a folder")
    ancestor = path.absolute().parent
    while not ancestor.exists() and not ancestor.is_symlink():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise CliError(f"{option} {path}: cannot create it, {ancestor} is not a folder")
    reason = _cannot_create_in(ancestor)
    if reason is not None:
        raise CliError(f"{option} {path}: cannot create it in {ancestor} ({reason})")


@_path_problems
def check_output_file(path: Path, option: str) -> None:
    """Refuse (CliError, exit 2) an output file the command could not write, before any work: `path` must not be a
    folder, and its folder must exist and take new files (an existing file there is replaced)."""
    if path.is_dir():
        raise CliError(f"{option} {path}: is a folder; give a file name")
    parent = path.absolute().parent
    if not parent.exists():
        raise CliError(f"{option} {path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise CliError(f"{option} {path}: {parent} is not a folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise CliError(f"{option} {path}: cannot write it (permission denied)")
    reason = _cannot_create_in(parent)
    if reason is not None:
        raise CliError(f"{option} {path}: cannot write in {parent} ({reason})")


def check_input_file(path: str | Path, what: str) -> None:
    """Refuse a folder, or a path that is not there, given where a file is read (one line, naming `what`)."""
    path = Path(path)
    if path.is_dir():
        raise CliError(f"{path}: is a folder, not {what}")
    if not path.exists():
        raise CliError(f"{path}: no such file ({what})")


# -- counts of inputs: `run --random`, `verify --samples`, `verify --max-examples` ----------------------------
#: The longest a count of inputs may take at the network's measured speed: a count beyond it is refused before it
#: starts, with the estimate.
MAX_RUN_SECONDS = 24 * 3600
#: Counts up to this many start without measuring: the measurement would cost more than it could save.
MEASURE_ABOVE = 100_000
#: The measurement: batches of 1, 4, 16, ... inputs until one takes this much CPU time, or has this many inputs.
MEASURE_SECONDS, MEASURE_INPUTS = 0.25, 4096


def seconds_per_input(network, arith: Arithmetic) -> float | None:
    """About how long the executor takes per input of this network at `arith`, from growing batches of seeded random
    inputs, after one warm-up run that loads the compiled kernels; None when no input can be run (no task, or an
    overflow: the check itself reports those). CPU time of this process, so other jobs on the machine do not
    inflate it; the largest batch counts, so the per-call overhead of small ones does not either."""
    import time

    from verify import check

    try:
        task = check.task_of(network)
        rng = np.random.default_rng(0)
        check.wrong_rows(network, task.random_tokens(rng, 1), arith)
        size, limit = 1, min(MEASURE_INPUTS, check.batch_size(network))
        while True:
            tokens = task.random_tokens(rng, size)
            start = time.process_time()
            check.wrong_rows(network, tokens, arith)
            elapsed = time.process_time() - start
            if elapsed >= MEASURE_SECONDS or size >= limit:
                return elapsed / size
            size = min(4 * size, limit)
    except WitnessError:
        return None


def duration_text(seconds: float) -> str:
    for unit, length in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= length:
            value = seconds / length
            return f"{value:.2g} {unit}" if value < 1e5 else f"{value:.1e} {unit}"
    return f"{seconds:.0f} seconds"


def refuse_endless_count(network, arith: Arithmetic, count: int, option: str) -> None:
    """Refuse (exit 2) a count of inputs that would run for more than MAX_RUN_SECONDS at this network's measured
    speed, saying how long it would take and how many inputs fit; smaller counts run, with a progress bar."""
    if count <= MEASURE_ABOVE:
        return
    per_input = seconds_per_input(network, arith)
    if per_input is None or count * per_input <= MAX_RUN_SECONDS:
        return
    fits = max(MEASURE_ABOVE, int(MAX_RUN_SECONDS / per_input))
    raise CliError(f"{option} {count}: about {duration_text(count * per_input)} at this network's measured speed "
                   f"({1 / per_input:,.0f} inputs/s); one command runs at most a day, about {fits:.2g} inputs here: "
                   "give a smaller count")


# -- where a sweep's jobs run (lab.sweep): capacity and the hierarchy ----------------------------------------
def worker_count(text: str) -> int:
    """`--workers N`: a whole number, and no more local processes than could ever share this machine's CPUs (a typo
    such as 100000 would otherwise start that many)."""
    count = int(text)
    most = max(16, 4 * (os.cpu_count() or 1))
    if count > most:
        raise argparse.ArgumentTypeError(f"{count} local worker processes on a machine with {os.cpu_count()} CPUs; "
                                         f"give at most {most}")
    return count


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """Where a sweep's jobs run (lab.sweep): in-process unless told otherwise."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--workers", type=worker_count, metavar="N",
                       help="run the jobs on a local cluster of N processes")
    where.add_argument("--scheduler", metavar="ADDRESS", help="run the jobs on an existing dask cluster "
                                                              "(its workers must see the output folder)")
