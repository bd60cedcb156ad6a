"""`witness train` (any registered task, any architecture kind) and `witness capacity` (trained architectures across
table sizes): both train with `lab.train.train` from seeded random initialisations."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cli.common import (CliError, add_command, add_engine_options, check_output_file, check_output_folder, emit,
                        one_or_each)
from cli.options import add_task_commands, task_from_args
from lab.architectures import KINDS
from lab.rates import DEVICES, SWEEP_FRACTION, sweep_steps
from witness.arith.semantics import SEMANTICS


def add_training_options(parser: argparse.ArgumentParser) -> None:
    """Shared by `train` and `capacity`: both train with lab.train.train."""
    parser.add_argument("--hop-weight", type=float,
                        help="weight of the intermediate-hop targets, for tasks that have them (default "
                             "lab.train.DEFAULT_HOP_WEIGHT, 1; 0 turns them off; none for chain-of-thought tasks, "
                             "whose hops are their generated tokens)")
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where the torch module trains (default cpu; cuda where torch sees a GPU, with other "
                             "weights than cpu's: its kernels round otherwise); accuracy is measured on the CPU")


# -- train --------------------------------------------------------------------------------------------------
def correct_means(task) -> str:
    """What an input counted correct by `lab.train.accuracy` means, for the JSON and the text."""
    count = getattr(task, "generated_tokens", 0)
    if count:
        return (f"greedy generation produces all {count} answer tokens (each step's unique argmax; a tie stops "
                "generation and counts wrong)")
    return "every read position's unique argmax is the answer"


def cmd_train(args: argparse.Namespace) -> None:
    """Train from a seeded random initialisation for exactly --steps steps and save the network; the accuracy is
    the float64 executor's on held-out inputs (by greedy generation for a task answered by generated tokens)."""
    output = Path(args.output)
    check_output_file(output, "-o")  # before torch is even imported
    from lab import train
    from lab.architectures import architecture_of_kind

    task = task_from_args(args)
    train.require_trainable(task)
    generated = getattr(task, "generated_tokens", 0)
    architecture = architecture_of_kind(
        args.arch, task, H=args.H, d_head=args.d_head, d_model=args.d_model, mlp_ratio=args.mlp_ratio,
        layers=args.layers, full_layers=args.full_layers, mixer=args.mixer, block=args.block, k=args.k,
        linear_per_gap=None if args.linear_per_gap is None else one_or_each(args.linear_per_gap))
    options = {"batch_size": args.batch_size, "warmup": args.warmup, "hop_weight": args.hop_weight,
               "device": args.device}
    steps = train.DEFAULT_STEPS if args.steps is None else args.steps
    sweep, lr = None, args.lr if args.lr is not None else train.DEFAULT_LR
    if args.lr_sweep:
        sweep = train.sweep_lr(architecture, task, steps=sweep_steps(steps), seed=args.seed, lrs=args.lr_sweep,
                               **options)
        lr = sweep.lr
    network, report = train.train(architecture, task, steps=steps, seed=args.seed, lr=lr, **options)
    network.save(output)
    scope = "every input" if report.exhaustive else f"{report.eval_inputs} held-out random inputs"
    payload = {"network": str(output), "task": task.name, "params": task.params(),
               "layers": [spec.mixer for spec in architecture.layers],
               "budget": network.budget(64).as_dict(),
               "accuracy": {"value": report.accuracy, "inputs": report.eval_inputs, "exhaustive": report.exhaustive,
                            "format": "fp64", "semantics": "strict", "correct_means": correct_means(task)},
               **{key: value for key, value in report.as_dict().items() if key not in ("accuracy", "history")},
               **({"generated_tokens": generated, "teacher_forced": True} if generated else {}),
               "learning_curve": [{"step": step, "loss": loss, "accuracy_float32": acc}
                                  for step, loss, acc in report.history],
               "lr_sweep": None if sweep is None else sweep.as_dict()}
    chosen = "" if sweep is None else (f" (chosen by a {sweep.steps}-step sweep: "
                                       + ", ".join(f"{rate:g} -> {acc:.3f}" for rate, acc in sweep.tried) + ")")
    emit(args, payload, f"accuracy {report.accuracy:.4f} on {scope} (fp64 executor, strict; correct = "
                        f"{correct_means(task)})\n{report.steps} steps, lr {lr:g}{chosen}, seed {report.seed}, "
                        f"final loss {report.final_loss:.4g}, {report.seconds:.1f} s\nwrote {output}")


def add_train_options(cmd: argparse.ArgumentParser) -> None:
    """What `witness train TASK` takes besides the task's own options: the architecture and the training."""
    cmd.add_argument("--arch", required=True, choices=list(KINDS))
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
                     help=f"first train steps/{SWEEP_FRACTION} steps at each of these and keep the best on a "
                          "validation stream")
    cmd.add_argument("--batch-size", type=int, default=64)
    cmd.add_argument("--warmup", type=int, help="warm-up steps (default steps / 20)")
    add_training_options(cmd)
    cmd.add_argument("-o", "--output", required=True, help="where to write the trained network")


