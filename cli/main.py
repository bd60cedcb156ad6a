"""The `witness` command line: the one face that wires the core, the constructions and the verifier together.

Every subcommand prints text, or one JSON object with `--json`. Bad input is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import numpy as np

# Only what building the parser and every command's start need is imported here (each already loaded by
# `witness` itself, or light); the rest (sympy, hypothesis, networkx, numba, torch, dask) is imported by the command
# that uses it, so `witness --help` and a compile start at once (tests/test_startup.py, benchmarks/startup.py).
from verify.defaults import DEFAULT_MAX_EXAMPLES, FAMILY_SPLITS, METHODS, PAIR_PREFIXES, SEARCH_SAMPLES
from verify.result import Status
from witness.arith import Arithmetic, Format, arithmetic, parse_format
from witness.arith.formats import FORMAT_SYNTAX
from witness.arith.semantics import SEMANTICS
from witness.errors import InputError, StandInOverflow, WitnessError
from witness.execute import run as execute_run
from witness.io import load
from witness.progress import quiet, set_quiet
from witness.registry import builder, compile, construction_names
from witness.tasks import Composition, TwoSum

#: Exit statuses (docs/conventions.md §7): 0 verified / confirmed / no failure found, 1 a counterexample,
#: 2 bad input, 3 unknown.
EXIT_FALSIFIED, EXIT_BAD_INPUT, EXIT_UNKNOWN = 1, 2, 3


class CliError(WitnessError):
    """A command-line usage problem."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage block; we promise one line
        raise CliError(message)


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


class _Later:
    """Help text computed when argparse shows it (`%(name)s` formats it with str), not when the parser is built."""

    def __init__(self, text):
        self._text = text

    def __str__(self) -> str:
        return self._text()


def _emit(args: argparse.Namespace, payload: dict[str, Any], text: str) -> None:
    print(json.dumps(payload) if args.json else text)


# -- compile ------------------------------------------------------------------------------------------------
def construction_options(name: str, argv: list[str]) -> dict[str, Any]:
    """Parse `--key value` options for construction `name` from its builder's signature.

    A parameter whose default is a tuple takes a list of integers (`--n 2 4`), a bool default is a flag, a str
    default takes a string, and anything else takes one integer.
    """
    parser = _Parser(prog=f"witness compile {name}", add_help=False)
    for param in inspect.signature(builder(name)).parameters.values():
        flag, default = f"--{param.name}", param.default
        required = default is inspect.Parameter.empty
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true")
        elif isinstance(default, tuple):
            parser.add_argument(flag, type=int, nargs="*", default=list(default))
        elif isinstance(default, str):
            parser.add_argument(flag, default=default)
        else:
            parser.add_argument(flag, type=int, required=required, default=None if required else default)
    return vars(parser.parse_args(argv))


def cmd_compile(args: argparse.Namespace, extra: list[str]) -> None:
    check_output_file(Path(args.output), "-o")
    network = compile(args.construction, **construction_options(args.construction, extra))
    network.save(args.output)
    budget = network.budget()
    _emit(args, {"network": args.output, "construction": args.construction, "params": network.meta.params,
                 **budget.as_dict()},
          f"wrote {args.output}: {args.construction} {network.meta.params}, {len(network.layers)} layers, "
          f"d_model {network.d_model}")


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


# -- run ----------------------------------------------------------------------------------------------------
def parse_tokens(text: str) -> np.ndarray:
    try:
        return np.array([int(part) for part in text.split(",")], dtype=np.int64)
    except (ValueError, OverflowError):  # OverflowError: an id beyond int64
        raise InputError(f"--tokens must be comma-separated 64-bit integers, got {text!r}") from None


#: The longest a count of inputs (`run --random`, `verify --samples`, `verify --max-examples`) may take at the
#: network's measured speed: a count beyond it is refused before it starts, with the estimate.
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


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    """Exit 0 when every input run is answered correctly, 1 when one is not (or overflows)."""
    if args.seed < 0:
        raise CliError(f"--seed must be a non-negative integer, got {args.seed}")
    network = load(args.file)
    if (args.tokens is None) == (args.random is None):
        raise CliError("give exactly one of --tokens or --random")
    arith = arithmetic_from_args(args, network)
    if args.tokens is not None:
        tokens = parse_tokens(args.tokens)
        if network.task is not None:
            network.task.check_tokens(tokens)
        predictions = execute_run(network, tokens, arith).predictions[0]
        output = int(predictions[0]) if network.readout.read == "last" else [int(v) for v in predictions]
        _emit(args, {"output": output}, str(output) if isinstance(output, int) else " ".join(map(str, output)))
        return 0
    if args.random < 1:
        raise CliError(f"--random must be at least 1, got {args.random}")
    refuse_endless_count(network, arith, args.random, "--random")
    from verify import check

    result = check.sampled(network, args.random, args.seed, arith)
    correct = result.checked - result.failures
    payload = {"correct": correct, "total": result.checked, "asked": args.random, "seed": args.seed,
               **result.arithmetic}
    text = (f"{correct}/{result.checked} random inputs correct (seed {args.seed}, {result.arithmetic['format']} "
            f"{result.arithmetic['semantics']})")
    if "stopped_by_overflow" in result.detail:
        payload["stopped_by_overflow"] = result.detail["stopped_by_overflow"]
        text += (f"; stopped after {result.checked} of {args.random} inputs: a run overflowed "
                 f"({result.detail['stopped_by_overflow']})")
    if result.counterexample is not None:
        payload["counterexample"] = {k: v for k, v in result.as_dict()["counterexample"].items() if k != "trace"}
    _emit(args, payload, text)
    return EXIT_FALSIFIED if result.failures else 0


