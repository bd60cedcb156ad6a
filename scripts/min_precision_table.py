"""Minimal precision p* of the composition construction against prompt length: docs/min_precision.md and .png.

    .venv/bin/python scripts/min_precision_table.py   # writes docs/min_precision.md and .png (about 2 minutes)
    .venv/bin/python scripts/min_precision_table.py --workers 2   # the same table from a local dask cluster

The plot needs matplotlib (the `plots` extra).

For L = 1 the prompt length is n = m + 2, so m = 2^k - 2 gives n = 2^k exactly. For every k, format family
(float, fixed) and semantics (strict, theory) the script runs `verify.precision.min_precision` with certify as the
checker: strict up to 2^--strict-max (certify on the materialised network), theory up to 2^--theory-max (the
parametric certify, which never builds the tables). Each p* is verified by certify, and no split of any fewer
bits is (the search tries them all); the .md lists those checks' outcome and a least-squares slope of p* against log2 n per column. A
size at which certify verifies no format is listed as unknown and left out of the fit. Every (size, column) is an
independent job of a `lab.sweep` (in-process by default, `--workers N` or `--scheduler ADDRESS` for a
cluster); the table does not depend on where the jobs ran.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from verify import precision
from verify.precision import COLUMNS
from lab.sweep import Engine


def case(L: int, log2_n: int, family: str, semantics: str) -> precision.Case:
    """One cell of the table: m = n - 2, so the prompt length is n = 2^log2_n."""
    return precision.Case(precision.composition_checker(L, 2**log2_n - 2, ()), family, semantics)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict-max", type=int, default=12, help="largest k = log2 n under strict semantics")
    parser.add_argument("--theory-max", type=int, default=64, help="largest k = log2 n under theory semantics")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder for min_precision.md and .png")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, help="run the cells on a local dask cluster of this many processes")
    where.add_argument("--scheduler", help="run the cells on an existing dask cluster at this address")
    args = parser.parse_args(argv)

    L = 1
    jobs = [(L, k, family, semantics) for family, semantics in COLUMNS
            for k in range(4, (args.strict_max if semantics == "strict" else args.theory_max) + 1)]
    rows = precision.table([case(*job) for job in jobs], Engine(args.workers, args.scheduler))
    table: dict[tuple[int, str, str], precision.PrecisionResult] = {}
    seconds: dict[tuple[str, str], float] = {column: 0.0 for column in COLUMNS}
    for (_, k, family, semantics), row in zip(jobs, rows):
        table[(k, family, semantics)] = result = row.result
        seconds[(family, semantics)] += row.seconds
        print(f"n = 2^{k:<3} {family:5} {semantics:6} p* = {result.p} ({result.format}), "
              f"{len(result.trials)} checks", file=sys.stderr)

    ks = sorted({k for k, _, _ in table})
    slopes = {column: precision.slope([(k, table[(k, *column)].p) for k in ks
                             if (k, *column) in table and table[(k, *column)].p is not None])
              for column in COLUMNS}
    args.out.mkdir(parents=True, exist_ok=True)
    write_markdown(args.out / "min_precision.md", L, ks, table, slopes, seconds)
    write_plot(args.out / "min_precision.png", ks, table, slopes)
    return 0


def write_markdown(path: Path, L: int, ks, table, slopes, seconds) -> None:
    header = " | ".join(f"p* {family} {semantics}" for family, semantics in COLUMNS)
    lines = [
        "# Minimal precision of the composition construction",
        "",
        f"Regenerate with `.venv/bin/python scripts/min_precision_table.py` (L = {L}, m = n - 2, so the prompt "
        "length n is a power of two). p* is the smallest total bit count p at which `verify.certify` proves the "
        "compiled network answers **every** input; the format that reaches it is in parentheses (`float:M,E` = M "
        "mantissa and E exponent bits, `fixed:I,F` = I integer and F fraction bits; p = 1 + M + E or 1 + I + F). "
        "Strict sizes are certified on the materialised network; theory sizes from the construction's parametric "
        "description, which never builds the tables. Every p* is proven by the trusted checker (`verify/checker`, "
        "docs/certificates.md). The search assumes nothing about more bits helping -- at some sizes they do not "
        "(the theory column is not monotone in n, because rounding the attention scale beta to the format can "
        "land on either side of what the size needs) -- so every split of every p below p* that the semantics "
        "can run was checked too, and none verifies (counts below). certify is sound, not complete, so p* is an "
        "upper bound on the fewest bits at which the network is correct; `unknown` would mean certify verified no "
        "format of at most 64 bits at that size. The checker reasons about float formats with at most 24 "
        "mantissa and 9 exponent bits, fp64, and fixed formats of at most 25 bits. Up to 2^12 tokens under strict "
        "(the exact strict proof costs about n^2 per layer: 2^12 takes 15 s per format).",
        "",
        f"| n | log2 n | {header} |",
        "|---:|---:|" + "---:|" * len(COLUMNS),
    ]
    for k in ks:
        cells = " | ".join(precision.cell(table.get((k, *column))) for column in COLUMNS)
        lines.append(f"| 2^{k} | {k} | {cells} |")
    lines += ["", "Least-squares slope of p* against log2 n (bits per doubling of the prompt):", ""]
    for column in COLUMNS:
        family, semantics = column
        fitted = "n/a" if slopes[column] is None else f"{slopes[column]:.3f}"
        below = [trial.status for k in ks if (k, *column) in table for trial in table[(k, *column)].trials
                 if trial.p < table[(k, *column)].p]
        lines.append(f"* {family} {semantics}: slope {fitted}; {len(below)} checks below p*, "
                     f"{sum(status == 'verified' for status in below)} verified; search took "
                     f"{seconds[column]:.1f} s (summed over its cells)")
    unknown = [(k, column) for k in ks for column in COLUMNS
               if (k, *column) in table and table[(k, *column)].p is None]
    if unknown:
        lines += ["", "Where a cell says unknown, certify verified no format the semantics can run; its reason at "
                      "the widest format tried (of those, the one with the most exponent or integer bits):", ""]
        for k, column in unknown:
            trials = table[(k, *column)].trials
            widest = max(trials, key=lambda trial: (trial.p, trials.index(trial)))
            lines.append(f"* n = 2^{k}, {column[0]} {column[1]}: {widest.format}: {widest.note or widest.status}")
    lines += ["", "![p* against log2 n](min_precision.png)", ""]
    path.write_text("\n".join(lines))


def write_plot(path: Path, ks, table, slopes) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for column, marker in zip(COLUMNS, "os^v"):
        points = [(k, table[(k, *column)].p) for k in ks if (k, *column) in table and table[(k, *column)].p]
        if points:
            x, y = zip(*points)
            fitted = "" if slopes[column] is None else f", slope {slopes[column]:.2f}"
            axes.plot(x, y, marker=marker, label=f"{column[0]} {column[1]}{fitted}")
    axes.set_xlabel("log2 n (prompt length n)")
    axes.set_ylabel("p* (bits)")
    axes.set_title("p* at which certify proves composition (L = 1)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
