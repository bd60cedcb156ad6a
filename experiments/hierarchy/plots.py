"""The plots of `witness hierarchy`, from the report's JSON object: p* against prompt length, each row's outcome
against its budget beside the budgets Theorem 1.1 covers, and the positive sides' depth against L. Each needs
matplotlib, imported when drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.hierarchy.evidence import (CANNOT_EXPRESS, CONTROL, EVIDENCE, NO_EVIDENCE, PROVEN, UNTRAINED,
                                             category)
from experiments.hierarchy.rows import NONE_FOUND, table_order
from verify.theorems import floor_root_power_of_two, theorem_1_1_exponent


def plot_min_precision(path: Path, points: list[dict[str, Any]]):
    """p* against log2 n: one colour and marker per depth L, solid for strict semantics and dashed (hollow markers)
    for theory semantics; markers shrink as L grows, so where two depths share a point both stay visible. Returns
    the Figure."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(8, 4.5), layout="constrained")
    axes = figure.subplots()
    depths = sorted({point["L"] for point in points})
    style = {L: (marker, f"C{index}", max(4.0, 10.0 - 2.0 * index))
             for index, (L, marker) in enumerate(zip(depths, "osD^v<>p*h"))}
    for L, semantics in sorted({(point["L"], point["semantics"]) for point in points}):
        found = sorted((p["log2_n"], p["p"]) for p in points
                       if p["L"] == L and p["semantics"] == semantics and p["p"] is not None)
        if found:
            x, y = zip(*found)
            marker, colour, size = style[L]
            strict = semantics == "strict"
            axes.plot(x, y, marker=marker, color=colour, linestyle="-" if strict else "--", markeredgewidth=1.5,
                      fillstyle="full" if strict else "none", markersize=size, label=f"L = {L}, {semantics}")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("log2 n (n = prompt length)")
    axes.set_ylabel("p* (bits): least precision certified for every input")
    axes.set_title("Minimal precision of the (L+1)-layer composition construction")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                title="depth, semantics", title_fontsize=8)
    figure.savefig(path, dpi=110)
    return figure


#: How each category is drawn in the outcome plot, in legend order: (marker, colour, legend words).
CATEGORY_STYLE = {
    PROVEN: ("o", "tab:green", "certified for every input (proof)"),
    EVIDENCE: ("X", "tab:red", "trained, control learned: evidence"),
    NO_EVIDENCE: ("D", "tab:orange", "trained, no control that learned: no evidence"),
    CANNOT_EXPRESS: ("v", "tab:purple", "trained, cannot express the task: no evidence about training"),
    CONTROL: ("s", "tab:blue", "trained control (the yardstick)"),
    UNTRAINED: ("x", "tab:gray", "random/hand-set weights: says nothing"),
}
#: Colour of the budgets Theorem 1.1 covers (Hdp <= n^(2^-(4L+2))) in the outcome plot.
COVERED_COLOUR = "#2ca02c"


def drawn_category(row: dict[str, Any]) -> str | None:
    """The category a row of report.json carries, else the one its fields give (`evidence.category`)."""
    return row.get("category") or category(row.get("status"), row.get("weights"), bool(row.get("control")),
                                           row.get("control_learned"), row.get("expressive"))


def covered_Hdp(row: dict[str, Any], n_ctx: dict[int, int]) -> int | None:
    """The largest Hdp Theorem 1.1 covers at this row's depth and prompt length, floor(n^(2^-(4L+2))): the row's
    `largest_covered_Hdp` where it has one (separation rows), else from its `n_ctx`, else from `n_ctx[L]` (the
    construction's prompt length at that depth, which the probes share); None without a depth or a length."""
    stored = (row.get("largest_covered_Hdp") or {}).get("theorem_1_1")
    if stored is not None:
        return int(stored)
    L = row.get("L")
    n = row.get("n_ctx") or n_ctx.get(L)
    if L is None or not n:  # Theorem 1.1 is about depth-L composition: a row without a depth has no threshold
        return None
    return floor_root_power_of_two(int(n), theorem_1_1_exponent(L))


def _outcome_label(row: dict[str, Any]) -> str:
    head = row["task"] if row["L"] is None else f"L={row['L']}"
    architecture = row["architecture"]
    weights = row.get("weights")
    if weights and not row.get("control") and architecture.endswith(")"):
        architecture = f"{architecture[:-1]}, {weights} weights)"
    return f"{head}: {architecture}"


