"""Probe throughput on a ~100-token hybrid: inputs checked per second, as a ratio to plain executor runs.

    .venv/bin/python benchmarks/probe_throughput.py [--quick]

The network is a random hybrid for composition L = 2, m = 9, n_1 = 10 (prompt length 101): one full-attention
layer with a gap of two `deltanet` layers before and after it, H = 1, d_head = 4, d_model = 8, run at fp16 under
strict and theory semantics. The baseline is `witness.execute.run` on the same random inputs (the forward pass
alone); against it the script times the sampled probe (forward pass + comparison with the task's answers + confirming
the kept failures), the Hypothesis probe, and the boundary-pair search (a traced run + the partial softmax and
state crossings + hashing). All ratios compare runs made in this process; each time is the best of three.
"""

from __future__ import annotations

import argparse
import os
import platform

import numpy as np

from verify import check
from verify.search import pairs
from lab import architectures
from witness.arith import arithmetic, parse_format
from witness.execute import run
from witness.tasks import Composition
from timing import best_time  # benchmarks/timing.py: fastest of several runs

TASK = Composition(L=2, m=9, n=(10,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer inputs (a smoke run)")
    args = parser.parse_args()
    count = 64 if args.quick else 512
    network = architectures.hybrid(TASK, L_full=1, linear_per_gap=2, mixer="deltanet", H=1, d_head=4, d_model=8)
    tokens = TASK.random_tokens(0, count)
    print(f"probe throughput: hybrid {architectures.layer_kinds(network)}, prompt length {TASK.prompt_length}, "
          f"{count} inputs; {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(f"{'semantics':>9} {'probe':>15} {'inputs/s':>10} {'x executor':>11}")
    for semantics in ("strict", "theory"):
        arith = arithmetic(parse_format("fp16"), semantics)
        base = count / best_time(lambda: run(network, tokens, arith), 3)[0]
        print(f"{semantics:>9} {'executor run':>15} {base:>10.1f} {1.0:>11.2f}")
        timed = {
            "sampled": (count, lambda: check.sampled(network, count, 0, arith, stop_at_overflow=False, max_failures=5)),
            "hypothesis": (None, lambda: check.hypothesis_search(network, arith, 20, 0, max_failures=1)),
            "boundary pairs": (None, lambda: pairs.boundary_pairs(network, arith, suffixes=1, prefixes=count,
                                                                  seed=0, max_pairs=10**6)),
        }
        for name, (inputs, action) in timed.items():
            if inputs is None:  # the probe decides how many inputs it runs: ask it
                inputs = action()[1]["inputs"] if name == "boundary pairs" else action().checked
            rate = inputs / best_time(action, 3)[0]
            print(f"{semantics:>9} {name:>15} {rate:>10.1f} {rate / base:>11.2f}")


if __name__ == "__main__":
    # Random deltanet weights overflow to inf/NaN on these inputs (docs/hybrid_results.md, notes): the run is still
    # exact and timed the same, so numpy's overflow warnings are silenced rather than printed per step.
    with np.errstate(all="ignore"):
        main()
