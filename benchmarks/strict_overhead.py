"""Strict p-bit execution against float64 execution of the same network and inputs (overhead ratio).

    .venv/bin/python benchmarks/strict_overhead.py [--L 3 --m 4 --n 2 4 --inputs 200 --repeat 3]

The baseline is the plain float64 executor (numpy's own summation order) run in this process on the same
composition network and token batch; every other row is `strict` (or the named semantics) at a p-bit format. Each
time is the best of --repeat runs. Also prints how many inputs each run answered correctly.
"""

from __future__ import annotations

import argparse

import numpy as np

import witness
from witness.arith import FLOAT64, arithmetic
from witness.errors import OverflowInFormat
from witness.execute import run
from timing import best_time  # benchmarks/timing.py: fastest of several runs

CASES = [("fp64", "strict"), ("fp32", "strict"), ("fp16", "strict"), ("bf16", "strict"), ("float:3,4", "strict"),
         ("fixed:6,8", "strict"), ("fp16", "theory"), ("fp16", "mixed")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--L", type=int, default=3)
    parser.add_argument("--m", type=int, default=4)
    parser.add_argument("--n", type=int, nargs="*", default=[2, 4])
    parser.add_argument("--inputs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    network = witness.compile("composition", L=args.L, m=args.m, n=args.n)
    task = network.task
    tokens = task.random_tokens(np.random.default_rng(0), args.inputs)
    expected = task.answers(tokens).reshape(-1)
    print(f"composition L={args.L} m={args.m} n={args.n}: prompt {network.n_ctx} tokens, d_model "
          f"{network.d_model}, {args.inputs} inputs, best of {args.repeat}")

    baseline, outputs = best_time(lambda: run(network, tokens, FLOAT64), args.repeat)
    correct = int((outputs.predictions[:, 0] == expected).sum())
    print(f"{'float64 (numpy order)':>24}  {baseline * 1e3:9.1f} ms  ratio  1.0  correct {correct}/{args.inputs}")
    for fmt, semantics in CASES:
        arith = arithmetic(fmt, semantics)
        try:
            seconds, outputs = best_time(lambda: run(network, tokens, arith), args.repeat)
        except OverflowInFormat as exc:
            print(f"{fmt + ' ' + semantics:>24}  overflow: {exc}")
            continue
        correct = int((outputs.predictions[:, 0] == expected).sum())
        print(f"{fmt + ' ' + semantics:>24}  {seconds * 1e3:9.1f} ms  ratio {seconds / baseline:5.1f}  "
              f"correct {correct}/{args.inputs}")


if __name__ == "__main__":
    main()
