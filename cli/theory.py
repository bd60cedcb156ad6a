"""`witness bounds` and `witness separation`: Theorem 1.1's and its neighbours' thresholds for composition,
evaluated exactly, and the separation at the theorem's own scale. Both are about the composition task and its
construction (the one with a parametric description), which they name."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from cli.common import (CliError, add_command, add_format_option, budget_text, check_output_folder, emit,
                        format_from_args, with_meaning)
from cli.options import PARAMETRIC_CONSTRUCTION
from witness.arith import parse_format
from witness.arith.semantics import semantics_text
from witness.io import load


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


def cmd_bounds(args: argparse.Namespace) -> None:
    from verify import theorems as theorem_bounds  # sympy: only the theorems' exact thresholds need it

    if args.construction is not None:
        return bounds_of_construction(args)
    if args.m is not None:
        raise CliError(f"--m goes with --construction {PARAMETRIC_CONSTRUCTION}")
    if len(args.n) > 1:
        raise CliError("--n takes the prompt length (one value); with --construction, the query ranges")
    shape = None if args.shape is None else theorem_bounds.HeadShape(*args.shape)
    if args.Hdp is None and shape is None:
        raise CliError(f"give --Hdp or --shape H d p (or --construction {PARAMETRIC_CONSTRUCTION} --L --m --n "
                       "--format)")
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
    emit(args, report.as_dict(), report.text() + f"\n  (applies: evaluated for Hdp = {Hdp})")


def bounds_of_construction(args: argparse.Namespace) -> None:
    """The construction's budget at FMT from its parametric description (no file, any size) and whether the
    theorems cover it at its own prompt length, in exact integers."""
    from experiments import separation
    from verify.certify import Construction

    name = PARAMETRIC_CONSTRUCTION
    if args.construction != name:
        raise CliError(f"--construction takes {name} (the one with a parametric description)")
    if args.m is None or args.format is None or args.Hdp is not None or args.shape is not None or args.network:
        raise CliError(f"bounds --construction {name} takes --L L --m M [--n N_1 .. N_{{L-1}}] --format FMT")
    target = Construction(args.L, args.m, tuple(args.n))
    fmt = parse_format(args.format)
    budget = separation.budget(target, fmt.bits)
    n = target.task.prompt_length
    cover = separation.covering(args.L, n, budget["Hdp"])
    payload = {"construction": name, "params": {"L": args.L, "m": str(args.m), "n": [str(v) for v in args.n]},
               "format": fmt.name, "prompt_length_log2": separation.confirmed_log2(n), **budget,
               "theorems": {theorem: {**entry, "largest_Hdp": str(entry["largest_Hdp"])}
                            for theorem, entry in cover.items()}}
    lines = [f"{name} construction L = {args.L}: log2 n = {payload['prompt_length_log2']}; at {fmt.name}: "
             f"{budget_text(budget)}"]
    for theorem, entry in cover.items():
        lines.append(f"  {theorem:<12} {entry['condition']}: largest covered Hdp {entry['largest_Hdp']}; "
                     f"this Hdp {budget['Hdp']}: {'covered' if entry['covered'] else 'not covered'}")
    emit(args, payload, "\n".join(lines))


def add_bounds(commands) -> None:
    cmd = add_command(commands, "bounds", cmd_bounds,
                      "the theorems' thresholds for depth L and budget Hdp, evaluated exactly")
    cmd.add_argument("--L", type=int, required=True, help="composition depth")
    cmd.add_argument("--Hdp", type=int, help="heads x head dimension x bits")
    cmd.add_argument("--shape", type=int, nargs=3, metavar=("H", "d", "p"), help="the budget's factors")
    cmd.add_argument("--n", type=big_int, nargs="*", default=[],
                     help="prompt length: adds the bounds at this n and the 2-Sum scales; with --construction, the "
                          "query ranges n_1 .. n_{L-1}")
    cmd.add_argument("--construction", help=f"{PARAMETRIC_CONSTRUCTION}: the budget of the construction for --L --m "
                                            "--n at --format, from its description (no file), and the theorems at "
                                            "its n")
    cmd.add_argument("--m", type=big_int, help="seed range, with --construction (2^k and 2^k-2 allowed)")
    cmd.add_argument("--B", type=int, help="block size of (B,k)-sparse attention (with --n)")
    cmd.add_argument("--network", help="a composition network file: sets n, and reports its Hdp beside the bounds")
    add_format_option(cmd)  # the p of the network's Hdp


# -- separation ---------------------------------------------------------------------------------------------
def cmd_separation(args: argparse.Namespace) -> None:
    from experiments import separation  # sympy, through the theorems' bounds

    if args.L not in separation.FITS:
        raise CliError(f"--L {args.L}: the separation is computed for L in {list(separation.FITS)} on a machine like "
                       "this one (L = 4 starts near log2 n = 7.3e6, d_model 6.6e7; see docs/separation.md)")

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
    emit(args, with_meaning(brief), f"L = {args.L}: k = {summary['k']} (log2 n = {summary['prompt_length_log2']}), "
                                    f"certified at p* = {summary['p']} ({summary['format']}, "
                                    f"{semantics_text(summary['semantics'])}); Hdp = {summary['Hdp']} <= "
                                    f"{summary['theorem']['largest_Hdp']} = floor(n^(2^-{4 * args.L + 2})): covered\n"
                                    f"wrote {out}/certificate.json, separation.json, separation.md")


def add_separation(commands) -> None:
    cmd = add_command(commands, "separation", cmd_separation, "the smallest size at which the (L+1)-layer "
                                                              "construction, certified at its p*, has a budget "
                                                              "Theorem 1.1 covers; certificate and report")
    cmd.add_argument("--L", type=int, required=True,
                     help="composition depth (1 and 2 take seconds, 3 about 16 CPU-minutes and 8 GiB)")
    cmd.add_argument("--out", required=True, metavar="DIR", help="folder for certificate.json, separation.json and "
                                                                "separation.md")