# -- inspect ------------------------------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace, extra: list[str]) -> None:
    for option, path in (("--plot", args.plot), ("--graph", args.graph)):
        if path is not None:
            check_output_file(Path(path), option)
            check_image_suffix(Path(path), option)
    network = load(args.file)
    fmt = format_from_args(args, network)
    budget = network.budget(fmt.bits)
    layers = []
    for l, layer in enumerate(network.layers):
        attn = layer.mixer
        layers.append({"index": l, "mixer": attn.kind, "causal": attn.causal, "H": attn.n_heads,
                       "d_head": attn.d_head, "mlp": None if layer.mlp is None else layer.mlp.d_mlp,
                       "options": {name: getattr(attn, name) for name in attn.option_names if name != "causal"}})
    payload = {"task": network.meta.task, "params": network.meta.params, "construction": network.meta.construction,
               "claimed_format": network.meta.claimed_format, "format": fmt.name, "layers": layers,
               "n_ctx": network.n_ctx,
               **budget.as_dict()}
    lines = [f"task {network.meta.task} {network.meta.params}  construction {network.meta.construction}",
             f"context {network.n_ctx} tokens, vocabulary {network.d_vocab} -> {network.d_vocab_out}"]
    for entry in layers:
        mlp = f"mlp d_mlp={entry['mlp']}" if entry["mlp"] is not None else "no mlp"
        causal = "causal" if entry["causal"] else "bidirectional"
        options = "".join(f" {name}={value}" for name, value in entry["options"].items())
        lines.append(f"  blocks.{entry['index']}: {causal} {entry['mixer']}{options} H={entry['H']} "
                     f"d_head={entry['d_head']}, {mlp}")
    lines += [f"budget (p = bits of {fmt.name}):", budget.table()]
    if args.tokens is not None and args.plot is None:
        raise CliError("--tokens chooses the input to draw and needs --plot")
    if args.plot is not None:
        write_overview_plot(network, args.plot, args.tokens)
        payload["plot"] = args.plot
        lines.append(f"wrote {args.plot}")
    if args.graph is not None:
        from lab.dataflow import draw as draw_dataflow  # networkx: only --graph needs it

        try:
            draw_dataflow(network, args.graph)
        except ImportError:
            raise CliError("--graph needs matplotlib: pip install 'witness[plots]'") from None
        except (OSError, ValueError) as exc:
            raise CliError(f"--graph {args.graph}: cannot write ({getattr(exc, 'strerror', None) or exc})") from None
        payload["graph"] = args.graph
        lines.append(f"wrote {args.graph}")
    _emit(args, payload, "\n".join(lines))


def check_image_suffix(path: Path, option: str) -> None:
    """Refuse, before any drawing, an image name whose suffix matplotlib cannot write (none: it writes a PNG and
    adds .png)."""
    kind = path.suffix[1:].lower()
    if not kind:
        return
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:  # the drawing itself says that matplotlib is missing
        return
    kinds = FigureCanvasBase.get_supported_filetypes()
    if kind not in kinds:
        raise CliError(f"{option} {path}: matplotlib cannot write .{kind} images; name one of "
                       f"{', '.join('.' + name for name in sorted(kinds))}")