def add_train(commands) -> None:
    # --json and --quiet go with each task's options (add_task_commands), after the task's name.
    cmd = commands.add_parser("train", help="train an architecture from a seeded random initialisation for a fixed "
                                            "number of steps; report its held-out accuracy and save it")
    cmd.set_defaults(handler=cmd_train)
    add_task_commands(cmd, add_train_options)


# -- capacity -----------------------------------------------------------------------------------------------
#: `capacity --seeds`: more than this many is beyond any curve one command should train.
MAX_CAPACITY_SEEDS = 1000


def cmd_capacity(args: argparse.Namespace) -> None:
    out = Path(args.out)
    check_output_folder(out, "--out")  # before torch and dask are even imported
    if args.seeds > MAX_CAPACITY_SEEDS:
        raise CliError(f"--seeds {args.seeds}: each seed trains one network per size and architecture; give at most "
                       f"{MAX_CAPACITY_SEEDS}")
    from experiments import capacity, capacity_report
    from lab.sweep import Engine

    spec = capacity.CapacitySpec(L=args.L, sizes=tuple(args.sizes), H=args.H, d_head=args.d_head,
                                 d_model=args.d_model, format=args.format, semantics=args.semantics,
                                 seeds=tuple(range(args.seeds)), steps=args.steps, lr=args.lr,
                                 mixers=tuple(args.mixers), linear_per_gap=args.linear_per_gap,
                                 eval_inputs=args.eval_inputs, hop_weight=args.hop_weight, mlp_ratio=args.mlp_ratio,
                                 d_heads=tuple(args.d_heads or ()), lr_sweep=tuple(args.lr_sweep or ()),
                                 judge_formats=tuple(args.judge_formats or ()), device=args.device)
    if args.device != "cpu":  # refused here, in one line, rather than in every job
        from lab.step import training_device

        training_device(args.device)
    stored = []
    for folder in args.reuse or ():
        source = Path(folder) / "capacity.json"
        try:
            stored.append(json.loads(source.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise CliError(f"--reuse: cannot read {source} ({exc})") from None
    curve = capacity.capacity(spec, Engine(args.workers, args.scheduler), tuple(stored))
    try:
        capacity_report.write(curve, out)
    except OSError as exc:  # checked before the work; a disk that filled up since
        raise CliError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    emit(args, curve, capacity_report.markdown(curve) + f"\nwrote {out}/capacity.md, capacity.json, capacity.png")


def add_capacity(commands) -> None:
    cmd = add_command(commands, "capacity", cmd_capacity, "train the (L+1)-layer control, L full layers and the "
                                                          "hybrids at one budget across table sizes N; accuracy "
                                                          "against N log2 N / C")
    cmd.add_argument("--L", type=int, default=1, help="composition depth (default 1)")
    cmd.add_argument("--sizes", type=int, nargs="+", required=True, metavar="N", help="table sizes N")
    cmd.add_argument("--H", type=int, default=1)
    cmd.add_argument("--d-head", type=int, default=4, help="head width; with --d-heads, the one that fixes the "
                                                             "budget's Hdp (default 4)")
    cmd.add_argument("--d-heads", type=int, nargs="+", metavar="D",
                     help="train every architecture at each of these head widths, all of the budget's Hdp, whose "
                          "d is max(d_head, ceil(d_model / H)) (default: --d-head alone)")
    cmd.add_argument("--d-model", type=int, default=32)
    cmd.add_argument("--format", default="fp16", metavar="FMT", help="the format accuracy is measured at")
    cmd.add_argument("--judge-formats", nargs="+", metavar="FMT",
                     help="also measure every row at these formats, and judge each point at the one of fewest bits "
                          "at which its control learned on every seed (e.g. the construction's p* and a few above)")
    cmd.add_argument("--semantics", default="strict", choices=SEMANTICS)
    cmd.add_argument("--seeds", type=int, default=3, help="seeds per point (default 3)")
    cmd.add_argument("--steps", type=int, default=3000)
    cmd.add_argument("--lr", type=float, default=3e-3, help="peak learning rate, without --lr-sweep (default 3e-3)")
    cmd.add_argument("--lr-sweep", type=float, nargs="+", metavar="LR",
                     help=f"each point first trains steps/{SWEEP_FRACTION} steps at each of these and keeps the most "
                          "accurate on a validation stream; the same sweep for every architecture, the choice in each "
                          "row")
    cmd.add_argument("--mlp-ratio", type=int, default=0, metavar="R",
                     help="an MLP of width R x d_model after every layer of every architecture (default 0: none)")
    cmd.add_argument("--mixers", nargs="+", default=["deltanet", "gla"], help="recurrent mixers of the hybrids")
    cmd.add_argument("--linear-per-gap", type=int, default=1)
    cmd.add_argument("--eval-inputs", type=int, default=2048)
    add_training_options(cmd)
    cmd.add_argument("--out", required=True, metavar="DIR")
    cmd.add_argument("--reuse", nargs="+", metavar="DIR",
                     help="keep these curves' rows at the requested sizes (same protocol; from each, one row is "
                          "retrained first and must match bit for bit) and train only the sizes none of them holds")
    add_engine_options(cmd)