def _small_panel(axes, members, labels, groups, n_ctx) -> None:
    """Rows at runnable sizes on a linear Hdp axis from 0, with Theorem 1.1's threshold per depth (a green line,
    tiny at these prompt lengths) and its value in words."""
    values = [row["budget"]["Hdp"] for row, _ in members]
    axes.set_xlim(-0.02 * max(values), max(values) * 1.12)  # the threshold line stays clear of the spine
    covered: dict[int, tuple[int, int]] = {}
    for row, _ in members:
        largest = covered_Hdp(row, n_ctx)
        if largest is not None:
            covered.setdefault(row["L"], (largest, row.get("n_ctx") or n_ctx.get(row["L"])))
    for L, (largest, n) in covered.items():
        ys = groups[L]
        axes.plot([largest, largest], [min(ys) - 0.4, max(ys) + 0.4], color=COVERED_COLOUR, linewidth=2.5,
                  solid_capstyle="butt")
        axes.text(largest + 0.02 * max(values), (min(ys) + max(ys)) / 2,
                  f"Theorem 1.1 covers only\nHdp ≤ {largest:,} at n = {n}", fontsize=7, va="center", color="#1b6e1b")
    axes.set_xlabel("Hdp (heads × head dimension × bits), linear scale")


def _theorem_panel(axes, members, labels, n_ctx) -> None:
    """Theorem-scale rows on a log Hdp axis, each with the band of budgets Theorem 1.1 covers at its n."""
    values = [row["budget"]["Hdp"] for row, _ in members]
    values += [covered_Hdp(row, n_ctx) or row["budget"]["Hdp"] for row, _ in members]
    low, high = min(values) / 40, max(values) * 4  # room left of each point for its words
    axes.set_xscale("log")
    axes.set_xlim(low, high)
    for row, _ in members:
        largest = covered_Hdp(row, n_ctx)
        if largest is None:
            continue
        y, Hdp = labels.index(_outcome_label(row)), row["budget"]["Hdp"]
        axes.barh(y, largest - low, left=low, height=0.55, color=COVERED_COLOUR, alpha=0.25, zorder=1)
        axes.plot([largest, largest], [y - 0.3, y + 0.3], color=COVERED_COLOUR, linewidth=2.5)
        axes.annotate(f"Hdp {Hdp:,} {'≤' if Hdp <= largest else '>'} {largest:,}", (Hdp, y), xytext=(0, 9),
                      textcoords="offset points", ha="right", va="bottom", fontsize=7, color="#1b6e1b")
    axes.set_xlabel("Hdp, log scale")


