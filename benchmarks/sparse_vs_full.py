"""(B,k)-block-sparse attention against full attention on the same 2-Sum inputs, and the summary-collision rate.

    .venv/bin/python benchmarks/sparse_vs_full.py [--block 8 --k 2 --inputs 64 --repeat 3 --format fp16]

Part 1, per n: the `two_sum` construction (full attention, the baseline, run in this process) and the same weights
under (B,k)-block-sparse attention, run by the one executor on the same token batch; each time is the best of
--repeat runs, and the ratio is sparse / full. The executor computes every score and masks the keys a query does not
keep (so a fixed format can overflow on them exactly as the MPFR reference does): sparsity saves no arithmetic
here, it adds the block summaries, their scores and the top-k choice. Also printed: how many inputs each network
answers entirely right.

Part 2: `verify.search.collisions.collision_pairs` on the natural sparse network and on a seeded random one below the
B·log2 n line (H 1, d_head 1, d_model 1): block contents run per second (their summaries read and bucketed),
colliding pairs of contents, input pairs with different answers screened, confirmed pairs per second.
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import best_time  # benchmarks/timing.py: fastest of several runs

import witness
from constructions import two_sum_sparse
from lab import architectures
from verify.search import collisions
from witness.arith import arithmetic
from witness.execute import run
from witness.tasks import TwoSum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block", type=int, default=8)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--inputs", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--format", default="fp16")
    parser.add_argument("--sizes", type=int, nargs="*", default=[32, 64, 128])
    parser.add_argument("--attempts", type=int, default=2, help="collision attempts in part 2")
    parser.add_argument("--max-pairs", type=int, default=20, help="part 2 stops at this many confirmed pairs")
    args = parser.parse_args()
    arith = arithmetic(args.format, "strict")

    print(f"part 1: two_sum (M = n, t = 0), {args.inputs} inputs, {args.format} strict, best of {args.repeat}; "
          f"sparse = ({args.block},{args.k})-block-sparse attention with the same weights")
    print(f"{'n':>5} {'full ms':>9} {'sparse ms':>10} {'sparse/full':>12} {'full right':>11} {'sparse right':>13}")
    for n in args.sizes:
        task = TwoSum(n, n, 0)
        full = witness.compile("two_sum", n=n, M=n, t=0)
        natural = two_sum_sparse.natural(n, n, 0, args.block, args.k)
        tokens = task.random_tokens(np.random.default_rng(0), args.inputs)
        expected = task.answers(tokens)
        full_s, full_out = best_time(lambda: run(full, tokens, arith), args.repeat)
        sparse_s, sparse_out = best_time(lambda: run(natural, tokens, arith), args.repeat)
        right = [int((out.predictions == expected).all(axis=1).sum()) for out in (full_out, sparse_out)]
        print(f"{n:>5} {full_s * 1e3:>9.1f} {sparse_s * 1e3:>10.1f} {sparse_s / full_s:>12.2f} "
              f"{right[0]:>8}/{args.inputs} {right[1]:>10}/{args.inputs}")

    print(f"\npart 2: summary collisions on ({args.block},{args.k})-sparse networks, {args.format} strict, "
          f"{args.attempts} attempts, stopping at {args.max_pairs} pairs")
    print(f"{'n = M':>6} {'network':>17} {'contents':>9} {'contents/s':>11} {'colliding':>10} {'tried':>6} {'confirmed':>10} "
          f"{'pairs/s':>8} {'seconds':>8}")
    for n in (32, 64):
        task = TwoSum(n, n, 0)
        random = architectures.sparse_architecture(task, args.block, args.k, H=1, d_head=1, d_model=1).initial_network(task, 0)
        for name, network in (("natural", two_sum_sparse.natural(n, n, 0, args.block, args.k)),
                              ("random, H 1, d 1", random)):
            _, record = collisions.collision_pairs(network, arith, attempts=args.attempts, seed=0,
                                               max_pairs=args.max_pairs)
            print(f"{n:>6} {name:>17} {record['candidates']:>9} {record['candidates_per_second']:>11.0f} "
                  f"{record['colliding']:>10} {record['tried']:>6} {record['confirmed']:>10} "
                  f"{record['pairs_per_second']:>8.2f} {record['seconds']:>8.1f}")


if __name__ == "__main__":
    main()
