"""Theorem 1.2 at sizes a computer reaches: one layer of full or (B,k)-block-sparse attention on 2-Sum, certified or
searched, with each network's Hdp beside B·log2 n: docs/sparse_results.md.

    .venv/bin/python scripts/sparse_table.py            # writes docs/sparse_results.md (a few minutes)
    .venv/bin/python scripts/sparse_table.py --quick    # one size, no training; printed only

For n = M in SIZES (t = 0, bidirectional) the script

* finds the full-attention construction `two_sum`'s minimal precision p* (`verify.precision.min_precision`, float
  family, strict, checked by `verify.certify`) and certifies it there: one layer, H = 1, d = O(log n), so
  Hdp = O(log n) up to the p* factor (p* itself grows like log n);
* for every (B, k), searches (`verify.search.sparse.search_sparse`: sampling, Hypothesis, summary collisions)
  - the *natural* sparse network, the full construction's weights under (B,k)-sparse attention, at the format
    where the full construction is certified -- so whatever it gets wrong, sparsity got wrong; its Hdp is above
    the B·log2 n line, and it fails all the same: budget is necessary, not sufficient;
  - seeded random and trained (the shared trainer, two seeds, the best kept) sparse networks below the line
    (H 1, d_head 1, d_model 1, fp16: Hdp 16, below B·log2 n for every size and block here). Their output
    vocabulary is the token vocabulary, as the shared trainer's architectures have it, so an untrained network
    can answer any token; training teaches it the bits {0, 1};
  - certifies the rich-summary construction `two_sum_sparse` (one summary coordinate per value class;
    `verify.certify`) at that same format: above the line, and correct on every input.

A failure or a summary-collision pair is a proof that *that* network is wrong (each was re-run by the verifier
before it was reported); "none found" is a search, not a proof. B·log2 n is the quantity inside Theorem 1.2's
Omega -- the paper gives no constant -- so "below the line" means Hdp < B·log2 n with the constant taken as 1.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import witness
from constructions import two_sum_sparse
from verify import precision
from verify.certify import certify
from verify import theorems as theorem_bounds
from verify.search.sparse import search_sparse
from witness.arith import arithmetic, parse_format
from witness.tasks import TwoSum

SIZES = [32, 64]
QUICK_SIZES = [32]
BLOCKS = [(4, 1), (8, 2)]
BELOW = {"H": 1, "d_head": 1, "d_model": 1, "format": "fp16"}
EFFORT = {"samples": 500, "hypothesis_examples": 30, "collision_attempts": 2}
TRAINING = {"train_seeds": 2, "train_steps": 400}

HEADER = ["| n = M | B | k | network | weights | format | H | d | p | Hdp | B·log2 n | result |",
          "|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|---|"]


def line(n: int, block: int | str, k: int | str, network: str, weights: str, fmt: str, budget: dict, result: str) -> str:
    scale = "—" if block == "—" else f"{theorem_bounds.sparse_two_sum_scale(n, block).approx:g}"
    side = "" if block == "—" else (" (below)" if budget["Hdp"] < float(scale) else " (above)")
    return (f"| {n} | {block} | {k} | {network} | {weights} | {fmt} | {budget['H']} | {budget['d']} | {budget['p']} "
            f"| {budget['Hdp']}{side} | {scale} | {result} |")


def certified(network, fmt: str) -> tuple[dict, str]:
    arith = arithmetic(parse_format(fmt), "strict")
    result = certify(network, arith)
    verdict = f"certify: **{result.status.value}**"
    if result.status.value == "verified":
        verdict += f" for all 2^{result.detail['inputs_log2']} inputs"
    else:
        verdict += f" ({result.detail.get('reason')})"
    return network.budget(arith.bits).as_dict(), verdict


def found(report) -> str:
    probes = {p["method"]: p for p in report.searched["probes"]}
    collisions = probes["summary_collisions"]
    failing = sum(p.get("failing", 0) for p in report.searched["probes"])
    head = (f"**{failing} failing inputs, {len(report.pairs)} collision pairs**" if failing or report.pairs
            else "none found")
    return (f"{head} in {report.searched['inputs']} inputs (collisions: {collisions['candidates']} block contents, "
            f"{collisions['colliding']} colliding, {collisions['tried']} tried)")


def example(report, n: int, block: int, k: int, fmt: str, shape: dict, weights: str) -> list[str]:
    """Replay commands for the first failure and the first pair of a report."""
    search = (f"witness search sparse --n {n} --M {n} --t 0 --block {block} --k {k} --H {shape['H']} --d-head "
              f"{shape['d_head']} --d-model {shape['d_model']} --format {fmt} --semantics strict --weights {weights} "
              f"--seed 0 --save-network net.npz --json")
    lines = ["", f"Replay (n = M = {n}, ({block},{k}), {weights} weights):", "", "    " + search]
    if report.failures:
        failure = report.failures[0]
        lines += [f"    witness run net.npz --tokens {','.join(map(str, failure.tokens))} --format {fmt} "
                  f"--semantics strict --json",
                  f"    # expected {failure.expected}", f"    # output   {failure.output}"]
    if report.pairs:
        pair = report.pairs[0]
        lines += [f"    witness run net.npz --tokens {','.join(map(str, tokens))} --format {fmt} --semantics strict"
                  for tokens in (pair.a, pair.b)]
        lines += [f"    # both print {pair.output}; answers {pair.expected_a} and {pair.expected_b}"]
    return lines


def table(sizes: list[int], trained: bool) -> tuple[list[str], list[str]]:
    lines, examples = list(HEADER), []
    for n in sizes:
        started = time.perf_counter()
        task = TwoSum(n, n, 0)
        full = witness.compile("two_sum", n=n, M=n, t=0)
        case = precision.Case(precision.network_checker(full, "certify"), "float", "strict", max_bits=40)
        best = precision.table([case])[0].result
        budget, verdict = certified(full, best.format)
        lines.append(line(n, "—", "—", "`two_sum` (full attention)", "construction", best.format, budget,
                          f"{verdict}; p* = {best.p} (log2 n = {n.bit_length() - 1})"))
        for block, k in BLOCKS:
            natural_shape = {"H": 1, "d_head": full.layers[0].mixer.d_head, "d_model": full.d_model}
            report = search_sparse(task, block=block, k=k, **natural_shape, arith=arithmetic(parse_format(best.format),
                                   "strict"), weights="natural", seed=0, **EFFORT)
            lines.append(line(n, block, k, "natural sparse", "the full construction's", best.format, report.budget,
                              found(report)))
            if n == sizes[0] and (block, k) == BLOCKS[0]:
                examples += example(report, n, block, k, best.format, natural_shape, "natural")
            below = {key: BELOW[key] for key in ("H", "d_head", "d_model")}
            for weights in ("random", "trained") if trained else ("random",):
                report = search_sparse(task, block=block, k=k, **below, arith=arithmetic(parse_format(BELOW["format"]),
                                       "strict"), weights=weights, seed=0, **EFFORT,
                                       **(TRAINING if weights == "trained" else {}))
                label = weights
                if weights == "trained":
                    label = f"trained (best accuracy {report.searched['weights']['best_accuracy']:.3f})"
                lines.append(line(n, block, k, "sparse", label, BELOW["format"], report.budget, found(report)))
                if n == sizes[0] and (block, k) == BLOCKS[0] and weights == "random":
                    examples += example(report, n, block, k, BELOW["format"], below, "random")
            rich = two_sum_sparse.build(n, n, 0, block, k)
            budget, verdict = certified(rich, best.format)
            lines.append(line(n, block, k, "`two_sum_sparse` (rich summaries)", "construction", best.format, budget,
                              verdict))
        print(f"n = M = {n}: {time.perf_counter() - started:.1f} s", flush=True)
    return lines, examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one size, no training; print only")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" / "sparse_results.md"))
    args = parser.parse_args()
    started = time.perf_counter()
    lines, examples = table(QUICK_SIZES if args.quick else SIZES, trained=not args.quick)
    if args.quick:
        print("\n".join(lines + examples))
        return
    intro = __doc__.split("\n\n", 2)[2].strip()
    text = "\n".join(["# 2-Sum: full attention, (B,k)-sparse attention and the B·log n line", "",
                      "Regenerate with `.venv/bin/python scripts/sparse_table.py` "
                      f"(this run: {time.perf_counter() - started:.0f} s).", "", intro, "", *lines, *examples, ""])
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
