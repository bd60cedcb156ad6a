"""Minimal precision p* of the 2-Sum construction against n and M: docs/two_sum_min_precision.md and .png.

    .venv/bin/python scripts/two_sum_min_precision_table.py   # writes both files (about 70 s of CPU)

For every size, format family (float, fixed) and semantics (strict, theory) the script runs
`verify.precision.min_precision` with certify (the checker's 2-Sum proof, verify/checker/two_sum.py) as the checker, on the compiled network
(t = 0, bidirectional): p* is certified for every input, and every split of p* - 1 bits is not. Two sweeps: n
doubling at M = 16, and M growing at n = 64. A third table sets the certified p* beside the p* that exhaustive
enumeration of every input finds on small families: certify is sound, not complete, so its p* can only be the
same or higher, and the gap is what its worst-case rounding analysis costs. The plot needs matplotlib.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import witness
from verify import precision
from verify.precision import COLUMNS

N_SWEEP = [(2**k, 16) for k in range(2, 9)]
M_SWEEP = [(64, M) for M in (2, 4, 16, 64, 256, 1024)]
SMALL = [(4, 3), (4, 4), (6, 2), (4, 8)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder for two_sum_min_precision.md/.png")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    keys = [(n, M, family, semantics, "certify") for n, M in sorted(set(N_SWEEP + M_SWEEP))
            for family, semantics in COLUMNS]
    keys += [(n, M, family, semantics, method) for n, M in SMALL for family, semantics in COLUMNS
             for method in ("certify", "exhaustive")]
    networks = {(n, M): witness.compile("two_sum", n=n, M=M, t=0) for n, M, *_ in keys}
    rows = precision.table([precision.Case(precision.network_checker(networks[(n, M)], method), family, semantics)
                            for n, M, family, semantics, method in keys])
    table = {key: row.result for key, row in zip(keys, rows)}
    seconds = time.perf_counter() - start
    for (n, M, family, semantics, method), result in table.items():
        if (n, M) not in SMALL:
            print(f"n = {n:<4} M = {M:<5} {family:5} {semantics:6} p* = {result.p} ({result.format})",
                  file=sys.stderr)

    slopes = {}
    for sweep, axis in ((N_SWEEP, 0), (M_SWEEP, 1)):
        for column in COLUMNS:
            points = [(np.log2(size[axis]), table[(*size, *column, "certify")].p) for size in sweep
                      if table[(*size, *column, "certify")].p is not None]
            slopes[(axis, column)] = precision.slope(points)
    args.out.mkdir(parents=True, exist_ok=True)
    write_markdown(args.out / "two_sum_min_precision.md", table, slopes, seconds)
    write_plot(args.out / "two_sum_min_precision.png", table, slopes)
    return 0


def sweep_rows(table, sweep) -> list[str]:
    header = " | ".join(f"p* {family} {semantics}" for family, semantics in COLUMNS)
    lines = [f"| n | M | {header} |", "|---:|---:|" + "---:|" * len(COLUMNS)]
    for n, M in sweep:
        cells = " | ".join(precision.cell(table.get((n, M, *column, "certify"))) for column in COLUMNS)
        lines.append(f"| {n} | {M} | {cells} |")
    return lines


def write_markdown(path: Path, table, slopes, seconds: float) -> None:
    lines = [
        "# Minimal precision of the 2-Sum construction",
        "",
        "Regenerate with `.venv/bin/python scripts/two_sum_min_precision_table.py`. The network is "
        "`witness compile two_sum --n N --M M --t 0` (one layer, one head, bidirectional). p* is the smallest "
        "total bit count p at which `verify.certify` proves that the network answers **every position of every "
        "input** (all M^n of them), in the format shown (`float:M,E` = M mantissa and E exponent bits, `fixed:I,F` "
        "= I integer and F fraction bits; p = 1 + M + E or 1 + I + F). The search assumes nothing about more bits "
        "helping: every split of every p below p* that the semantics can run was checked, and none is certified "
        "(counts at the end). The trusted checker (`verify/checker`, docs/certificates.md) proves each p*. certify "
        "is sound, not complete, so **p* is an upper bound on the fewest bits at which the network is correct**: "
        "below p* it says `unknown`, which is not a claim that the network fails there -- the last table shows how "
        "far below the certified p* exhaustive enumeration still succeeds on small families. "
        "Under `strict` every softmax sum of n terms is bounded with Higham's relative error gamma_n, so strict "
        "needs n u < 1/2 (u = 2^-(mantissa+1)) and its p* grows with log2 n; under `theory` the block is exact "
        "and only stored vectors are rounded.",
        "",
        "## p* against n (M = 16)",
        "",
        *sweep_rows(table, N_SWEEP),
        "",
        "## p* against M (n = 64)",
        "",
        *sweep_rows(table, M_SWEEP),
        "",
        "## Growth (least-squares slope of p*, bits per doubling)",
        "",
    ]
    for column in COLUMNS:
        against_n, against_M = slopes[(0, column)], slopes[(1, column)]
        lines.append(f"* {column[0]} {column[1]}: {against_n:.2f} per doubling of n, "
                     f"{against_M:.2f} per doubling of M")
    lines += ["", "## Certified against enumerated p* on small families (t = 0)", "",
              "| n | M | inputs | " + " | ".join(f"{f} {s}: certify / exhaustive" for f, s in COLUMNS) + " |",
              "|---:|---:|---:|" + "---:|" * len(COLUMNS)]
    for n, M in SMALL:
        cells = " | ".join(f"{table[(n, M, *column, 'certify')].p} / {table[(n, M, *column, 'exhaustive')].p}"
                           for column in COLUMNS)
        lines.append(f"| {n} | {M} | {M ** n} | {cells} |")
    below = [trial.status for key, result in table.items() if key[-1] == "certify" for trial in result.trials
             if trial.p < result.p]
    lines += ["", f"Checks below p* (certify): {len(below)}, of which verified: "
                  f"{sum(status == 'verified' for status in below)}. The whole table took {seconds:.0f} s.",
              "", "![p* against log2 n and log2 M](two_sum_min_precision.png)", ""]
    path.write_text("\n".join(lines))


def write_plot(path: Path, table, slopes) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, panels = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for panel, (sweep, axis, label) in zip(panels, ((N_SWEEP, 0, "log2 n (M = 16)"), (M_SWEEP, 1, "log2 M (n = 64)"))):
        for column, marker in zip(COLUMNS, "os^v"):
            points = [(np.log2(size[axis]), table[(*size, *column, "certify")].p) for size in sweep
                      if table[(*size, *column, "certify")].p is not None]
            if points:
                x, y = zip(*points)
                fitted = "" if slopes[(axis, column)] is None else f", slope {slopes[(axis, column)]:.2f}"
                panel.plot(x, y, marker=marker, label=f"{column[0]} {column[1]}{fitted}")
        panel.set_xlabel(label)
        panel.grid(True, alpha=0.3)
        panel.legend(fontsize=8)
    panels[0].set_ylabel("p* (bits) at which certify proves every input")
    figure.suptitle("2-Sum construction: certified minimal precision")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
