"""Strict p-bit execution against float64 execution of the same network and inputs (overhead ratio).

    .venv/bin/python benchmarks/strict_overhead.py [--L 3 --m 4 --n 2 4 --inputs 256 --repeat 5]

The baseline is the plain float64 executor (numpy's own summation order) run in this process on the same
composition network and token batch; every other row is `strict` (or the named semantics) at a p-bit format. Each
time is the best of --repeat runs, in CPU seconds of this process (other jobs on a shared machine then inflate
both sides less). Also prints how many inputs each run answered correctly, and, from one profiled fp16 run, where
strict's time goes: the index-order matmul (one compiled loop, `witness.arith.kernels`), the rounding of every other
operation (compiled), exp (correctly rounded), and the rest (the executor's own numpy work).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np

import witness
from witness.arith import FLOAT64, arithmetic
from witness.errors import OverflowInFormat
from witness.execute import run
from timing import best_time  # benchmarks/timing.py: fastest of several runs

#: What the breakdown reports: the cumulative CPU time of each function (by name, in witness/arith) from the executor.
PARTS = {"the ordered matmul (compiled loop)": ("matmul",), "exp (correctly rounded)": ("exp",),
         "rounding of the other operations": ("add", "sub", "mul", "div", "store", "weights")}

CASES = [("fp64", "strict"), ("fp32", "strict"), ("float:24,9", "strict"), ("fp16", "strict"), ("bf16", "strict"),
         ("float:3,4", "strict"), ("fixed:6,8", "strict"), ("fp16", "theory"), ("fp16", "mixed")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--L", type=int, default=3)
    parser.add_argument("--m", type=int, default=4)
    parser.add_argument("--n", type=int, nargs="*", default=[2, 4])
    parser.add_argument("--inputs", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    network = witness.compile("composition", L=args.L, m=args.m, n=args.n)
    task = network.task
    tokens = task.random_tokens(np.random.default_rng(0), args.inputs)
    expected = task.answers(tokens).reshape(-1)
    print(f"composition L={args.L} m={args.m} n={args.n}: prompt {network.n_ctx} tokens, d_model "
          f"{network.d_model}, {args.inputs} inputs, best of {args.repeat}")

    baseline, outputs = best_time(lambda: run(network, tokens, FLOAT64), args.repeat, clock=time.process_time)
    correct = int((outputs.predictions[:, 0] == expected).sum())
    print(f"{'float64 (numpy order)':>24}  {baseline * 1e3:9.1f} ms  ratio  1.0  correct {correct}/{args.inputs}")
    for fmt, semantics in CASES:
        arith = arithmetic(fmt, semantics)
        try:
            seconds, outputs = best_time(lambda: run(network, tokens, arith), args.repeat, clock=time.process_time)
        except OverflowInFormat as exc:
            print(f"{fmt + ' ' + semantics:>24}  overflow: {exc}")
            continue
        correct = int((outputs.predictions[:, 0] == expected).sum())
        print(f"{fmt + ' ' + semantics:>24}  {seconds * 1e3:9.1f} ms  ratio {seconds / baseline:5.1f}  "
              f"correct {correct}/{args.inputs}")
    breakdown(network, tokens, arithmetic("fp16", "strict"))


def breakdown(network, tokens, arith) -> None:
    """One profiled run: the share of its time spent in each of PARTS, outermost calls only (matmul's own
    multiplies are matmul's), and what is left."""
    profile = cProfile.Profile(time.process_time)
    profile.runcall(run, network, tokens, arith)
    stats = pstats.Stats(profile).stats
    total = max(cumulative for (_, _, name), (_, _, _, cumulative, _) in stats.items() if name == "run")
    print(f"where fp16 strict spends its time (profiled, {total * 1e3:.0f} ms):")
    spent = 0.0
    for label, functions in PARTS.items():
        share = sum(sum(cumulative for (caller, _, _), (_, _, _, cumulative) in callers.items()
                        if "witness/arith" not in caller)
                    for (path, _, name), (_, _, _, _, callers) in stats.items()
                    if name in functions and "witness/arith" in path)
        spent += share
        print(f"{label:>36}  {share / total:6.1%}")
    print(f"{'the rest (the executor itself)':>36}  {1 - spent / total:6.1%}")


if __name__ == "__main__":
    main()
