"""A capacity curve in words and pictures: what each point says (`standing`), the markdown page, the plot, and
`write`, which puts capacity.json, capacity.md and capacity.png in a folder. The curve itself (its specification,
jobs, rows and summary) is `experiments.capacity`'s."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

from experiments import capacity_law
from experiments.capacity import CONTROL, LEARNED, CapacitySpec
from lab.rates import sweep_steps

#: What a point of an architecture that cannot express the task (`lab.architectures.cannot_express`) says.
CANNOT_EXPRESS = "cannot express the task (no weights answer every input): no evidence about training"


def standing(entry: dict[str, Any]) -> str:
    """What one point of the curve says, in words: a fall counts only where the control learned; past C (N log2 N
    > C) counting forces every network of the architecture to answer some input wrong, below C it forces nothing,
    and the fall is then not forced by counting -- training, or the architecture's form (its layers, MLP and key
    width), may explain it, and one curve cannot tell which. Counting forces one wrong input, not a fall to chance:
    where the same architecture fell below C too, the fall past it need not be forced either, and the words say so.
    An architecture that cannot express the task says nothing about training, wherever the control learned."""
    if entry["architecture"] == CONTROL:
        return "control: learned" if entry["control_learned"] else "control: did NOT learn"
    if entry.get("expressive") is False:
        return CANNOT_EXPRESS
    if not entry["control_learned"]:
        return "no evidence (control did not learn)"
    if entry["mean"] >= LEARNED:
        return "learned too"
    if entry["ratio"] is None:
        return "fell where the control learned (no recurrent state: CPW's side)"
    if entry["ratio"] > 1 and entry.get("fell_below_c"):
        return ("fell past C, where the control learned: counting forces some input wrong here, but this "
                "architecture fell below C too, so training or its form may explain the fall")
    if entry["ratio"] > 1:
        return "fell past C, where the control learned: where counting forces some input wrong"
    return "fell below C, where the control learned: not forced by counting (training or the architecture's form)"


def row_text(spec: CapacitySpec, entry: dict[str, Any], ratio: str) -> str:
    """One table row; the d_head and chosen-lr columns only where the curve scans them (`markdown`)."""
    scanned = (f"{entry['d_head']} | " if len(spec.d_heads) > 1 else "") + (
        ", ".join(f"{lr:g}" for lr in entry["lrs"]) + " | " if spec.lr_sweep else "")
    return (f"| {entry['size']} | {entry['table_bits']:.1f} | {ratio} | {entry['architecture']} | {scanned}"
            f"{entry['budget']['Hdp']} | {entry['state_bits']} | {entry['mean']:.3f} "
            f"({entry['min']:.3f}–{entry['max']:.3f}) | {entry['mean_fp64']:.3f} | {standing(entry)} |")


def head_widths(spec: CapacitySpec) -> str:
    """The budget's head width(s) in words: one as every curve before `d_heads` said it, several with why they are
    one budget."""
    if len(spec.d_heads) == 1:
        return f"d_head {spec.d_heads[0]}"
    return (f"d_head {', '.join(map(str, spec.d_heads))} (every architecture at each, all one Hdp: d = max(d_head, "
            f"ceil(d_model / H)) = {spec.budget_d(spec.d_head)}; each is judged against the control at its d_head)")


def learning_rates(spec: CapacitySpec) -> str:
    """The learning-rate protocol in words."""
    if not spec.lr_sweep:
        return f"peak lr {spec.lr:g}"
    rates = ", ".join(f"{lr:g}" for lr in spec.lr_sweep)
    return (f"peak lr chosen for each (N, architecture, d_head, seed) among {rates} by `lab.train.sweep_lr`"
            f" ({sweep_steps(spec.steps)} steps at each, the most accurate on a "
            "validation stream; the same sweep for every architecture)")


def _hop_targets(rows: list[dict[str, Any]]) -> str:
    """The intermediate-hop loss the rows trained with, in words (the trainer's default applies where L >= 2)."""
    weights = sorted({row["hop_weight"] for row in rows})
    if weights == [0]:
        return "no hop targets"
    return ("hop targets (each intermediate hop read out after its layer) of weight "
            + ", ".join(f"{w:g}" for w in weights))


def markdown(curve: dict[str, Any]) -> str:
    """The curve as a page. A curve of the protocol stored before d_heads, lr_sweep and MLPs could vary (one
    d_head, one lr, no MLP) reads exactly as it always did."""
    spec = CapacitySpec(**curve["spec"])
    several = len(spec.d_heads) > 1
    hybrids = {(f"{entry['architecture']} (d_head {entry['d_head']})" if several else entry["architecture"]):
               entry["state_bits"] for entry in curve["summary"] if entry["state_bits"]}
    mlp = f", an MLP of width {spec.mlp_ratio}·d_model after every layer" if spec.mlp_ratio else ""
    lines = [f"# Capacity curve, L = {spec.L}", "",
             f"Budget: H {spec.H}, {head_widths(spec)}, d_model {spec.d_model}, evaluated at {spec.format} "
             f"({spec.semantics} semantics: every operation rounded to the format, round to nearest even). "
             f"Protocol: `lab.train.train` from seeded random initialisations, exactly {spec.steps} steps, "
             f"{learning_rates(spec)}{mlp}, {_hop_targets(curve['rows'])}, seeds {list(spec.seeds)}; accuracy = "
             f"fraction of {spec.eval_inputs} held-out inputs whose unique argmax at the read position is the answer, "
             f"run by the executor at {spec.format}. C, the state bits that cross the boundary "
             f"({spec.linear_per_gap} recurrent layer(s) per gap): "
             + ", ".join(f"{name} {bits}" for name, bits in hybrids.items())
             + "; the control and the full layers carry no state.", "", *summary_table(spec, curve["summary"])]
    unable = {entry["architecture"]: entry["why"] for entry in curve["summary"] if entry.get("expressive") is False}
    if unable:
        lines += ["", "Architectures that cannot express the task, whatever their weights (their rows are no "
                      "evidence about training):", ""] + [f"* {name}: {why}." for name, why in unable.items()]
    if spec.judge_formats:
        lines += judged_table(spec, curve["summary"])
    lines += ["", "A fall of a trained architecture where the control learned shows that training at this budget "
              "did not find a solution; it does not prove that none exists. Where N·log2 N <= C the state can "
              "hold the whole table, so a hybrid that learns there is what the theory allows.", ""]
    return "\n".join(lines)


def summary_table(spec: CapacitySpec, summary: list[dict[str, Any]]) -> list[str]:
    """The curve's table at its own format, one row per (N, architecture, d_head): the page's, and the hierarchy's
    where a curve has no judge formats."""
    scanned = ("d_head | " if len(spec.d_heads) > 1 else "") + ("lr (chosen) | " if spec.lr_sweep else "")
    lines = [f"| N | N·log2 N | N·log2 N / C | architecture | {scanned}Hdp | C (state bits) | accuracy mean "
             "(min–max) | fp64 mean | evidence |",
             "|---:|---:|---:|---|" + "---:|" * (scanned.count("|") + 2) + "---|---:|---|"]
    for entry in summary:
        ratio = f"{entry['ratio']:.3g}" if entry["ratio"] is not None else "—"
        lines.append(row_text(spec, entry, ratio))
    return lines


def judged_table(spec: CapacitySpec, summary: list[dict[str, Any]]) -> list[str]:
    """The curve judged at the smallest format at which each point's control learned on every seed
    (`experiments.capacity.judge`), with C and Hdp at that format: the rows a reader may take as evidence."""
    scanned = "d_head | " if len(spec.d_heads) > 1 else ""
    formats = ", ".join(spec.formats_by_bits())
    lines = ["", f"Judged at the format of fewest bits among {formats} at which the control of the same N and "
             f"d_head learned on every seed (each seed at least {LEARNED}), with C and Hdp at that format:", "",
             f"| N | architecture | {scanned}format (p) | Hdp | C (state bits) | N·log2 N / C | accuracy mean "
             "(min–max) | evidence |",
             "|---:|---|" + "---:|" * scanned.count("|") + "---|---:|---:|---:|---|---|"]
    for entry in summary:
        judged = entry["judged"]
        head = f"| {entry['size']} | {entry['architecture']} | " + (f"{entry['d_head']} | " if scanned else "")
        if judged is None:
            lines.append(head + "— | — | — | — | — | no evidence: the control learned on every seed at none of "
                                "these formats |")
            continue
        ratio = f"{judged['ratio']:.3g}" if judged["ratio"] is not None else "—"
        at_format = {**entry, **judged, "control_learned": True}
        lines.append(head + f"{judged['format']} ({judged['bits']}) | {judged['Hdp']} | {judged['state_bits']} | "
                     f"{ratio} | {judged['mean']:.3f} ({judged['min']:.3f}–{judged['max']:.3f}) | "
                     f"{standing(at_format)} |")
    return lines


def plot(curve: dict[str, Any], path: str | Path):
    """Accuracy (mean over seeds, bars from min to max) against N log2 N, one line per architecture; a dashed line
    at each hybrid's C (right of it, counting forces that hybrid's states to collide; a C far right of every N is
    named in the legend only) and a dotted line at chance, 1/N (the answer is one of N values). x ticks name N, with
    a * where the control did not learn (no point at that N is evidence). A curve of several head widths gets one
    panel per d_head, each with its own legend below it (one axes of every line would repeat colours); one head width
    gets one axes with the legend to its right. The legend names each architecture that cannot express the task so.
    Saves to `path`; returns the Figure."""
    from matplotlib.figure import Figure

    spec = CapacitySpec(**curve["spec"])
    several = len(spec.d_heads) > 1
    figure = Figure(figsize=(4.6 * len(spec.d_heads) if several else 9.0, 6.4 if several else 4.2),
                    layout="constrained")
    axes = figure.subplots(1, len(spec.d_heads), squeeze=False, sharey=True)[0]
    for ax, d_head in zip(axes, spec.d_heads):
        handles = _panel(ax, curve, spec, d_head)
        legend = ({"loc": "upper center", "bbox_to_anchor": (0.5, -0.2)} if several else
                  {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)})
        ax.legend(handles=handles, fontsize=7 if several else 8, borderaxespad=0.0,
                  title="accuracy: mean over seeds, bars min–max", title_fontsize=7 if several else 8, **legend)
    title = (f"L = {spec.L}: H {spec.H}, d_head {', '.join(map(str, spec.d_heads))}, d_model {spec.d_model}, "
             f"{spec.steps} steps, {len(spec.seeds)} seeds")
    if several:
        figure.suptitle(title, fontsize=10)
    else:
        axes[0].set_title(title, fontsize=10)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    return figure