def plot_outcomes(path: Path, rows: list[dict[str, Any]]):
    """One line per row (depth, architecture, weights), its budget Hdp on x, its marker its category. Separation
    rows (theorem scale) sit on a second, log-scaled panel beside the rows at runnable sizes (a broken x axis);
    on both, green marks the budgets Theorem 1.1 covers at the row's prompt length. Returns the Figure."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    drawn = [(row, drawn_category(row)) for row in sorted(rows, key=table_order) if row.get("budget")]
    drawn = [(row, kind) for row, kind in drawn if kind in CATEGORY_STYLE]
    figure = Figure(figsize=(12, 0.32 * max(1, len({_outcome_label(row) for row, _ in drawn})) + 2.6),
                    layout="constrained")
    if not drawn:
        axes = figure.subplots()
        axes.text(0.5, 0.5, "no row with a budget and an outcome to draw", ha="center", va="center")
        axes.set_axis_off()
        figure.savefig(path, dpi=110)
        return figure
    n_ctx: dict[int, int] = {}
    for row, _ in drawn:
        if row.get("n_ctx") and row["L"] is not None:
            n_ctx.setdefault(row["L"], int(row["n_ctx"]))
    labels = list(dict.fromkeys(_outcome_label(row) for row, _ in drawn))
    groups: dict[Any, list[int]] = {}
    for row, _ in drawn:
        groups.setdefault(row["task"] if row["L"] is None else row["L"], []).append(labels.index(_outcome_label(row)))
    is_theorem = [row["stage"] == "separation" or bool(row.get("largest_covered_Hdp")) for row, _ in drawn]
    theorem = [entry for entry, big in zip(drawn, is_theorem) if big]
    small = [entry for entry, big in zip(drawn, is_theorem) if not big]
    if theorem and small:
        left, right = figure.subplots(1, 2, sharey=True, width_ratios=[2, 1], gridspec_kw={"wspace": 0.02})
        panels = [(left, small), (right, theorem)]
        left.set_title("constructions and probes at runnable sizes", fontsize=9)
        right.set_title("theorem scale: separation rows", fontsize=9)
        right.tick_params(axis="y", left=False)
        left.spines["right"].set_linestyle((0, (4, 4)))
        right.spines["left"].set_linestyle((0, (4, 4)))
    else:
        left = figure.subplots()
        panels = [(left, small or theorem)]
    for axes, members in panels:
        if members is small:
            _small_panel(axes, members, labels, groups, n_ctx)
        else:
            _theorem_panel(axes, members, labels, n_ctx)
        for row, kind in members:
            marker, colour, _ = CATEGORY_STYLE[kind]
            paint = {"color": colour} if marker == "x" else {  # hollow: no failing input found
                "facecolors": "none" if row["status"] == NONE_FOUND else colour, "edgecolors": colour}
            axes.scatter(row["budget"]["Hdp"], labels.index(_outcome_label(row)), marker=marker, s=70, zorder=3,
                         linewidths=1.5, **paint)
        axes.grid(True, axis="x", alpha=0.3)
        for ys in list(groups.values())[1:]:
            axes.axhline(min(ys) - 0.5, color="#bbbbbb", linewidth=0.8)
    left.set_yticks(range(len(labels)), labels, fontsize=8)
    left.set_ylim(len(labels) - 0.5, -0.5)
    figure.suptitle("Outcome of each row against its budget Hdp: what it proves, and what it is evidence of",
                    fontsize=11)
    kinds = {kind for _, kind in drawn}
    handles = [Line2D([], [], linestyle="", marker=marker, color=colour, markersize=8, markeredgewidth=1.5,
                      label=words) for kind, (marker, colour, words) in CATEGORY_STYLE.items() if kind in kinds]
    if any(row["status"] == NONE_FOUND for row, _ in drawn):
        handles.append(Line2D([], [], linestyle="", marker="o", color="black", fillstyle="none", markersize=8,
                              label="hollow: no failing input found"))
    if any(covered_Hdp(row, n_ctx) is not None for row, _ in drawn):
        handles.append(Patch(color=COVERED_COLOUR, alpha=0.5,
                             label="budgets Theorem 1.1 covers: Hdp ≤ n^(2^-(4L+2)) at the row's prompt length n"))
    figure.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    figure.savefig(path, dpi=110)
    return figure


def plot_depths(path: Path, curves: list[dict[str, Any]]):
    """Layers against L, one line per construction as compiled at each L (report.json's `depths`), each point
    labelled with the tokens the network generates per input where it generates any. The curves are nudged apart
    along x and their markers shrink in turn, so where several share a point (at L = 1 most have two layers) every
    one stays visible. A construction without a network is not drawn (the report lists it as not available).
    Returns the Figure."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    drawn = [curve for curve in curves if curve["L"]]
    figure = Figure(figsize=(9, 4.8), layout="constrained")
    axes = figure.subplots()
    nudge = 0.12
    for index, curve in enumerate(drawn):
        shift = (index - (len(drawn) - 1) / 2) * nudge
        x = [L + shift for L in curve["L"]]
        colour = f"C{index}"
        axes.plot(x, curve["layers"], marker="osD^v<>"[index % 7], color=colour, markersize=max(4.0, 9.0 - index),
                  linestyle="-" if curve["causal"] else "--", label=curve["label"])
        for L, layers, generated in zip(x, curve["layers"], curve["generated"]):
            if generated:
                axes.annotate(str(generated), (L, layers), xytext=(0, -13), textcoords="offset points",
                              ha="center", fontsize=7, color=colour)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylim(0, max((max(curve["layers"]) for curve in drawn), default=1) + 1)
    axes.set_xlabel("L (composition steps)")
    axes.set_ylabel("layers of the compiled network")
    axes.set_title("Depth against L: one pass (decoder, encoder) or a few layers and generated tokens")
    axes.grid(True, alpha=0.3)
    figure.legend(fontsize=8, loc="outside lower center", ncols=2, frameon=False, title_fontsize=8,
                  title="construction (dashed: no causal mask); a number under a marker: tokens generated per input")
    figure.savefig(path, dpi=110)
    return figure
