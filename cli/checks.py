"""`witness verify`, `min-precision`, `certify` and `check-certificate`: check a network on inputs, find the fewest
bits at which a construction is verified, prove every input, and re-check a proof independently."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cli.common import (EXIT_FALSIFIED, EXIT_UNKNOWN, CliError, Later, Parser, add_arithmetic_options, add_command,
                        add_output_options, arithmetic_from_args, budget_text, check_input_file, check_output_file,
                        emit, refuse_endless_count, with_meaning)
from cli.options import PARAMETRIC_CONSTRUCTION, NamedConstruction, add_signature_options
from verify.defaults import DEFAULT_MAX_EXAMPLES, FAMILY_SPLITS, METHODS
from verify.result import Status
from witness.arith import arithmetic, parse_format
from witness.arith.semantics import SEMANTICS, semantics_text
from witness.io import load
from witness.registry import builder, compile, construction_names


# -- verify -------------------------------------------------------------------------------------------------
def result_payload(result) -> dict[str, Any]:
    """status, format, semantics, p, method, checked, failures, counterexample (tokens, expected, output,
    trace) and the method's detail (seed, budget, ...)."""
    out = result.as_dict()
    return with_meaning({"status": out["status"], **out["arithmetic"], "method": out["method"],
                         "checked": out["checked"], "failures": out["failures"],
                         "counterexample": out["counterexample"], "detail": out["detail"]})


def result_text(result) -> str:
    described = result.arithmetic
    lines = [f"{result.status.value}: {result.method} check, {result.checked} inputs run, {result.failures} wrong "
             f"({described['format']}, {semantics_text(described['semantics'])}, p = {described['p']})"]
    if result.counterexample is not None:
        example = result.counterexample
        lines.append(f"counterexample: tokens {','.join(map(str, example.tokens))}; expected {example.expected}, "
                     f"got {example.output}")
    if "rests_on" in result.detail:
        lines.append(f"rests on: {result.detail['rests_on']}")
    return "\n".join(lines)


def cmd_verify(args: argparse.Namespace) -> int:
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
    emit(args, result_payload(result), result_text(result))
    return EXIT_FALSIFIED if result.status is Status.FALSIFIED else 0


def add_verify(commands) -> None:
    cmd = add_command(commands, "verify", cmd_verify,
                      "check a saved network on every input, on samples, or by Hypothesis search")
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


# -- min-precision ------------------------------------------------------------------------------------------
def precision_checker(args: argparse.Namespace):
    """The checker `min-precision` searches with (a `verify.precision.Checker`): the parametric construction's,
    which certifies any size without building the network, else one on the construction's compiled network."""
    from verify import precision

    if args.construction == PARAMETRIC_CONSTRUCTION:
        return precision.composition_checker(**args.construction_options, method=args.method)
    return precision.network_checker(compile(args.construction, **args.construction_options), args.method)


def cmd_min_precision(args: argparse.Namespace) -> int:
    from verify import precision

    case = precision.Case(precision_checker(args), args.family, args.semantics, args.max_bits)
    found = precision.table([case])[0].result
    payload = with_meaning({**found.as_dict(), "method": args.method})
    if found.p is None:
        text = (f"unknown: {args.method} verifies no {args.family} format of at most {args.max_bits} bits under "
                f"{semantics_text(args.semantics)} ({len(found.trials)} checks)")
    else:
        split = ", ".join(f"{name} {bits}" for name, bits in found.split.items())
        below = "; ".join(f"{trial.format} {trial.status}" for trial in found.below) or "no runnable split"
        text = (f"p* = {found.p}: {found.format} ({split}) {args.method}-verified under "
                f"{semantics_text(args.semantics)}\n"
                f"at p* - 1 = {found.p - 1}: {below}; every smaller p was tried as well")
        if args.method == "certify":
            text += ("\ncertify is sound, not complete: p* is an upper bound on the fewest bits at which the network "
                     "is correct")
    emit(args, payload, text)
    return EXIT_UNKNOWN if found.p is None else 0


def precision_parser(name: str, prog: str) -> tuple[Parser, list[str]]:
    """`witness min-precision NAME`'s parser, and the names of the construction's options: those of the parametric
    construction's description (`certify NAME --L --m --n`), else those of its builder (as `compile NAME` takes
    them)."""
    if name == PARAMETRIC_CONSTRUCTION:
        from verify.certify import Construction  # the verifier's start-up, paid only where it is named

        schema = Construction
    else:
        schema = builder(name)
    parser = Parser(prog=prog)
    add_output_options(parser)
    names = add_signature_options(parser.add_argument_group(f"options of {name}"), schema)
    parser.add_argument("--family", required=True, choices=sorted(FAMILY_SPLITS))
    parser.add_argument("--semantics", required=True, choices=SEMANTICS)
    parser.add_argument("--method", default="certify", choices=METHODS,
                        help="certify (default; any size) or exhaustive (every input; small families only)")
    parser.add_argument("--max-bits", type=int, default=64, help="largest p tried")
    return parser, names


