"""`witness compile`, `run` and `inspect`: build a construction's network, run a saved one, show its layers and
budget."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from cli.common import (EXIT_FALSIFIED, CliError, Later, add_arithmetic_options, add_command, add_format_option,
                        arithmetic_from_args, check_output_file, emit, format_from_args, refuse_endless_count,
                        with_meaning)
from cli.options import construction_options
from witness.arith.semantics import semantics_text
from witness.errors import InputError
from witness.execute import run as execute_run
from witness.generate import NOT_GENERATED, generate, generated_count
from witness.io import load
from witness.registry import compile, construction_names


def parse_tokens(text: str) -> np.ndarray:
    try:
        return np.array([int(part) for part in text.split(",")], dtype=np.int64)
    except (ValueError, OverflowError):  # OverflowError: an id beyond int64
        raise InputError(f"--tokens must be comma-separated 64-bit integers, got {text!r}") from None


# -- compile ------------------------------------------------------------------------------------------------
def cmd_compile(args: argparse.Namespace) -> None:
    check_output_file(Path(args.output), "-o")
    network = compile(args.construction, **construction_options(args.construction, args.construction_argv))
    network.save(args.output)
    budget = network.budget()
    emit(args, {"network": args.output, "construction": args.construction, "params": network.meta.params,
                **budget.as_dict()},
         f"wrote {args.output}: {args.construction} {network.meta.params}, {len(network.layers)} layers, "
         f"d_model {network.d_model}")


def add_compile(commands) -> None:
    cmd = add_command(commands, "compile", cmd_compile, "build a construction's network and save it (.npz)")
    cmd.set_defaults(reads_construction_options=True)
    # The names are looked up (package metadata, a tenth of a CPU-second) only when this help is shown.
    cmd.add_argument("construction", help="one of: %(known)s").known = Later(lambda: ", ".join(construction_names()))
    cmd.add_argument("-o", "--output", required=True, help="where to write the network")


# -- run ----------------------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
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
        count = generated_count(network)
        if count:
            emit_generation(args, generate(network, tokens, count, arith))
            return 0
        predictions = execute_run(network, tokens, arith).predictions[0]
        output = int(predictions[0]) if network.readout.read == "last" else [int(v) for v in predictions]
        emit(args, {"output": output}, str(output) if isinstance(output, int) else " ".join(map(str, output)))
        return 0
    if args.random < 1:
        raise CliError(f"--random must be at least 1, got {args.random}")
    refuse_endless_count(network, arith, args.random, "--random")
    from verify import check

    result = check.sampled(network, args.random, args.seed, arith)
    correct = result.checked - result.failures
    payload = with_meaning({"correct": correct, "total": result.checked, "asked": args.random, "seed": args.seed,
                            **result.arithmetic})
    text = (f"{correct}/{result.checked} random inputs correct (seed {args.seed}, {result.arithmetic['format']} "
            f"{semantics_text(result.arithmetic['semantics'])})")
    if "rests_on" in result.detail:  # a theory run stands in float64 for the exact inside of a block
        payload["rests_on"] = result.detail["rests_on"]
        text += f"\nrests on: {result.detail['rests_on']}"
    if "stopped_by_overflow" in result.detail:
        payload["stopped_by_overflow"] = result.detail["stopped_by_overflow"]
        text += (f"; stopped after {result.checked} of {args.random} inputs: a run overflowed "
                 f"({result.detail['stopped_by_overflow']})")
    if result.counterexample is not None:
        payload["counterexample"] = {k: v for k, v in result.as_dict()["counterexample"].items() if k != "trace"}
    emit(args, payload, text)
    return EXIT_FALSIFIED if result.failures else 0


def emit_generation(args: argparse.Namespace, generation) -> None:
    """A generating network's answer on one input: the generated ids, the last of them as `output` (the task's
    answer; -1 when a tie stopped generation) and `stopped_by_tie`, the 0-based step a tie stopped (null if none)."""
    generated = generation.generated(0)
    stop = int(generation.stopped_by_tie[0])
    stopped = None if stop == NOT_GENERATED else stop
    output = generated[-1] if stopped is None else NOT_GENERATED
    text = f"generated {' '.join(map(str, generated)) or 'nothing'}; "
    text += f"answer {output}" if stopped is None else f"a tie at step {stopped} (0-based) stopped generation"
    emit(args, {"generated": generated, "output": output, "stopped_by_tie": stopped}, text)


def add_run(commands) -> None:
    cmd = add_command(commands, "run", cmd_run, "run a saved network on tokens or on random instances")
    cmd.add_argument("file")
    cmd.add_argument("--tokens", help="comma-separated token ids")
    cmd.add_argument("--random", type=int, help="run this many random instances and count the correct ones")
    cmd.add_argument("--seed", type=int, default=0)
    add_arithmetic_options(cmd)


# -- inspect ------------------------------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace) -> None:
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
    emit(args, payload, "\n".join(lines))


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


def add_inspect(commands) -> None:
    cmd = add_command(commands, "inspect", cmd_inspect, "print a saved network's layers and budget")
    cmd.add_argument("file")
    add_format_option(cmd)
    cmd.add_argument("--plot", metavar="PNG", help="also draw the residual stream (labelled) and attention of one "
                                                   "input to this image file (needs matplotlib)")
    cmd.add_argument("--tokens", help="with --plot: the input to draw, comma-separated (default: a random one)")
    cmd.add_argument("--graph", metavar="PNG", help="also draw the dataflow as a grid (residual directions x blocks: "
                                                    "which block reads and writes which) to this image file")