def _panel(ax, curve: dict[str, Any], spec: CapacitySpec, d_head: int) -> list:
    """`plot`'s axes for the architectures at one head width; returns the legend's handles."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator

    several = len(spec.d_heads) > 1
    handles = []
    states: dict[int, list[tuple[str, str]]] = {}
    for name in spec.architectures():
        # a summary stored before d_heads existed names no d_head: its one d_head is the spec's
        entries = [entry for entry in curve["summary"]
                   if entry["architecture"] == name and entry.get("d_head", spec.d_head) == d_head]
        if not entries:
            continue
        unable = ": cannot express the task" if entries[0].get("expressive") is False else ""
        x = [entry["table_bits"] for entry in entries]
        mean = np.array([entry["mean"] for entry in entries])
        low = mean - np.array([entry["min"] for entry in entries])
        high = np.array([entry["max"] for entry in entries]) - mean
        handles.append(ax.errorbar(x, mean, yerr=[low, high], marker="o", capsize=3, label=name + unable))
        if entries[0]["state_bits"]:
            states.setdefault(entries[0]["state_bits"], []).append((name, handles[-1][0].get_color()))
    sizes = sorted({entry["size"]: entry["table_bits"] for entry in curve["summary"]}.items())
    learned = {size: all(entry["control_learned"] for entry in curve["summary"]
                         if entry["size"] == size and entry.get("d_head", spec.d_head) == d_head)
               for size, _ in sizes}
    table = [bits for _, bits in sizes]
    shown = [bits for bits in states if bits <= 2.5 * max(table)]  # further right would squeeze every point
    ax.set_xscale("log")
    ax.set_xlim(min(table + shown) / 1.25, max(table + shown) * 1.25)
    for bits, owners in sorted(states.items()):
        names = ", ".join(name for name, _ in owners)
        style = {"color": owners[0][1], "linestyle": "--", "linewidth": 1.2}
        if bits in shown:
            handles.append(ax.axvline(bits, **style, label=f"C = {bits} state bits ({names})"))
        else:
            handles.append(Line2D([], [], **style, label=f"C = {bits} state bits ({names}),\n"
                                                         "off the right edge: N·log2 N < C at every N here"))
    handles += ax.plot(table, [1 / size for size, _ in sizes], color="black", linestyle=":", linewidth=1.5,
                       label="chance: 1/N (the answer is one of N)")
    if not all(learned.values()):
        handles.append(Line2D([], [], linestyle="", label=f"N*: the control's mean < {LEARNED:.0%},\n"
                                                           "so no point at that N is evidence"))
    ax.xaxis.set_major_locator(FixedLocator(table))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"N = {size}{'' if learned[size] else '*'}\n{bits:.0f} bits" for size, bits in sizes],
                       fontsize=7 if several else 8)
    ax.set_xlabel("N·log2 N, the bits in the last table (log scale);\nright of a dashed line, N·log2 N > C"
                  if several else "N·log2 N, the bits in the last table (log scale); right of a dashed line, "
                                  "N·log2 N > C")
    ax.set_ylabel(f"accuracy at {spec.format}")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)
    if several:
        ax.set_title(f"d_head {d_head}", fontsize=9)
    return handles


def write(curve: dict[str, Any], out: str | Path) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.json").write_text(json.dumps(curve, indent=1), encoding="utf-8")
    (out / "capacity.md").write_text(markdown(curve), encoding="utf-8")
    plot(curve, out / "capacity.png")
    if len(CapacitySpec(**curve["spec"]).d_heads) > 1:  # several head widths: where each hybrid falls against them
        capacity_law.write(curve, out)


__all__ = ["standing", "row_text", "head_widths", "learning_rates", "markdown", "summary_table", "judged_table", "plot",
           "write", "CANNOT_EXPRESS"]