def write_overview_plot(network, path: str, tokens_text: str | None) -> None:
    """`lab.plots.overview` of one input (given, else the task's first seeded random one) saved to `path`."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never open a window, even where a display exists
        from lab import plots
    except ImportError:
        raise CliError("--plot needs matplotlib: pip install 'witness[plots]'") from None
    if tokens_text is not None:
        tokens = parse_tokens(tokens_text)
        if network.task is not None:
            network.task.check_tokens(tokens)
    elif network.task is not None:
        tokens = network.task.random_tokens(0, 1)[0]
    else:
        tokens = np.arange(network.n_ctx) % network.d_vocab
    figure = plots.overview(network, tokens)
    try:
        figure.savefig(path, dpi=110)
    except (OSError, ValueError) as exc:  # a missing folder, or a suffix matplotlib cannot write
        raise CliError(f"--plot {path}: cannot write ({getattr(exc, 'strerror', None) or exc})") from None


# -- bounds -------------------------------------------------------------------------------------------------
def big_int(text: str) -> int:
    """An integer written in decimal or as 2^k, 2^k - c or 2^k + c (sizes at the theorems' scale)."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:\^\s*(\d+))?\s*(?:([+-])\s*(\d+))?\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected an integer such as 1024, 2^1000 or 2^963-2, got {text!r}")
    base, exponent, sign, offset = match.groups()
    if exponent is not None and int(exponent) > 10**6:
        raise argparse.ArgumentTypeError(f"{text!r}: an exponent above 10^6 is beyond anything witness can certify")
    value = int(base) ** int(exponent) if exponent is not None else int(base)
    return value + (0 if sign is None else int(offset) * (1 if sign == "+" else -1))


def cmd_bounds(args: argparse.Namespace, extra: list[str]) -> None:
    from verify import theorems as theorem_bounds  # sympy: only the theorems' exact thresholds need it

    if args.construction is not None:
        return bounds_of_construction(args)
    if args.m is not None:
        raise CliError("--m goes with --construction composition")
    if len(args.n) > 1:
        raise CliError("--n takes the prompt length (one value); with --construction, the query ranges")
    shape = None if args.shape is None else theorem_bounds.HeadShape(*args.shape)
    if args.Hdp is None and shape is None:
        raise CliError("give --Hdp or --shape H d p (or --construction composition --L --m --n --format)")
    Hdp = shape.Hdp if args.Hdp is None else args.Hdp
    n, network_Hdp = (args.n[0] if args.n else None), None
    if args.format is not None and args.network is None:
        raise CliError("--format sets the p of --network's budget and needs --network")
    if args.network is not None:  # a solving network: its prompt length and its budget, as `inspect` reports it
        network = load(args.network)
        task = network.task
        if task is None or task.name != "composition" or task.L != args.L:
            raise CliError(f"--network must hold a composition network with L = {args.L}, got {network.meta.task} "
                           f"{network.meta.params}")
        if n is not None and n != task.prompt_length:
            raise CliError(f"--n {n} differs from the network's prompt length {task.prompt_length}")
        n, network_Hdp = task.prompt_length, network.budget(format_from_args(args, network).bits).Hdp
    report = theorem_bounds.bounds(args.L, Hdp, n, B=args.B, shape=shape, network_Hdp=network_Hdp)
    _emit(args, report.as_dict(), report.text() + f"\n  (applies: evaluated for Hdp = {Hdp})")


def bounds_of_construction(args: argparse.Namespace) -> None:
    """The construction's budget at FMT from its parametric description (no file, any size) and whether the
    theorems cover it at its own prompt length, in exact integers."""
    from experiments import separation
    from verify.certify import Construction

    if args.construction != "composition":
        raise CliError("--construction takes composition (the one with a parametric description)")
    if args.m is None or args.format is None or args.Hdp is not None or args.shape is not None or args.network:
        raise CliError("bounds --construction composition takes --L L --m M [--n N_1 .. N_{L-1}] --format FMT")
    target = Construction(args.L, args.m, tuple(args.n))
    fmt = parse_format(args.format)
    budget = separation.budget(target, fmt.bits)
    n = target.task.prompt_length
    cover = separation.covering(args.L, n, budget["Hdp"])
    payload = {"construction": "composition", "params": {"L": args.L, "m": str(args.m), "n": [str(v) for v in args.n]},
               "format": fmt.name, "prompt_length_log2": separation.confirmed_log2(n), **budget,
               "theorems": {name: {**entry, "largest_Hdp": str(entry["largest_Hdp"])} for name, entry in cover.items()}}
    lines = [f"composition construction L = {args.L}: log2 n = {payload['prompt_length_log2']}; at {fmt.name}: "
             f"{budget_text(budget)}"]
    for name, entry in cover.items():
        lines.append(f"  {name:<12} {entry['condition']}: largest covered Hdp {entry['largest_Hdp']}; "
                     f"this Hdp {budget['Hdp']}: {'covered' if entry['covered'] else 'not covered'}")
    _emit(args, payload, "\n".join(lines))


# -- verify, min-precision ---------------------------------------------------------------------------------


def result_payload(result) -> dict[str, Any]:
    """status, format, semantics, p, method, checked, failures, counterexample (tokens, expected, output,
    trace) and the method's detail (seed, budget, ...)."""
    out = result.as_dict()
    return {"status": out["status"], **out["arithmetic"], "method": out["method"], "checked": out["checked"],
            "failures": out["failures"], "counterexample": out["counterexample"], "detail": out["detail"]}


def result_text(result) -> str:
    described = result.arithmetic
    lines = [f"{result.status.value}: {result.method} check, {result.checked} inputs run, {result.failures} wrong "
             f"({described['format']}, {described['semantics']}, p = {described['p']})"]
    if result.counterexample is not None:
        example = result.counterexample
        lines.append(f"counterexample: tokens {','.join(map(str, example.tokens))}; expected {example.expected}, "
                     f"got {example.output}")
    if "rests_on" in result.detail:
        lines.append(f"rests on: {result.detail['rests_on']}")
    return "\n".join(lines)


def cmd_verify(args: argparse.Namespace, extra: list[str]) -> int:
    """Exit status 0 when no failure was found (verified or unknown), 1 with a counterexample."""
    from verify import check

    network = load(args.file)
    arith = arithmetic_from_args(args, network)
    if args.max_examples is not None and not args.hypothesis:
        raise CliError("--max-examples goes with --hypothesis")
    if args.exhaustive:
        result = check.exhaustive(network, arith)
    elif args.samples is not None:
        if args.samples < 1:
            raise CliError(f"--samples must be at least 1, got {args.samples}")
        refuse_endless_count(network, arith, args.samples, "--samples")
        result = check.sampled(network, args.samples, args.seed, arith)
    else:
        budget = DEFAULT_MAX_EXAMPLES if args.max_examples is None else args.max_examples
        refuse_endless_count(network, arith, budget, "--max-examples")
        result = check.hypothesis_search(network, arith, budget, args.seed)
    _emit(args, result_payload(result), result_text(result))
    return EXIT_FALSIFIED if result.status is Status.FALSIFIED else 0


def min_precision_checker(args: argparse.Namespace):
    """The checker `min-precision` searches with (a `verify.precision.Checker`): composition takes --L --m
    [--n ...], two_sum --n --M --t."""
    from verify import precision

    if args.construction == "two_sum":
        if args.L is not None or args.m is not None or len(args.n) != 1 or args.M is None or args.t is None:
            raise CliError("min-precision two_sum takes --n N --M M --t T [--causal]")
        return precision.two_sum_checker(args.n[0], args.M, args.t, args.causal, args.method)
    if args.L is None or args.m is None or args.M is not None or args.t is not None or args.causal:
        raise CliError(f"min-precision {args.construction} takes --L L --m M [--n N_1 .. N_{{L-1}}]")
    if args.construction != "composition":  # the hybrids: certify (or enumerate) the compiled network
        return precision.network_checker(compile(args.construction, L=args.L, m=args.m, n=list(args.n)), args.method)
    return precision.composition_checker(args.L, args.m, tuple(args.n), args.method)


def cmd_min_precision(args: argparse.Namespace, extra: list[str]) -> int:
    from verify import precision

    case = precision.Case(min_precision_checker(args), args.family, args.semantics, args.max_bits)
    found = precision.table([case])[0].result
    payload = found.as_dict()
    payload["method"] = args.method
    if found.p is None:
        text = (f"unknown: {args.method} verifies no {args.family} format of at most {args.max_bits} bits under "
                f"{args.semantics} ({len(found.trials)} checks)")
    else:
        split = ", ".join(f"{name} {bits}" for name, bits in found.split.items())
        below = "; ".join(f"{trial.format} {trial.status}" for trial in found.below) or "no runnable split"
        text = (f"p* = {found.p}: {found.format} ({split}) {args.method}-verified under {args.semantics}\n"
                f"at p* - 1 = {found.p - 1}: {below}; every smaller p was tried as well")
        if args.method == "certify":
            text += ("\ncertify is sound, not complete: p* is an upper bound on the fewest bits at which the network "
                     "is correct")
    _emit(args, payload, text)
    return EXIT_UNKNOWN if found.p is None else 0


# -- certify, check-certificate ---------------------------------------------------------------------------


def budget_text(budget: dict) -> str:
    return ", ".join(f"{name} {budget[name]}" for name in ("H", "d_head", "d_model", "d", "p", "Hdp"))


def cmd_certify(args: argparse.Namespace, extra: list[str]) -> int:
    """`certify FILE` or `certify composition --L .. --m .. --n ..`; exit 0 when verified (the certificate goes to
    --out), 3 when unknown (nothing is written)."""
    from verify.certify import Construction, certify

    if args.out is not None:
        check_output_file(Path(args.out), "--out")
    if args.L is not None or args.target == "composition" and args.m is not None:
        if args.target != "composition" or args.L is None or args.m is None:
            raise CliError("the parametric form is: certify composition --L L --m M [--n N_1 .. N_{L-1}]")
        result = certify(Construction(args.L, args.m, tuple(args.n)),
                         arithmetic(parse_format(args.format or "fp64"), args.semantics))
    else:
        if args.n:
            raise CliError("--n belongs to the parametric form: certify composition --L L --m M --n ...")
        network = load(args.target)
        result = certify(network, arithmetic_from_args(args, network))
    described = f"certify ({result.arithmetic['format']}, {result.arithmetic['semantics']})"
    if result.status is not Status.VERIFIED:
        _emit(args, {"status": result.status.value, **result.arithmetic, "method": "certify",
                     "reason": result.detail["reason"], "certificate": None},
              f"{result.status.value}: {described}: {result.detail['reason']}")
        return EXIT_UNKNOWN
    if args.out is not None:
        try:
            with open(args.out, "w", encoding="utf-8") as handle:
                json.dump(result.detail["certificate"], handle)
        except OSError as exc:
            raise CliError(f"--out {args.out}: cannot write ({exc.strerror})") from None
    budget = result.detail["budget"]
    _emit(args, {"status": "verified", **result.arithmetic, "method": "certify",
                 "inputs_log2": result.detail["inputs_log2"], "budget": budget, "certificate": args.out},
          f"verified: {described}, every input of the family (2^{result.detail['inputs_log2']} inputs); "
          f"{budget_text(budget)}" + (f"\nwrote {args.out}" if args.out else ""))
    return 0


def cmd_check_certificate(args: argparse.Namespace, extra: list[str]) -> None:
    """Exit 0 when the trusted checker confirms the certificate; a refusal is one line naming the failing step,
    exit 2."""
    from verify import checker

    check_input_file(args.certificate, "a certificate file")
    if args.file is not None:
        check_input_file(args.file, "a weights file")
    try:
        summary = checker.check_files(args.certificate, args.file)
    except checker.Refused as exc:
        raise CliError(f"refused: {exc}") from None
    _emit(args, {"status": "confirmed", **summary},
          f"confirmed: {args.certificate} ({summary['task']} {summary['params']}, {summary['format']}, "
          f"{summary['semantics']}; 2^{summary['inputs_log2']} inputs; {budget_text(summary['budget'])})")


# -- search -------------------------------------------------------------------------------------------------
def add_search_options(parser: argparse.ArgumentParser) -> None:
    """What every `witness search ARCH` shares: the head shape, the arithmetic, where the weights come from."""
    add_output_options(parser)
    parser.add_argument("--H", type=int, required=True, help="heads per layer")
    parser.add_argument("--d-head", type=int, required=True, help="head dimension")
    parser.add_argument("--d-model", type=int, required=True, help="residual width")
    parser.add_argument("--format", default="fp16", metavar="FMT",
                        help=f"number format, {FORMAT_SYNTAX} (default fp16)")
    parser.add_argument("--semantics", default="strict", metavar="SEM", help=f"one of {', '.join(SEMANTICS)}")
    parser.add_argument("--weights", default="random", metavar="random|trained|FILE",
                        help="seeded random weights, the shared trainer's best of several seeds, or a saved network")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-network", metavar="FILE", help="write the searched network here (replay findings "
                                                               "with `witness run FILE --tokens ...`)")


def search_arithmetic(args: argparse.Namespace) -> Arithmetic:
    return arithmetic(parse_format(args.format), args.semantics)


def search_text(report) -> str:
    from verify.search.probes import failing_and_tried

    budget = report.budget
    failing, tried = failing_and_tried(report.searched)
    per_probe = ", ".join(f"{record['method']} {record['failing']}/{record['inputs']}"
                          for record in report.searched["probes"] if "failing" in record)
    lines = [f"{failing} of {tried} inputs failed ({per_probe}; {len(report.failures)} kept below, each confirmed "
             f"by a fresh run); {len(report.pairs)} indistinguishable pairs; {report.searched['inputs']} inputs run "
             f"in all ({report.format} {report.semantics}; H {budget['H']}, d {budget['d']}, p {budget['p']}, "
             f"Hdp {budget['Hdp']}, state bits {budget.get('state_bits', 0)})"]
    counted = report.searched.get("counting", {})
    if counted.get("applies"):
        lines.append(f"counting: the last table holds N·log2 N = {counted['table_bits']:g} bits, the recurrent state "
                     f"C = {counted['state_bits']}: pairs are " + ("forced by counting" if counted["forced"] else
                                                                 "not forced by counting (the state can hold it)"))
    lines += [f"failure: tokens {','.join(map(str, f.tokens))}; expected {f.expected}, got {f.output}"
              for f in report.failures]
    lines += [f"pair: {','.join(map(str, p.a))} | {','.join(map(str, p.b))}; answers {p.expected_a} and "
              f"{p.expected_b}, output {p.output} on both" for p in report.pairs]
    if report.network is not None:
        lines.append(f"network saved to {report.network}")
    return "\n".join(lines)


def _emit_search(args: argparse.Namespace, report) -> int:
    """Exit 1 when the search found a failure or an indistinguishable pair (each confirmed by a fresh run)."""
    _emit(args, report.as_dict(), search_text(report))
    return EXIT_FALSIFIED if report.failures or report.pairs else 0


def _composition_from_args(args: argparse.Namespace) -> Composition:
    return Composition(L=args.L, m=args.m, n=tuple(args.n))


def check_search_outputs(args: argparse.Namespace) -> None:
    if args.save_network is not None:
        check_output_file(Path(args.save_network), "--save-network")


def cmd_search_hybrid(args: argparse.Namespace, extra: list[str]) -> int:
    from verify.search.hybrid import search_hybrid

    check_search_outputs(args)
    linear_per_gap = args.linear_per_gap[0] if len(args.linear_per_gap) == 1 else args.linear_per_gap
    report = search_hybrid(_composition_from_args(args), full_layers=args.full_layers, linear_per_gap=linear_per_gap,
                           mixer=args.mixer, H=args.H, d_head=args.d_head, d_model=args.d_model,
                           arith=search_arithmetic(args), weights=args.weights, seed=args.seed,
                           save_network=args.save_network, samples=args.samples,
                           pair_prefixes=args.pair_prefixes)
    return _emit_search(args, report)


def cmd_search_full(args: argparse.Namespace, extra: list[str]) -> int:
    from verify.search.hybrid import search_full

    check_search_outputs(args)
    report = search_full(_composition_from_args(args), layers=args.layers, H=args.H, d_head=args.d_head,
                         d_model=args.d_model, arith=search_arithmetic(args), weights=args.weights, seed=args.seed,
                         save_network=args.save_network, samples=args.samples,
                         pair_prefixes=args.pair_prefixes)
    return _emit_search(args, report)


def add_composition_options(parser: argparse.ArgumentParser) -> None:
    """The task of `search hybrid|full`, and how hard to search it."""
    parser.add_argument("--L", type=int, required=True, help="composition depth")
    parser.add_argument("--m", type=int, required=True, help="seed range")
    parser.add_argument("--n", type=int, nargs="*", default=[], help="n_1 .. n_{L-1}")
    parser.add_argument("--samples", type=int, default=SEARCH_SAMPLES,
                        help=f"random inputs when the family is too large to run whole (default {SEARCH_SAMPLES})")
    parser.add_argument("--pair-prefixes", type=int, default=PAIR_PREFIXES,
                        help=f"random prefixes per fixed suffix in the pair search (default {PAIR_PREFIXES})")


def cmd_search_sparse(args: argparse.Namespace, extra: list[str]) -> int:
    from verify.search.sparse import search_sparse

    check_search_outputs(args)
    report = search_sparse(TwoSum(args.n, args.M, args.t, args.causal), block=args.block, k=args.k, H=args.H,
                           d_head=args.d_head, d_model=args.d_model, arith=search_arithmetic(args),
                           weights=args.weights, seed=args.seed, save_network=args.save_network)
    return _emit_search(args, report)


# -- train --------------------------------------------------------------------------------------------------
def train_task(args: argparse.Namespace):
    """`train composition --L --m [--n ...]` or `train two_sum --n --M [--t] [--causal]`."""
    if args.task == "composition":
        if args.L is None or args.m is None or args.M is not None or args.causal:
            raise CliError("train composition takes --L L --m M [--n N_1 .. N_{L-1}]")
        return Composition(L=args.L, m=args.m, n=tuple(args.n))
    if args.L is not None or args.m is not None or len(args.n) != 1 or args.M is None:
        raise CliError("train two_sum takes --n N --M M [--t T] [--causal]")
    return TwoSum(args.n[0], args.M, args.t, args.causal)


def train_architecture(args: argparse.Namespace, task):
    """The architecture `--arch` names, with the shape options each kind needs (and no others)."""
    from lab.architectures import full_architecture, hybrid_architecture
    from verify.search.sparse import sparse_architecture

    shape = {"H": args.H, "d_head": args.d_head, "d_model": args.d_model, "mlp_ratio": args.mlp_ratio}
    given = {name for name in ("layers", "full_layers", "linear_per_gap", "mixer", "block", "k")
             if getattr(args, name) is not None}
    needs = {"full": {"layers"}, "hybrid": {"full_layers", "linear_per_gap", "mixer"}, "sparse": {"block", "k"}}
    if given != needs[args.arch]:
        flags = " ".join(f"--{name.replace('_', '-')}" for name in sorted(needs[args.arch]))
        raise CliError(f"--arch {args.arch} takes {flags} (and no other architecture options)")
    if args.arch == "sparse" and not isinstance(task, TwoSum):
        raise CliError("--arch sparse trains two_sum (one block-sparse layer read at every position)")
    if isinstance(task, TwoSum) and args.arch != "sparse":
        raise CliError("two_sum is read at every position: train it with --arch sparse")
    if shape["mlp_ratio"] is None:
        shape["mlp_ratio"] = 4 if args.arch == "sparse" else 0
    if args.arch == "full":
        return full_architecture(args.layers, **shape)
    if args.arch == "hybrid":
        gaps = args.linear_per_gap[0] if len(args.linear_per_gap) == 1 else args.linear_per_gap
        return hybrid_architecture(args.full_layers, gaps, args.mixer, **shape)
    return sparse_architecture(task, args.block, args.k, **shape)


def cmd_train(args: argparse.Namespace, extra: list[str]) -> None:
    """Train from a seeded random initialisation for exactly --steps steps and save the network; the accuracy is
    the float64 executor's on held-out inputs."""
    output = Path(args.output)
    check_output_file(output, "-o")  # before torch is even imported
    from lab import train

    task = train_task(args)
    architecture = train_architecture(args, task)
    options = {"batch_size": args.batch_size, "warmup": args.warmup, "hop_weight": args.hop_weight}
    if args.steps is not None:
        options["steps"] = args.steps
    sweep, lr = None, args.lr if args.lr is not None else train.DEFAULT_LR
    if args.lr_sweep:
        sweep_steps = max(1, options.pop("steps", train.DEFAULT_STEPS) // 4)
        sweep = train.sweep_lr(architecture, task, steps=sweep_steps, seed=args.seed, lrs=args.lr_sweep, **options)
        lr = sweep.lr
        options["steps"] = 4 * sweep_steps if args.steps is None else args.steps
    network, report = train.train(architecture, task, seed=args.seed, lr=lr, **options)
    network.save(output)
    scope = "every input" if report.exhaustive else f"{report.eval_inputs} held-out random inputs"
    payload = {"network": str(output), "task": task.name, "params": task.params(),
               "layers": [spec.mixer for spec in architecture.layers],
               "budget": network.budget(64).as_dict(),
               "accuracy": {"value": report.accuracy, "inputs": report.eval_inputs, "exhaustive": report.exhaustive,
                            "format": "fp64", "semantics": "strict",
                            "correct_means": "every read position's unique argmax is the answer"},
               **{key: value for key, value in report.as_dict().items() if key not in ("accuracy", "history")},
               "learning_curve": [{"step": step, "loss": loss, "accuracy_float32": acc}
                                  for step, loss, acc in report.history],
               "lr_sweep": None if sweep is None else sweep.as_dict()}
    chosen = "" if sweep is None else (f" (chosen by a {sweep.steps}-step sweep: "
                                       + ", ".join(f"{rate:g} -> {acc:.3f}" for rate, acc in sweep.tried) + ")")
    _emit(args, payload, f"accuracy {report.accuracy:.4f} on {scope} (fp64 executor, strict; correct = unique argmax "
                         f"is the answer)\n{report.steps} steps, lr {lr:g}{chosen}, seed {report.seed}, final loss "
                         f"{report.final_loss:.4g}, {report.seconds:.1f} s\nwrote {output}")


def add_hop_weight_option(parser: argparse.ArgumentParser) -> None:
    """Shared by `train` and `capacity`: both train with lab.train.train."""
    parser.add_argument("--hop-weight", type=float,
                        help="weight of the intermediate-hop targets (composition, L >= 2; default "
                             "lab.train.DEFAULT_HOP_WEIGHT, 1; 0 turns them off)")


def add_train_options(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("task", choices=["composition", "two_sum"])
    cmd.add_argument("--L", type=int, help="composition: depth")
    cmd.add_argument("--m", type=int, help="composition: seed range")
    cmd.add_argument("--n", type=int, nargs="*", default=[], help="composition: n_1 .. n_{L-1}; two_sum: the length")
    cmd.add_argument("--M", type=int, help="two_sum: the modulus")
    cmd.add_argument("--t", type=int, default=0, help="two_sum: the target (default 0)")
    cmd.add_argument("--causal", action="store_true", help="two_sum: the causal variant")
    cmd.add_argument("--arch", required=True, choices=["full", "hybrid", "sparse"])
    cmd.add_argument("--layers", type=int, help="full: softmax-attention layers")
    cmd.add_argument("--full-layers", type=int, help="hybrid: full-attention layers")
    cmd.add_argument("--linear-per-gap", type=int, nargs="+", help="hybrid: recurrent layers per gap")
    cmd.add_argument("--mixer", help="hybrid: recurrent mixer kind (linear, gla, deltanet, ...)")
    cmd.add_argument("--block", type=int, help="sparse: block size B")
    cmd.add_argument("--k", type=int, help="sparse: other blocks each query keeps")
    cmd.add_argument("--H", type=int, required=True, help="heads per layer")
    cmd.add_argument("--d-head", type=int, required=True, help="head dimension")
    cmd.add_argument("--d-model", type=int, required=True, help="residual width")
    cmd.add_argument("--mlp-ratio", type=int, help="an MLP of width R x d_model after every layer (default: none "
                                                   "for full and hybrid, whose pointer look-ups train more reliably "
                                                   "without; 4 for sparse, whose comparison needs one)")
    cmd.add_argument("--steps", type=int, help="optimiser steps (default lab.train.DEFAULT_STEPS, 4000)")
    cmd.add_argument("--seed", type=int, default=0, help="initialisation and data seed (default 0)")
    cmd.add_argument("--lr", type=float, help="peak learning rate (default lab.train.DEFAULT_LR, 3e-3)")
    cmd.add_argument("--lr-sweep", type=float, nargs="+", metavar="LR",
                     help="first train steps/4 steps at each of these and keep the best on a validation stream")
    cmd.add_argument("--batch-size", type=int, default=64)
    cmd.add_argument("--warmup", type=int, help="warm-up steps (default steps / 20)")
    add_hop_weight_option(cmd)
    cmd.add_argument("-o", "--output", required=True, help="where to write the trained network")


# -- capacity -----------------------------------------------------------------------------------------------
#: `capacity --seeds`: more than this many is beyond any curve one command should train.
MAX_CAPACITY_SEEDS = 1000


def cmd_capacity(args: argparse.Namespace, extra: list[str]) -> None:
    out = Path(args.out)
    check_output_folder(out, "--out")  # before torch and dask are even imported
    if args.seeds > MAX_CAPACITY_SEEDS:
        raise CliError(f"--seeds {args.seeds}: each seed trains one network per size and architecture; give at most "
                       f"{MAX_CAPACITY_SEEDS}")
    from experiments import capacity
    from lab.sweep import Engine

    spec = capacity.CapacitySpec(L=args.L, sizes=tuple(args.sizes), H=args.H, d_head=args.d_head,
                                 d_model=args.d_model, format=args.format, semantics=args.semantics,
                                 seeds=tuple(range(args.seeds)), steps=args.steps, lr=args.lr,
                                 mixers=tuple(args.mixers), linear_per_gap=args.linear_per_gap,
                                 eval_inputs=args.eval_inputs, hop_weight=args.hop_weight)
    stored = []
    for folder in args.reuse or ():
        source = Path(folder) / "capacity.json"
        try:
            stored.append(json.loads(source.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise CliError(f"--reuse: cannot read {source} ({exc})") from None
    curve = capacity.capacity(spec, Engine(args.workers, args.scheduler), tuple(stored))
    try:
        capacity.write(curve, out)
    except OSError as exc:  # checked before the work; a disk that filled up since
        raise CliError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    _emit(args, curve, capacity.markdown(curve) + f"\nwrote {out}/capacity.md, capacity.json, capacity.png")


# -- separation ---------------------------------------------------------------------------------------------
def cmd_separation(args: argparse.Namespace, extra: list[str]) -> None:
    from experiments import separation  # sympy, through the theorems' bounds

    if args.L not in separation.FITS:
        raise CliError(f"--L {args.L}: the separation is computed for L in {list(separation.FITS)} on a machine like "
                       "this one (L = 3 starts near log2 n = 4.1e5, d_model 3.2e6; see the README)")
    def progress(message: str) -> None:
        print(f"witness separation: {message}", file=sys.stderr, flush=True)

    out = Path(args.out)
    check_output_folder(out, "--out")
    summary = separation.separation(args.L, progress=progress)
    try:
        separation.write(summary, out)
    except OSError as exc:  # checked before the work; a disk that filled up since
        raise CliError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    brief = {key: value for key, value in summary.items() if key not in ("certificate", "trials_at_k")}
    brief["certificate"] = str(out / "certificate.json")
    _emit(args, brief, f"L = {args.L}: k = {summary['k']} (log2 n = {summary['prompt_length_log2']}), certified at "
                       f"p* = {summary['p']} ({summary['format']}, {summary['semantics']}); Hdp = {summary['Hdp']} <= "
                       f"{summary['theorem']['largest_Hdp']} = floor(n^(2^-{4 * args.L + 2})): covered\n"
                       f"wrote {out}/certificate.json, separation.json, separation.md")


# -- hierarchy ----------------------------------------------------------------------------------------------
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


def cmd_hierarchy(args: argparse.Namespace, extra: list[str]) -> None:
    # Imported here: dask.distributed takes a noticeable fraction of a second to import, and only sweeps need it.
    from experiments import hierarchy, hierarchy_report, trained
    from lab.sweep import Engine

    check_output_folder(Path(args.out), "--out")
    config = hierarchy.load_config(args.config, quick=args.quick).select(args.L)
    if args.full:
        store = None
    elif args.stored is not None:
        store = trained.Store(args.stored)
    elif args.quick or args.config is not None:
        store = None  # only the embedded full configuration has a committed store; these train (quickly)
    elif (trained.DEFAULT_STORE / trained.STORE).is_file():
        store = trained.Store(trained.DEFAULT_STORE)
    else:
        raise CliError(f"no stored trained networks at {trained.DEFAULT_STORE} (an install without the "
                       "repository's docs/): pass --stored DIR, a folder `witness hierarchy --full` wrote, or "
                       "--full to compute everything here (over an hour on 2 cores)")
    workers = args.workers if args.workers or args.scheduler else len(os.sched_getaffinity(0))
    signal.signal(signal.SIGTERM, _interrupt)  # a kill: end as Ctrl-C does, leaving the folder marked unfinished
    report = hierarchy.hierarchy(args.out, config, Engine(None if args.scheduler else workers, args.scheduler),
                                 store=store, quick=args.quick)
    text = "\n".join(["witness hierarchy: summary", *hierarchy_report.summary_lines(report),
                      f"wrote {args.out}/report.md (the summary, then every row), report.json, "
                      f"{len(report['plots'])} plots"])
    _emit(args, report, text)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


# -- wiring -------------------------------------------------------------------------------------------------
def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress bars on stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="witness", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def command(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text)
        add_output_options(cmd)
        cmd.set_defaults(handler=handler)
        return cmd

    cmd = command("compile", cmd_compile, "build a construction's network and save it (.npz)")
    # The names are looked up (package metadata, a tenth of a CPU-second) only when this help is shown.
    cmd.add_argument("construction", help="one of: %(known)s").known = _Later(lambda: ", ".join(construction_names()))
    cmd.add_argument("-o", "--output", required=True, help="where to write the network")

    cmd = command("run", cmd_run, "run a saved network on tokens or on random instances")
    cmd.add_argument("file")
    cmd.add_argument("--tokens", help="comma-separated token ids")
    cmd.add_argument("--random", type=int, help="run this many random instances and count the correct ones")
    cmd.add_argument("--seed", type=int, default=0)
    add_arithmetic_options(cmd)

    cmd = command("inspect", cmd_inspect, "print a saved network's layers and budget")
    cmd.add_argument("file")
    add_format_option(cmd)
    cmd.add_argument("--plot", metavar="PNG", help="also draw the residual stream (labelled) and attention of one "
                                                   "input to this image file (needs matplotlib)")
    cmd.add_argument("--tokens", help="with --plot: the input to draw, comma-separated (default: a random one)")
    cmd.add_argument("--graph", metavar="PNG", help="also draw the dataflow as a grid (residual directions x blocks: "
                                                    "which block reads and writes which) to this image file")

    cmd = command("bounds", cmd_bounds, "the theorems' thresholds for depth L and budget Hdp, evaluated exactly")
    cmd.add_argument("--L", type=int, required=True, help="composition depth")
    cmd.add_argument("--Hdp", type=int, help="heads x head dimension x bits")
    cmd.add_argument("--shape", type=int, nargs=3, metavar=("H", "d", "p"), help="the budget's factors")
    cmd.add_argument("--n", type=big_int, nargs="*", default=[],
                     help="prompt length: adds the bounds at this n and the 2-Sum scales; with --construction, the "
                          "query ranges n_1 .. n_{L-1}")
    cmd.add_argument("--construction", help="composition: the budget of the construction for --L --m --n at "
                                            "--format, from its description (no file), and the theorems at its n")
    cmd.add_argument("--m", type=big_int, help="seed range, with --construction (2^k and 2^k-2 allowed)")
    cmd.add_argument("--B", type=int, help="block size of (B,k)-sparse attention (with --n)")
    cmd.add_argument("--network", help="a composition network file: sets n, and reports its Hdp beside the bounds")
    add_format_option(cmd)  # the p of the network's Hdp

    cmd = command("verify", cmd_verify, "check a saved network on every input, on samples, or by Hypothesis search")
    cmd.add_argument("file")
    add_arithmetic_options(cmd)
    how = cmd.add_mutually_exclusive_group(required=True)
    how.add_argument("--exhaustive", action="store_true", help="every input of the family (verified or falsified)")
    how.add_argument("--samples", type=int, metavar="K", help="K seeded random inputs (falsified or unknown)")
    how.add_argument("--hypothesis", action="store_true",
                     help="Hypothesis search, shrinking a failure to a minimal input (falsified or unknown)")
    cmd.add_argument("--seed", type=int, default=0)
    cmd.add_argument("--max-examples", type=int, metavar="N",
                     help=f"inputs Hypothesis generates (default {DEFAULT_MAX_EXAMPLES})")

    cmd = command("min-precision", cmd_min_precision,
                  "the smallest bit count p at which a construction is verified, per format family")
    cmd.add_argument("construction", choices=["composition", "composition_hybrid", "composition_hybrid_small_table",
                                              "two_sum"])
    cmd.add_argument("--L", type=int, help="composition: depth")
    cmd.add_argument("--m", type=int, help="composition: seed range")
    cmd.add_argument("--n", type=int, nargs="*", default=[], help="composition: n_1 .. n_{L-1}; two_sum: the length")
    cmd.add_argument("--M", type=int, help="two_sum: the modulus")
    cmd.add_argument("--t", type=int, help="two_sum: the target")
    cmd.add_argument("--causal", action="store_true", help="two_sum: the causal variant")
    cmd.add_argument("--family", required=True, choices=sorted(FAMILY_SPLITS))
    cmd.add_argument("--semantics", required=True, choices=SEMANTICS)
    cmd.add_argument("--method", default="certify", choices=METHODS,
                     help="certify (default; any size) or exhaustive (every input; small families only)")
    cmd.add_argument("--max-bits", type=int, default=64, help="largest p tried")

    cmd = command("certify", cmd_certify, "prove that a network (or the composition construction at any size) "
                                          "answers every input; write a JSON certificate")
    cmd.add_argument("target", help="a network file, or `composition` with --L --m --n for the parametric proof")
    add_arithmetic_options(cmd)
    cmd.add_argument("--L", type=int, help="composition depth (parametric form)")
    cmd.add_argument("--m", type=int, help="seed range (parametric form)")
    cmd.add_argument("--n", type=int, nargs="*", default=[], help="n_1 .. n_{L-1} (parametric form)")
    cmd.add_argument("--out", metavar="JSON", help="write the certificate here")

    cmd = command("check-certificate", cmd_check_certificate,
                  "re-check a certificate independently against the network it names")
    cmd.add_argument("certificate")
    cmd.add_argument("file", nargs="?", help="the network file (not needed for a parametric certificate)")

    cmd = command("train", cmd_train, "train an architecture from a seeded random initialisation for a fixed "
                                      "number of steps; report its held-out accuracy and save it")
    add_train_options(cmd)

    cmd = command("capacity", cmd_capacity, "train the (L+1)-layer control, L full layers and the hybrids at one "
                                            "budget across table sizes N; accuracy against N log2 N / C")
    cmd.add_argument("--L", type=int, default=1, help="composition depth (default 1)")
    cmd.add_argument("--sizes", type=int, nargs="+", required=True, metavar="N", help="table sizes N")
    cmd.add_argument("--H", type=int, default=1)
    cmd.add_argument("--d-head", type=int, default=4)
    cmd.add_argument("--d-model", type=int, default=32)
    cmd.add_argument("--format", default="fp16", metavar="FMT", help="the format accuracy is measured at")
    cmd.add_argument("--semantics", default="strict", choices=SEMANTICS)
    cmd.add_argument("--seeds", type=int, default=3, help="seeds per point (default 3)")
    cmd.add_argument("--steps", type=int, default=3000)
    cmd.add_argument("--lr", type=float, default=3e-3)
    cmd.add_argument("--mixers", nargs="+", default=["deltanet", "gla"], help="recurrent mixers of the hybrids")
    cmd.add_argument("--linear-per-gap", type=int, default=1)
    cmd.add_argument("--eval-inputs", type=int, default=2048)
    add_hop_weight_option(cmd)
    cmd.add_argument("--out", required=True, metavar="DIR")
    cmd.add_argument("--reuse", nargs="+", metavar="DIR",
                     help="keep these curves' rows at the requested sizes (same protocol; from each, one row is "
                          "retrained first and must match bit for bit) and train only the sizes none of them holds")
    add_engine_options(cmd)

    cmd = command("separation", cmd_separation, "the smallest size at which the (L+1)-layer construction, certified "
                                                "at its p*, has a budget Theorem 1.1 covers; certificate and report")
    cmd.add_argument("--L", type=int, required=True, help="composition depth (1 and 2 fit a laptop)")
    cmd.add_argument("--out", required=True, metavar="DIR", help="folder for certificate.json, separation.json and "
                                                                "separation.md")

    cmd = command("hierarchy", cmd_hierarchy, "certify the constructions, probe weaker architectures within their "
                                              "budget, and write the report (Markdown, JSON, plots)")
    cmd.add_argument("--out", required=True, metavar="DIR", help="folder for report.md, report.json, plots, "
                                                                "networks and certificates")
    cmd.add_argument("--quick", action="store_true", help="a smoke run: the configuration's small `quick` sizes, "
                                                          "a few training steps (a few minutes)")
    cmd.add_argument("--L", type=int, nargs="+", help="only these depths (default: every configured one)")
    cmd.add_argument("--config", metavar="JSON", help="a configuration file (default: the embedded one)")
    stored_or_full = cmd.add_mutually_exclusive_group()
    stored_or_full.add_argument("--full", action="store_true",
                                help="compute everything here: train every network and the capacity curve, and scan "
                                     "every separation from its family's first size (over an hour on 2 cores); "
                                     "writes DIR/trained.json for later replays; the default for --quick and --config")
    stored_or_full.add_argument("--stored", metavar="DIR",
                                help="replay what a --full run wrote to DIR (default for the embedded configuration: "
                                     "the repository's docs/hierarchy): trained networks and the capacity curve, "
                                     "searched here, one network and one capacity point retrained and compared bit "
                                     "for bit; each separation's certificate and coverage re-checked here")
    add_engine_options(cmd)

    # `witness search ARCH`: one subcommand per architecture family, each with `add_search_options`.
    searches = sub.add_parser("search", help="search an architecture within a budget for replayable failures")
    search_sub = searches.add_subparsers(dest="architecture", required=True, parser_class=_Parser)

    def search_command(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        cmd = search_sub.add_parser(name, help=help_text)
        add_search_options(cmd)
        cmd.set_defaults(handler=handler)
        return cmd

    cmd = search_command("hybrid", cmd_search_hybrid, "L_full full-attention layers with recurrent gaps (Theorem 1.1)")
    add_composition_options(cmd)
    cmd.add_argument("--full-layers", type=int, required=True, help="full-attention layers (L-1 for Theorem 1.1)")
    cmd.add_argument("--linear-per-gap", type=int, nargs="+", required=True,
                     help="recurrent layers in each gap: one number for all, or one per gap")
    cmd.add_argument("--mixer", required=True, help="recurrent mixer kind (linear, retnet, deltanet, ...)")

    cmd = search_command("full", cmd_search_full, "a plain stack of causal full-attention layers (CPW)")
    add_composition_options(cmd)
    cmd.add_argument("--layers", type=int, required=True, help="full-attention layers")

    cmd = search_command("sparse", cmd_search_sparse, "one layer of (B,k)-block-sparse attention on 2-Sum "
                                                      "(Theorem 1.2); --weights also takes `natural`, the two_sum "
                                                      "construction's weights under sparse attention")
    cmd.add_argument("--n", type=int, required=True, help="2-Sum length")
    cmd.add_argument("--M", type=int, required=True, help="modulus (token values 0 .. M-1)")
    cmd.add_argument("--t", type=int, default=0, help="target (default 0)")
    cmd.add_argument("--causal", action="store_true", help="the causal variant: only j < i counts")
    cmd.add_argument("--block", type=int, required=True, help="block size B")
    cmd.add_argument("--k", type=int, required=True, help="other blocks each query keeps")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit status 0, 1, 2 or 3 (docs/conventions.md §7). An error is one line on stderr (and with
    --json also one JSON object on stdout), never a traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    was_quiet = quiet()
    # Exact integers at the theorems' scale (`bounds --n 2^1000000`) have more than Python's default 4,300 digits
    # for str(); big_int bounds what comes in (exponents up to 10^6), so every such number is printed in full.
    digits = getattr(sys, "get_int_max_str_digits", lambda: None)()
    if digits is not None:
        sys.set_int_max_str_digits(0)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and args.command != "compile":
            raise CliError(f"unrecognised arguments: {' '.join(extra)}")
        set_quiet(was_quiet or args.quiet)
        return args.handler(args, extra) or 0
    except StandInOverflow as exc:  # the run could not decide: unknown, not bad input
        return _error(str(exc), argv, EXIT_UNKNOWN)
    except WitnessError as exc:
        return _error(str(exc), argv)
    except BrokenPipeError:  # `witness ... | head`: the reader left; say so once, where it can still be read
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("witness: error: the output pipe closed before witness finished writing", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        if "distributed" in sys.modules:  # a sweep was running: its clusters go now, quietly
            from lab.sweep import close_local_clusters

            close_local_clusters()
        print("witness: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        return _error("out of memory (the work exceeds what this machine has; try a smaller size)", argv)
    except Exception as exc:  # a bug in witness, not in the input: still one line, and named as ours
        return _error(f"internal error ({type(exc).__name__}: {exc}); please report it", argv)
    finally:
        set_quiet(was_quiet)
        if digits is not None:
            sys.set_int_max_str_digits(digits)


def _error(message: str, argv: list[str], status: int = EXIT_BAD_INPUT) -> int:
    message = " ".join(message.split())  # one line, whatever the message held
    print(f"witness: {'unknown' if status == EXIT_UNKNOWN else 'error'}: {message}", file=sys.stderr)
    if "--json" in argv:
        print(json.dumps({"error": message, "exit": status}))
    return status


if __name__ == "__main__":
    sys.exit(main())
