"""Budgets, certified formats and certify time of the hybrid constructions next to the (L+1)-layer one.

    .venv/bin/python benchmarks/hybrid_constructions.py            # writes docs/hybrid_constructions.md
    .venv/bin/python benchmarks/hybrid_constructions.py --quick    # m = 4, 16; prints only

For L = 2 (n = [4]) and L = 3 (n = [4, 4]) and table sizes m: each construction (`composition`: L+1 full layers;
`composition_hybrid`: 1 linear + L full; `composition_hybrid_small_table`: 2 linear + L-1 full) is compiled, its
budget read at p = 16 (`witness.budget`), and it is certified (`verify.certify.certify`, every input) under `strict`
at fp16, bf16 and fp32. The certify time at fp16 is printed as a ratio to the composition network's, measured in
this process. For m <= 16, the smallest float format certify verifies (`verify.precision.table`).
"""

from __future__ import annotations

import argparse
import pathlib
import time

import witness
from verify.certify import certify
from verify import precision
from witness.arith.semantics import arithmetic

CONSTRUCTIONS = ("composition", "composition_hybrid", "composition_hybrid_small_table")
FORMATS = ("fp16", "bf16", "fp32")
DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "hybrid_constructions.md"


def rows(sizes: list[int], precision_up_to: int):
    for L, n in [(2, [4]), (3, [4, 4])]:
        for m in sizes:
            baseline = None
            for name in CONSTRUCTIONS:
                network = witness.compile(name, L=L, m=m, n=n)
                budget = network.budget(16).as_dict()
                certified = []
                for fmt in FORMATS:
                    start = time.perf_counter()
                    if certify(network, arithmetic(fmt, "strict")).status.value == "verified":
                        certified.append(fmt)
                    if fmt == "fp16":
                        seconds = time.perf_counter() - start
                baseline = seconds if baseline is None else baseline
                p_star = "-"
                if m <= precision_up_to:
                    case = precision.Case(precision.network_checker(network, "certify"), "float", "strict", 32)
                    p_star = precision.table([case])[0].result.format
                kinds = [layer.mixer.kind for layer in network.layers]
                yield (L, m, network.task.prompt_length, name, f"{kinds.count('linear')}+{kinds.count('attention')}",
                       budget["H"], budget["d_head"], budget["d_model"], budget["Hdp"], budget["state_bits"],
                       " ".join(certified) or "none", p_star, f"{seconds / baseline:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="m = 4, 16 only; print, do not write the doc")
    args = parser.parse_args()
    sizes = [4, 16] if args.quick else [4, 16, 64]
    header = ("L", "m", "tokens", "construction", "linear+full", "H", "d_head", "d_model", "Hdp (p=16)",
              "state bits (p=16)", "certified (strict)", "min float p* (strict)", "certify time / composition's")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows(sizes, precision_up_to=16):
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
        print(lines[-1], flush=True)
    if args.quick:  # the committed table is the full one
        return
    DOC.write_text("# Hybrid constructions: budgets and certified formats\n\n"
                   "Regenerate with `.venv/bin/python benchmarks/hybrid_constructions.py` (n_1 = ... = 4; H = 1, so "
                   "d = d_model; state bits count H (d_k d_v + d_k) p per linear layer).\n\n"
                   + "\n".join(lines) + "\n")
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
