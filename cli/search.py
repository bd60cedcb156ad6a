"""`witness search hybrid|full|sparse`: search an architecture within a budget for replayable failures.

Each search is about one theorem, and so about one task: `hybrid` (Theorem 1.1's negative side) and `full` (CPW's)
probe composition, `sparse` (Theorem 1.2's) probes 2-Sum. That task's options come from its record
(`cli.options`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.common import (EXIT_FALSIFIED, Parser, add_output_options, check_output_file, emit, one_or_each,
                        with_meaning)
from cli.options import add_task_options, task_from_args
from lab.rates import DEVICES
from verify.defaults import PAIR_PREFIXES, SEARCH_SAMPLES
from witness.arith import Arithmetic, arithmetic, parse_format
from witness.arith.formats import FORMAT_SYNTAX
from witness.arith.semantics import SEMANTICS, semantics_text
from witness.tasks import record_of


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
             f"in all ({report.format} {semantics_text(report.semantics)}; H {budget['H']}, d {budget['d']}, "
             f"p {budget['p']}, Hdp {budget['Hdp']}, state bits {budget.get('state_bits', 0)})"]
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


def emit_search(args: argparse.Namespace, report) -> int:
    """Exit 1 when the search found a failure or an indistinguishable pair (each confirmed by a fresh run)."""
    emit(args, with_meaning(report.as_dict()), search_text(report))
    return EXIT_FALSIFIED if report.failures or report.pairs else 0


def check_search_outputs(args: argparse.Namespace) -> None:
    if args.save_network is not None:
        check_output_file(Path(args.save_network), "--save-network")


def cmd_search_hybrid(args: argparse.Namespace) -> int:
    from verify.search.hybrid import search_hybrid

    check_search_outputs(args)
    report = search_hybrid(task_from_args(args), full_layers=args.full_layers,
                           linear_per_gap=one_or_each(args.linear_per_gap), mixer=args.mixer, H=args.H,
                           d_head=args.d_head, d_model=args.d_model, arith=search_arithmetic(args),
                           weights=args.weights, seed=args.seed, save_network=args.save_network,
                           samples=args.samples, pair_prefixes=args.pair_prefixes, device=args.device)
    return emit_search(args, report)


def cmd_search_full(args: argparse.Namespace) -> int:
    from verify.search.hybrid import search_full

    check_search_outputs(args)
    report = search_full(task_from_args(args), layers=args.layers, H=args.H, d_head=args.d_head,
                         d_model=args.d_model, arith=search_arithmetic(args), weights=args.weights, seed=args.seed,
                         save_network=args.save_network, samples=args.samples,
                         pair_prefixes=args.pair_prefixes, device=args.device)
    return emit_search(args, report)


def cmd_search_sparse(args: argparse.Namespace) -> int:
    from verify.search.sparse import search_sparse

    check_search_outputs(args)
    report = search_sparse(task_from_args(args), block=args.block, k=args.k, H=args.H, d_head=args.d_head,
                           d_model=args.d_model, arith=search_arithmetic(args), weights=args.weights,
                           seed=args.seed, save_network=args.save_network, device=args.device)
    return emit_search(args, report)


def search_command(searches, name: str, handler, help_text: str, task: str) -> argparse.ArgumentParser:
    """`witness search NAME`: what every search shares (the head shape, the arithmetic, where the weights come
    from) and the options of the task it probes."""
    parser = searches.add_parser(name, help=help_text)
    parser.set_defaults(handler=handler, task=task)
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
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="with --weights trained: where the torch module trains (default cpu; cuda where torch "
                             "sees a GPU)")
    parser.add_argument("--save-network", metavar="FILE", help="write the searched network here (replay findings "
                                                               "with `witness run FILE --tokens ...`)")
    add_task_options(parser, record_of(task))
    return parser


def add_effort_options(parser: argparse.ArgumentParser) -> None:
    """How hard `search hybrid|full` search."""
    parser.add_argument("--samples", type=int, default=SEARCH_SAMPLES,
                        help=f"random inputs when the family is too large to run whole (default {SEARCH_SAMPLES})")
    parser.add_argument("--pair-prefixes", type=int, default=PAIR_PREFIXES,
                        help=f"random prefixes per fixed suffix in the pair search (default {PAIR_PREFIXES})")


def add_search(commands) -> None:
    """`witness search ARCH`: one subcommand per architecture family."""
    searches = commands.add_parser("search", help="search an architecture within a budget for replayable failures")
    search_sub = searches.add_subparsers(dest="architecture", required=True, parser_class=Parser)

    cmd = search_command(search_sub, "hybrid", cmd_search_hybrid,
                         "L_full full-attention layers with recurrent gaps (Theorem 1.1)", task="composition")
    add_effort_options(cmd)
    cmd.add_argument("--full-layers", type=int, required=True, help="full-attention layers (L-1 for Theorem 1.1)")
    cmd.add_argument("--linear-per-gap", type=int, nargs="+", required=True,
                     help="recurrent layers in each gap: one number for all, or one per gap")
    cmd.add_argument("--mixer", required=True, help="recurrent mixer kind (linear, retnet, deltanet, ...)")

    cmd = search_command(search_sub, "full", cmd_search_full, "a plain stack of causal full-attention layers (CPW)",
                         task="composition")
    add_effort_options(cmd)
    cmd.add_argument("--layers", type=int, required=True, help="full-attention layers")

    cmd = search_command(search_sub, "sparse", cmd_search_sparse,
                         "one layer of (B,k)-block-sparse attention on 2-Sum (Theorem 1.2); --weights also takes "
                         "`natural`, the two_sum construction's weights under sparse attention", task="two_sum")
    cmd.add_argument("--block", type=int, required=True, help="block size B")
    cmd.add_argument("--k", type=int, required=True, help="other blocks each query keeps")
