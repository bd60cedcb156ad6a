"""The `witness` command line: the one face that wires the core, the constructions and the verifier together.

Every subcommand prints text, or one JSON object with `--json`. Bad input is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from typing import Any

import numpy as np

from verify import check
from witness.errors import InputError, ParameterError, WitnessError
from witness.io import load
from witness.registry import builder, compile, construction_names

EXIT_BAD_INPUT = 2


class CliError(WitnessError):
    """A command-line usage problem."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage block; we promise one line
        raise CliError(message)


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
    network = compile(args.construction, **construction_options(args.construction, extra))
    network.save(args.output)
    budget = network.budget()
    _emit(args, {"network": args.output, "construction": args.construction, "params": network.meta.params,
                 **budget.as_dict()},
          f"wrote {args.output}: {args.construction} {network.meta.params}, {len(network.layers)} layers, "
          f"d_model {network.d_model}")


# -- run ----------------------------------------------------------------------------------------------------
def parse_tokens(text: str) -> np.ndarray:
    try:
        return np.array([int(part) for part in text.split(",")], dtype=np.int64)
    except ValueError:
        raise InputError(f"--tokens must be comma-separated integers, got {text!r}") from None


def cmd_run(args: argparse.Namespace, extra: list[str]) -> None:
    network = load(args.file)
    if (args.tokens is None) == (args.random is None):
        raise CliError("give exactly one of --tokens or --random")
    if args.tokens is not None:
        tokens = parse_tokens(args.tokens)
        if network.task is not None:
            network.task.check_tokens(tokens)
        output = network.run(tokens)
        _emit(args, {"output": output}, str(output) if isinstance(output, int) else " ".join(map(str, output)))
        return
    if args.random < 1:
        raise CliError(f"--random must be at least 1, got {args.random}")
    result = check.sampled(network, args.random, args.seed)
    correct = result.checked - result.failures
    payload = {"correct": correct, "total": result.checked, "seed": args.seed, **result.arithmetic}
    if result.counterexample is not None:
        payload["counterexample"] = {k: v for k, v in result.as_dict()["counterexample"].items() if k != "trace"}
    _emit(args, payload, f"{correct}/{result.checked} random inputs correct (seed {args.seed}, "
                         f"{result.arithmetic['format']})")


# -- inspect ------------------------------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace, extra: list[str]) -> None:
    network = load(args.file)
    budget = network.budget()
    layers = []
    for l, layer in enumerate(network.layers):
        attn = layer.mixer
        layers.append({"index": l, "mixer": attn.kind, "causal": attn.causal, "H": attn.n_heads,
                       "d_head": attn.d_head, "mlp": None if layer.mlp is None else layer.mlp.d_mlp})
    payload = {"task": network.meta.task, "params": network.meta.params, "construction": network.meta.construction,
               "claimed_format": network.meta.claimed_format, "layers": layers, "n_ctx": network.n_ctx,
               **budget.as_dict()}
    lines = [f"task {network.meta.task} {network.meta.params}  construction {network.meta.construction}",
             f"context {network.n_ctx} tokens, vocabulary {network.d_vocab} -> {network.d_vocab_out}"]
    for entry in layers:
        mlp = f"mlp d_mlp={entry['mlp']}" if entry["mlp"] is not None else "no mlp"
        causal = "causal" if entry["causal"] else "bidirectional"
        lines.append(f"  blocks.{entry['index']}: {causal} {entry['mixer']} H={entry['H']} "
                     f"d_head={entry['d_head']}, {mlp}")
    lines += ["budget (p = bits of " + str(network.meta.claimed_format or "fp64") + "):", budget.table()]
    _emit(args, payload, "\n".join(lines))


# -- wiring -------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="witness", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def command(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("--json", action="store_true", help="print one JSON object")
        cmd.set_defaults(handler=handler)
        return cmd

    cmd = command("compile", cmd_compile, "build a construction's network and save it (.npz)")
    cmd.add_argument("construction", help=f"one of: {', '.join(construction_names())}")
    cmd.add_argument("-o", "--output", required=True, help="where to write the network")

    cmd = command("run", cmd_run, "run a saved network on tokens or on random instances")
    cmd.add_argument("file")
    cmd.add_argument("--tokens", help="comma-separated token ids")
    cmd.add_argument("--random", type=int, help="run this many random instances and count the correct ones")
    cmd.add_argument("--seed", type=int, default=0)

    cmd = command("inspect", cmd_inspect, "print a saved network's layers and budget")
    cmd.add_argument("file")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and args.command != "compile":
            raise CliError(f"unrecognised arguments: {' '.join(extra)}")
        args.handler(args, extra)
    except WitnessError as exc:
        print(f"witness: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("witness: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