def add_min_precision(commands) -> None:
    # --json and --quiet go with the construction's parser, after its name.
    cmd = commands.add_parser("min-precision", help="the smallest bit count p at which a construction is verified, "
                                                    "per format family")
    cmd.set_defaults(handler=cmd_min_precision)
    cmd.add_argument("construction", action=NamedConstruction, make_parser=precision_parser,
                     metavar="CONSTRUCTION",
                     help="one of: %(known)s; then its options (`witness min-precision CONSTRUCTION --help`), "
                          "--family, --semantics, --method, --max-bits"
                     ).known = Later(lambda: ", ".join(construction_names()))


# -- certify, check-certificate ---------------------------------------------------------------------------
def cmd_certify(args: argparse.Namespace) -> int:
    """`certify FILE` or `certify composition --L .. --m .. --n ..`; exit 0 when verified (the certificate goes to
    --out), 3 when unknown (nothing is written)."""
    from verify import checker
    from verify.certify import Construction, certify

    if args.out is not None:
        check_output_file(Path(args.out), "--out")
    if args.L is not None or args.target == PARAMETRIC_CONSTRUCTION and args.m is not None:
        if args.target != PARAMETRIC_CONSTRUCTION or args.L is None or args.m is None:
            raise CliError(f"the parametric form is: certify {PARAMETRIC_CONSTRUCTION} --L L --m M "
                           "[--n N_1 .. N_{L-1}]")
        result = certify(Construction(args.L, args.m, tuple(args.n)),
                         arithmetic(parse_format(args.format or "fp64"), args.semantics))
    else:
        if args.n:
            raise CliError(f"--n belongs to the parametric form: certify {PARAMETRIC_CONSTRUCTION} --L L --m M "
                           "--n ...")
        network = load(args.target)
        result = certify(network, arithmetic_from_args(args, network))
    described = f"certify ({result.arithmetic['format']}, {semantics_text(result.arithmetic['semantics'])})"
    if result.status is not Status.VERIFIED:
        emit(args, with_meaning({"status": result.status.value, **result.arithmetic, "method": "certify",
                                 "reason": result.detail["reason"], "certificate": None}),
             f"{result.status.value}: {described}: {result.detail['reason']}")
        return EXIT_UNKNOWN
    if args.out is not None:
        try:
            checker.write_certificate(result.detail["certificate"], args.out)
        except OSError as exc:
            raise CliError(f"--out {args.out}: cannot write ({exc.strerror})") from None
    budget = result.detail["budget"]
    emit(args, with_meaning({"status": "verified", **result.arithmetic, "method": "certify",
                             "inputs_log2": result.detail["inputs_log2"], "budget": budget,
                             "certificate": args.out}),
         f"verified: {described}, every input of the family (2^{result.detail['inputs_log2']} inputs); "
         f"{budget_text(budget)}" + (f"\nwrote {args.out}" if args.out else ""))
    return 0


def add_certify(commands) -> None:
    cmd = add_command(commands, "certify", cmd_certify,
                      f"prove that a network (or the {PARAMETRIC_CONSTRUCTION} construction at any size) answers "
                      "every input; write a JSON certificate")
    cmd.add_argument("target", help=f"a network file, or `{PARAMETRIC_CONSTRUCTION}` with --L --m --n for the "
                                    "parametric proof")
    add_arithmetic_options(cmd)
    # The parametric description's fields (verify.certify.Construction), written out: importing it to read them
    # would cost `witness --help` the verifier's start-up.
    cmd.add_argument("--L", type=int, help="composition depth (parametric form)")
    cmd.add_argument("--m", type=int, help="seed range (parametric form)")
    cmd.add_argument("--n", type=int, nargs="*", default=[], help="n_1 .. n_{L-1} (parametric form)")
    cmd.add_argument("--out", metavar="JSON", help="write the certificate here")


def cmd_check_certificate(args: argparse.Namespace) -> None:
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
    emit(args, with_meaning({"status": "confirmed", **summary}),
         f"confirmed: {args.certificate} ({summary['task']} {params_text(summary['params'])}, {summary['format']}, "
         f"{semantics_text(summary['semantics'])}; 2^{summary['inputs_log2']} inputs; "
         f"{budget_text(summary['budget'])})"
         + ("" if "covered" not in summary else
            f"; Theorem 1.1 covers this budget: {'yes' if summary['covered'] else 'no'}"))


def params_text(params: dict) -> str:
    """A claim's parameters for one line: an integer past 2^64 as 2^k when it is one, else by its digit count (the
    L = 2 separation's m has 6,208 digits; --json has every one)."""
    def short(value):
        if isinstance(value, list):
            return "[" + ", ".join(str(short(v)) for v in value) + "]"
        if not isinstance(value, int) or isinstance(value, bool) or value.bit_length() <= 64:
            return value
        if value & (value - 1) == 0:
            return f"2^{value.bit_length() - 1}"
        return f"<{len(str(value)) if value.bit_length() < 13_000 else 'many'}-digit integer>"

    return "{" + ", ".join(f"{key}: {short(value)}" for key, value in params.items()) + "}"


def add_check_certificate(commands) -> None:
    cmd = add_command(commands, "check-certificate", cmd_check_certificate,
                      "re-check a certificate independently against the network it names")
    cmd.add_argument("certificate")
    cmd.add_argument("file", nargs="?", help="the network file (not needed for a parametric certificate)")
