"""The written form of `witness hierarchy`: DIR/report.md and the two plots, from the report's JSON object.

Nothing here computes a verdict; it lays out the rows `verify.hierarchy` produced. Paths in the report are
relative to DIR, so every command it prints runs from there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verify import capacity

#: Row statuses. Only CERTIFIED is a statement about every input.
CERTIFIED, UNKNOWN, FAILURES, NONE_FOUND, NOT_AVAILABLE = (
    "certified", "unknown", "failures found", "none found", "not available")
#: How each status is drawn in the outcome plot: (marker, colour).
STATUS_STYLE = {CERTIFIED: ("o", "tab:green"), FAILURES: ("X", "tab:red"), NONE_FOUND: ("s", "tab:gray"),
                UNKNOWN: ("D", "tab:orange")}
PLOTS = ("plots/min_precision.png", "plots/outcomes.png")


def replay_command(row: dict[str, Any], tokens: list[int]) -> str:
    return (f"witness run {row['network']} --tokens {','.join(map(str, tokens))} --format {row['format']} "
            f"--semantics {row['semantics']}")


def _order(row: dict[str, Any]) -> tuple:
    stage = {"construction": 0, "separation": 1}.get(row["stage"], 2)
    return (row["L"] is None, row["L"] or 0, stage, row["name"])


def _cell(value: Any) -> str:
    return "—" if value is None else str(value)


def results_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| L | task | architecture | network | H | d | p | Hdp | C (state bits) | N·log2 N | failing / tried "
             "| status | evidence |",
             "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for row in sorted(rows, key=_order):
        b = row.get("budget") or {}
        network = f"`{row['network']}`" if row.get("network") else "—"
        tried = f"{row['failing']} / {row['tried']}" if "tried" in row else "—"
        lines.append(f"| {_cell(row['L'])} | {row['task']} | {row['architecture']} | {network} | {_cell(b.get('H'))} "
                     f"| {_cell(b.get('d'))} | {_cell(b.get('p'))} | {_cell(b.get('Hdp'))} "
                     f"| {_cell(b.get('state_bits', 0 if b else None))} | {_cell(row.get('table_bits'))} | {tried} "
                     f"| **{row['status']}** | {row['evidence']} |")
    return lines


def forced_text(rows: list[dict[str, Any]]) -> str:
    forced = [row["name"] for row in rows if row.get("table_bits") is not None
              and 0 < (row.get("budget") or {}).get("state_bits", 0) < row["table_bits"]]
    return f"rows {', '.join(forced)}" if forced else "no row here is that large"


def bounds_table(limits: list[dict[str, Any]]) -> list[str]:
    yes = {True: "yes", False: "no"}
    lines = ["| L | n | Hdp | Thm 1.1 covers it (L−1 full + linear fail) | smallest n Thm 1.1 covers at this Hdp "
             "| CPW covers it (L full fail) | smallest n CPW covers at this Hdp |",
             "|---:|---:|---:|---|---|---|---|"]
    for item in limits:
        if item["task"] != "composition":
            continue
        applies, thresholds = item["applies"], item["thresholds"]
        covered = yes[applies['theorem_1_1.applies']]
        if "separation" in item:
            covered = f"**yes**: the separation, `{item['separation']}`"
        lines.append(f"| {item['L']} | {item['n']} | {item['Hdp']} | {covered} "
                     f"| {thresholds['theorem_1_1.min_n']} | {yes[applies['cpw.applies']]} "
                     f"| {thresholds['cpw.min_n']} |")
    lines += ["", "| 2-Sum n | Hdp of the full-attention construction | one full layer: O(log2 n), the quantity "
                  "| one (B,k)-sparse layer: Ω(B·log2 n), the quantity |", "|---:|---:|---:|---:|"]
    for item in limits:
        if item["task"] == "two_sum":
            thresholds = item["thresholds"]
            lines.append(f"| {item['n']} | {item['Hdp']} | {thresholds['theorem_1_2.full_scale']} "
                         f"| {thresholds['theorem_1_2.sparse_scale']} |")
    return lines


def precision_table(points: list[dict[str, Any]]) -> list[str]:
    lines = ["| L | semantics | m = n_l | prompt length n | log2 n | p* (format) |", "|---:|---|---:|---:|---:|---|"]
    for point in sorted(points, key=lambda p: (p["semantics"], p["L"], p["m"])):
        found = "unknown" if point["p"] is None else f"{point['p']} ({point['format']})"
        lines.append(f"| {point['L']} | {point['semantics']} | {point['m']} | {point['prompt_length']} "
                     f"| {point['log2_n']:.2f} | {found} |")
    return lines


def replay_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for row in sorted(rows, key=_order):
        for failure in row.get("failures", [])[:1]:
            lines.append(f"* {row['name']} (expected {failure['expected']}, output {failure['output']}):")
            lines.append(f"  `{replay_command(row, failure['tokens'])}`")
        for pair in row.get("pairs", [])[:1]:
            lines.append(f"* {row['name']}: a pair with answers {pair['expected_a']} ≠ {pair['expected_b']} and one "
                         f"output {pair['output']}: `{replay_command(row, pair['a'])}` and the same with "
                         f"`--tokens {','.join(map(str, pair['b']))}`")
    return lines or ["No probe found a failure."]


def certificate_lines(rows: list[dict[str, Any]]) -> list[str]:
    return [f"* `witness check-certificate {row['certificate']}" + (f" {row['network']}`" if row.get("network")
                                                                    else "`")
            for row in sorted(rows, key=_order) if row.get("certificate")] or ["No row was certified."]


def write(out: Path, report: dict[str, Any]) -> list[str]:
    """Write DIR/report.md and the plots; return the plots drawn (none without matplotlib, which the report says)."""
    rows = report["rows"]
    try:
        plot_min_precision(out / PLOTS[0], report["precision"])
        plot_outcomes(out / PLOTS[1], rows)
        drawn = list(PLOTS)
        plots = [f"![p* against log2 n]({PLOTS[0]})", "", f"![outcome against budget]({PLOTS[1]})"]
    except ImportError:
        drawn = []
        plots = ["Plots not drawn: they need matplotlib (`pip install -e '.[plots]'`)."]
    missing = sorted({row["name"] for row in rows if row["status"] == NOT_AVAILABLE})
    curve = []
    if "capacity" in report:
        curve = ["## Capacity curves: where trained architectures part", "", capacity.markdown(report["capacity"],
                                                                                            heading="###")]
        try:
            capacity.plot(report["capacity"], out / "plots" / "capacity.png")
            drawn.append("plots/capacity.png")
            curve += ["![accuracy against N log2 N / C](plots/capacity.png)", ""]
        except ImportError:
            pass
    lines = [
        "# The hierarchy, reproduced",
        "",
        f"Written by `witness hierarchy` ({report['engine']}). Every path below is relative to this folder; run "
        "the commands from here. Only a **certified** row is a statement about every input: its certificate is "
        "re-checked by `witness check-certificate`. A probe row reports what a search found in *one* network of "
        "that architecture and budget: a failure is replayable, but it shows that this network fails, not that "
        "every network of the architecture does; \"none found\" is a count of inputs tried, not a proof.",
        "",
        "Seconds per stage: " + ", ".join(f"{name} {value:.0f}" for name, value in report["seconds"].items()) + ".",
        "",
        "## Architectures, budgets and outcomes",
        "",
        *results_table(rows),
        "",
        "Budget: H heads, d = max(d_head, ⌈d_model/H⌉), p bits of the format (a construction's p is its p*, the "
        "fewest bits at which certify proves it; each probe runs at the p* format of the construction it is "
        "compared with), Hdp = H·d·p; C is the state the recurrent layers carry between positions, in bits; "
        "N·log2 N is what the last table z_L holds (N = N_{L-1} entries of N values each). Counting forces two "
        f"inputs to share a state only where N·log2 N > C: {forced_text(rows)}. failing / tried counts every "
        "input the row's probes ran at its format.",
        "",
        *curve,
        "## Do the theorems cover these sizes?",
        "",
        *bounds_table(report["bounds"]),
        "",
        "The lower bounds are asymptotic: at a prompt length a laptop can run they cover only tiny budgets (the "
        "smallest n they cover at these Hdp is astronomically large), so a probe failure at these sizes is evidence "
        "about one random or trained network, not an instance of a theorem. The separation rows are the exception: "
        "there the construction is certified, by its parametric description, at a prompt length where Theorem 1.1 "
        "covers its budget, so its certificate (witness's) and the theorem (the paper's) speak of one budget. Theorem 1.2 (Ye et al.) gives no "
        "constants: its two columns are the quantities inside O and Ω, not thresholds.",
        "",
        "## Minimal precision against prompt length",
        "",
        *precision_table(report["precision"]),
        "",
        *plots,
        "",
        "## Replaying failures",
        "",
        *replay_lines(rows),
        "",
        "## Re-checking certificates",
        "",
        *certificate_lines(rows),
        "",
    ]
    if missing:
        lines += ["## Not available in this install", "", *[f"* {name}" for name in missing], ""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return drawn


def plot_min_precision(path: Path, points: list[dict[str, Any]]) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5))
    axes = figure.subplots()
    series = sorted({(point["L"], point["semantics"]) for point in points})
    for (L, semantics), marker in zip(series, "os^vD<>p*h"):
        found = sorted((p["log2_n"], p["p"]) for p in points
                       if p["L"] == L and p["semantics"] == semantics and p["p"] is not None)
        if found:
            x, y = zip(*found)
            axes.plot(x, y, marker=marker, label=f"L = {L}, {semantics}")
    axes.set_xlabel("log2 n (prompt length n)")
    axes.set_ylabel("p* (bits) at which certify proves the construction")
    axes.set_title("Minimal precision of the (L+1)-layer construction")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def plot_outcomes(path: Path, rows: list[dict[str, Any]]) -> None:
    from matplotlib.figure import Figure

    drawn = [row for row in sorted(rows, key=_order) if row["status"] in STATUS_STYLE and row.get("budget")]
    labels = list(dict.fromkeys(f"{row['task']}: {row['architecture']}" if row["L"] is None
                                else f"L={row['L']}: {row['architecture']}" for row in drawn))
    figure = Figure(figsize=(9, 0.35 * len(labels) + 1.8))
    axes = figure.subplots()
    seen = set()
    for row in drawn:
        label = f"{row['task']}: {row['architecture']}" if row["L"] is None else f"L={row['L']}: {row['architecture']}"
        marker, colour = STATUS_STYLE[row["status"]]
        axes.scatter(row["budget"]["Hdp"], labels.index(label), marker=marker, color=colour, s=60,
                     label=None if row["status"] in seen else row["status"])
        seen.add(row["status"])
    axes.set_yticks(range(len(labels)))
    axes.set_yticklabels(labels, fontsize=8)
    axes.invert_yaxis()
    axes.set_xscale("log")
    axes.set_xlabel("Hdp (heads × head dimension × bits), log scale")
    axes.set_title("Outcome against budget, per architecture")
    axes.grid(True, axis="x", alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
