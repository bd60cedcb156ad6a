"""Certify time against prompt length, as a ratio to checking the same network on sampled inputs.

    .venv/bin/python benchmarks/certify_time.py [--quick]

Part 1: the composition network for L = 1 and m = n - 2 (prompt length n = 2^k) is certified under strict and
theory semantics at fp32 (`verify.certify.certify`, which proves all m^m * m inputs), and the same network is run
on `SAMPLES` seeded random inputs in the same arithmetic (`verify.check.sampled`, which proves nothing). The
ratio certify / (sampled time per input) says how many sampled inputs one proof costs. Part 2: the parametric
certifier (`certify(Construction(...))`, theory semantics, tables never built) against log2 n up to 64, as a ratio to
its time at the smallest size. All ratios compare runs made in this process.
"""

from __future__ import annotations

import argparse
import os
import platform

import witness
from verify import check
from verify.certify import Construction, certify
from witness.arith.formats import FP32
from witness.arith.semantics import arithmetic
from timing import best_time  # benchmarks/timing.py: fastest of several runs

SAMPLES = 4


def materialised(log2_sizes: list[int]) -> None:
    print(f"Part 1: certify vs sampled inputs ({SAMPLES} per size up to 2^10, then 1), L = 1, m = n - 2, fp32")
    print(f"{'n':>7} {'semantics':>9} {'certify s':>10} {'status':>9} {'s / input':>10} {'inputs-worth':>13}")
    for k in log2_sizes:
        network = witness.compile("composition", L=1, m=2**k - 2)
        for semantics in ("strict", "theory"):
            arith = arithmetic(FP32, semantics)
            # strict execution costs ~n^2 per input (index-order accumulation over the keys), so large sizes
            # run once, on one input
            repeats, samples = (3, SAMPLES) if k <= 10 else (1, 1)
            certify_s, proof = best_time(lambda: certify(network, arith), repeats)
            sampled_s, _ = best_time(lambda: check.sampled(network, samples, seed=0, arith=arith), repeats)
            per_input = sampled_s / samples
            print(f"{2**k:>7} {semantics:>9} {certify_s:>10.4f} {proof.status.value:>9} {per_input:>10.4f} "
                  f"{certify_s / per_input:>13.2f}")


def parametric(log2_sizes: list[int]) -> None:
    print("Part 2: parametric certify of the construction, theory semantics, fp32, L = 1, m = n - 2")
    print(f"{'log2 n':>7} {'seconds':>10} {'status':>9} {'x smallest':>11}")
    base = None
    for k in log2_sizes:
        seconds, proof = best_time(lambda: certify(Construction(1, 2**k - 2), arithmetic(FP32, "theory")), 3)
        base = base or seconds
        print(f"{k:>7} {seconds:>10.4f} {proof.status.value:>9} {seconds / base:>11.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stop at n = 2^10 and log2 n = 32")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    materialised(list(range(4, 11 if args.quick else 14)))
    parametric([4, 8, 16, 32] if args.quick else [4, 8, 16, 32, 48, 64])


if __name__ == "__main__":
    main()
