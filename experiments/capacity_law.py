"""Where each trained hybrid falls, against its head width: the test of an effective-capacity law on a curve that
`witness capacity --d-heads ...` trained at several d_head within one budget.

The claim under test (issue 30): a linear state with d_head-wide keys stores about d_head well-separated keys, so the
table size N at which a hybrid's accuracy falls grows like d_head, not like its state bits C (p times the state's
numbers, which grow like d_head^2): counting alone would let N log2 N reach C. Per (architecture, d_head) the fall is
read off the curve as it is, with no model fitted to the accuracies:

* `N50`: where the mean accuracy over seeds first drops below 1/2 -- between the last N at or above 1/2 and the
  next N, interpolated linearly in (log2 N, accuracy) between the two; None where it never drops (the fall is past
  the largest N) or never rises (below the smallest);
* the exponent of the law: the least-squares slope of log2 N50 against log2 d_head over the d_heads with an N50.
  About 1 means N50 grows like d_head (keys), about 2 like C (counting, up to the log); a point only where the
  control learned (mean >= LEARNED) at both N around the fall counts.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from experiments.capacity import CONTROL, LEARNED

#: The accuracy whose crossing marks a fall.
HALF = 0.5


def falls(curve: dict[str, Any]) -> list[dict[str, Any]]:
    """Per hybrid architecture and d_head: N50 (module docstring), the two N it lies between, C, and whether the
    control learned at both."""
    entries = curve["summary"]
    control = {(e["size"], e["d_head"]): e["mean"] >= LEARNED for e in entries if e["architecture"] == CONTROL}
    out = []
    for name in dict.fromkeys(e["architecture"] for e in entries if e["state_bits"]):
        for d_head in sorted({e["d_head"] for e in entries if e["architecture"] == name}):
            points = sorted((e["size"], e["mean"], e["state_bits"]) for e in entries
                            if e["architecture"] == name and e["d_head"] == d_head)
            out.append({"architecture": name, "d_head": d_head, "C": points[0][2],
                        **_crossing(points, control, d_head)})
    return out


def _crossing(points, control, d_head) -> dict[str, Any]:
    if points[0][1] < HALF:
        return {"N50": None, "between": None, "reason": f"below 1/2 already at N = {points[0][0]}"}
    for (n_a, acc_a, _), (n_b, acc_b, _) in zip(points, points[1:]):
        if acc_b < HALF:
            t = (acc_a - HALF) / (acc_a - acc_b)
            n50 = 2 ** (math.log2(n_a) + t * (math.log2(n_b) - math.log2(n_a)))
            learned = control.get((n_a, d_head), False) and control.get((n_b, d_head), False)
            return {"N50": n50, "between": [n_a, n_b], "control_learned": learned,
                    "reason": None if learned else "the control did not learn at both sizes around the fall"}
    return {"N50": None, "between": None, "reason": f"at or above 1/2 up to N = {points[-1][0]}"}


def exponents(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per architecture: the slope of log2 N50 against log2 d_head (and against log2 C) over its counted falls."""
    out = {}
    for name in dict.fromkeys(row["architecture"] for row in rows):
        counted = [row for row in rows if row["architecture"] == name and row["N50"] and row["control_learned"]]
        entry = {"points": len(counted)}
        if len(counted) >= 2:
            y = np.log2([row["N50"] for row in counted])
            entry["vs_d_head"] = float(np.polyfit(np.log2([row["d_head"] for row in counted]), y, 1)[0])
            entry["vs_C"] = float(np.polyfit(np.log2([row["C"] for row in counted]), y, 1)[0])
        out[name] = entry
    return out


def markdown(curve: dict[str, Any]) -> str:
    rows = falls(curve)
    lines = ["# Where each hybrid falls, against d_head", "",
             "N50: where the mean accuracy over seeds first drops below 1/2, interpolated in log2 N between the two "
             "sizes around it (experiments/capacity_law.py). A fall counts only where the control learned "
             f"(mean >= {LEARNED:.0%}) at both sizes.", "",
             "| architecture | d_head | C (state bits) | falls between N = | N50 | N50 / d_head | counted |",
             "|---|---:|---:|---|---:|---:|---|"]
    for row in rows:
        between = "–".join(map(str, row["between"])) if row["between"] else "—"
        n50 = f"{row['N50']:.1f}" if row["N50"] else "—"
        per = f"{row['N50'] / row['d_head']:.2f}" if row["N50"] else "—"
        lines.append(f"| {row['architecture']} | {row['d_head']} | {row['C']} | {between} | {n50} | {per} | "
                     f"{'yes' if row['N50'] and row['control_learned'] else 'no: ' + row['reason']} |")
    lines += ["", "The law's exponent: the least-squares slope of log2 N50 against log2 d_head (about 1: the fall "
              "tracks the key width; about 2: it tracks C, up to a log) and against log2 C.", ""]
    for name, entry in exponents(rows).items():
        if "vs_d_head" in entry:
            lines.append(f"* {name}: slope {entry['vs_d_head']:.2f} against d_head, {entry['vs_C']:.2f} against C, "
                         f"over {entry['points']} d_heads.")
        else:
            lines.append(f"* {name}: {entry['points']} counted fall(s), too few for a slope.")
    return "\n".join(lines) + "\n"


def plot(curve: dict[str, Any], path: str | Path):
    """Accuracy against N / d_head, one panel per hybrid architecture, one line per d_head (mean over seeds, bars
    min–max); the control at each d_head in grey. If the fall tracks d_head, the lines fall together."""
    from matplotlib.figure import Figure

    entries = curve["summary"]
    names = list(dict.fromkeys(e["architecture"] for e in entries if e["state_bits"]))
    figure = Figure(figsize=(4.2 * len(names), 3.8), layout="constrained")
    axes = figure.subplots(1, len(names), squeeze=False)[0]
    d_heads = sorted({e["d_head"] for e in entries})
    for ax, name in zip(axes, names):
        for d_head in d_heads:
            for arch, style in ((CONTROL, {"color": "0.6", "linestyle": ":", "marker": "."}), (name, {"marker": "o"})):
                points = sorted((e["size"], e["mean"], e["min"], e["max"]) for e in entries
                                if e["architecture"] == arch and e["d_head"] == d_head)
                x = [size / d_head for size, *_ in points]
                mean = np.array([p[1] for p in points])
                error = [mean - [p[2] for p in points], np.array([p[3] for p in points]) - mean]
                label = f"d_head {d_head}" if arch == name else ("control (grey)" if d_head == d_heads[0] else None)
                ax.errorbar(x, mean, yerr=error, capsize=2, label=label, **style)
        ax.axhline(HALF, color="black", linewidth=0.8, linestyle="--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N / d_head (log scale)")
        ax.set_ylabel(f"accuracy at {curve['spec']['format']}")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(name, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    return figure


def write(curve: dict[str, Any], out: str | Path) -> None:
    out = Path(out)
    (out / "law.md").write_text(markdown(curve), encoding="utf-8")
    plot(curve, out / "law.png")


__all__ = ["falls", "exponents", "markdown", "plot", "write", "HALF"]
