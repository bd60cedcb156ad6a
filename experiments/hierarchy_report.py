"""The written form of `witness hierarchy`: DIR/report.md and the two plots, from the report's JSON object.

Nothing here computes a verdict; it lays out the rows `experiments.hierarchy` produced. Paths in the report are
relative to DIR, so every command it prints runs from there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments import capacity

#: Row statuses. Only CERTIFIED is a statement about every input.
CERTIFIED, UNKNOWN, FAILURES, NONE_FOUND, NOT_AVAILABLE = (
    "certified", "unknown", "failures found", "none found", "not available")
PLOTS = ("plots/min_precision.png", "plots/outcomes.png")
#: The output the executor gives where the largest logit is not unique (docs/conventions.md).
TIE = -1


def replay_command(row: dict[str, Any], tokens: list[int]) -> str:
    return (f"witness run {row['network']} --tokens {','.join(map(str, tokens))} --format {row['format']} "
            f"--semantics {row['semantics']}")


def _order(row: dict[str, Any]) -> tuple:
    stage = {"construction": 0, "separation": 1}.get(row["stage"], 2)
    return (row["L"] is None, row["L"] or 0, stage, row["name"])


def _cell(value: Any) -> str:
    return "—" if value is None else str(value)


def results_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| L | task | architecture | network | H·d·p = Hdp | C (state bits) | N·log2 N | failing / tried "
             "| outcome | what it shows |",
             "|---:|---|---|---|---:|---:|---:|---:|---|---|"]
    for row in sorted(rows, key=_order):
        b = row.get("budget") or {}
        network = f"`{row['network']}`" if row.get("network") else "—"
        tried = f"{row['failing']} / {row['tried']} at {row['format']}" if "tried" in row else "—"
        hdp = f"{b['H']}·{b['d']}·{b['p']} = {b['Hdp']}" if b.get("Hdp") is not None else "—"
        outcome = f"**{row['status']}**" + (f" ({row['category']})" if row.get("category") not in (None, PROVEN)
                                            else "")
        lines.append(f"| {_cell(row['L'])} | {row['task']} | {row['architecture']} | {network} | {hdp} "
                     f"| {_cell(b.get('state_bits', 0 if b else None))} | {_cell(row.get('table_bits'))} | {tried} "
                     f"| {outcome} | {row['evidence']} |")
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
    outputs = [failure["output"] for row in rows for failure in row.get("failures", [])[:1]] + \
              [pair["output"] for row in rows for pair in row.get("pairs", [])[:1]]
    if TIE in outputs:
        lines += ["", f"An output of {TIE} is a tie: no unique largest logit at the read position, so the network "
                      "gives no answer, and a tie counts as wrong."]
    return lines or ["No probe found a failure."]


def certificate_lines(rows: list[dict[str, Any]]) -> list[str]:
    return [f"* `witness check-certificate {row['certificate']}" + (f" {row['network']}`" if row.get("network")
                                                                    else "`")
            for row in sorted(rows, key=_order) if row.get("certificate")] or ["No row was certified."]


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_lines(report: dict[str, Any]) -> list[str]:
    """At most ten lines that keep apart what is proven, what is evidence and what is neither."""
    rows = report["rows"]
    of = {name: [row for row in rows if row.get("category") == name] for name in CATEGORY_STYLE}
    constructions = [row for row in of[PROVEN] if row["stage"] == "construction"]
    separations = [row for row in of[PROVEN] if row["stage"] == "separation"]
    semantics = sorted({row["semantics"] for row in constructions})
    bits = sorted(row["budget"]["p"] for row in constructions)
    depths = sorted({row["L"] for row in constructions if row["task"] == "composition"})
    composition = len(constructions) - sum(row["task"] == "two_sum" for row in constructions)
    what = "; ".join(([f"{composition} for composition at L = {', '.join(map(str, depths))}"] if depths else [])
                     + ([f"{len(constructions) - composition} for 2-Sum"] if composition < len(constructions) else []))
    lines = [f"* **Proven** (a certificate for every input; `witness check-certificate` re-checks it, commands "
             f"below): {_count(len(constructions), 'construction')} ({what or 'none'}) at their minimal precision "
             f"p* ({bits[0]}–{bits[-1]} bits, {', '.join(semantics)} semantics)" * bool(constructions)
             + ("* **Proven**: nothing certified" if not constructions else "")
             + "".join(f"; the separation at the theorem's own scale, L = {row['L']} (log2 n = "
                       f"{row['prompt_length_log2']}, Hdp {row['budget']['Hdp']:,}, {row['semantics']})"
                       for row in separations) + "."]
    if not (of[EVIDENCE] or of[NO_EVIDENCE] or of[CONTROL]):
        lines.append("* **Evidence** from trained probes: none; this configuration trains no probe.")
    elif of[EVIDENCE]:
        lines.append(f"* **Evidence** (trained probes whose trained control learned at the same format): "
                     + ", ".join(f"{row['name']} ({row['failing']} of {row['tried']} inputs failed)"
                                 for row in of[EVIDENCE]) + " — training did not find a solution; none exists is "
                     "not proven.")
    else:
        lines.append("* **Evidence** from trained probes: none — no trained control learned the task at its "
                     "construction's p* format, so no trained probe row counts.")
    curve = report.get("capacity")
    if curve:
        learned = sorted({entry["size"] for entry in curve["summary"] if entry["architecture"] == capacity.CONTROL
                          and entry["control_learned"]})
        fell = [entry for entry in curve["summary"] if entry["architecture"] != capacity.CONTROL
                and entry["control_learned"] and entry["mean"] < capacity.LEARNED]
        spec = curve["spec"]
        best = max(fell, key=lambda entry: entry["mean"], default=None)
        head = f"* **Capacity curve** (L = {spec['L']}, {spec['format']} {spec['semantics']}): "
        if not learned:
            lines.append(head + "the control learned at no size, so no point of the curve is evidence.")
        else:
            lines.append(head + f"the control learned at N = {', '.join(map(str, learned))}"
                         + (f"; {_count(len(fell), 'point')} of other architectures fell there (best: "
                            f"{best['architecture']}, {best['mean']:.2f} at N = {best['size']}) — training did not "
                            "find a solution at this budget, which does not prove that none exists" if best else
                            "; every other architecture learned there too") + ".")
    neither = len(of[UNTRAINED]) + len(of[NO_EVIDENCE])
    unknown = sum(row["status"] in (UNKNOWN, NOT_AVAILABLE) for row in rows)
    lines.append(f"* **Neither**: {_count(len(of[UNTRAINED]), 'probe')} with random or hand-set weights (their "
                 f"failures say nothing about the architecture), {len(of[NO_EVIDENCE])} trained "
                 f"probe{'' if len(of[NO_EVIDENCE]) == 1 else 's'} whose control did not learn"
                 + (f"; {unknown} unknown or not available" if unknown else "") + "." if neither or unknown else
                 "* **Neither**: no such rows.")
    lines.append("* " + trained_words(report))
    if report.get("quick"):
        lines.insert(0, "* **Smoke run** (`--quick`): small sizes, few inputs, a few training steps — it shows that "
                        "the pipeline runs end to end; none of its trained rows is evidence.")
    return lines


def trained_words(report: dict[str, Any]) -> str:
    """Where the trained weights came from, and whether the stored ones were reproduced here."""
    info = report["trained"]
    if info["mode"] == "none":
        return "**Trained weights**: none in this configuration."
    if info["mode"] == "trained here":
        return ("**Trained weights**: trained in this run (`trained.json` stores them, so a later run can replay "
                "them with `--stored`).")
    checks = info["checks"]
    if checks and all(check["matched"] for check in checks):
        verdict = "; ".join(f"{check['what']} retrained here: {check['detail']}" for check in checks)
        return (f"**Trained weights** replayed from `{info['store']}` (searched here, not retrained); replay check "
                f"passed: {verdict}.")
    failed = "; ".join(f"{check['what']}: {check['detail']}" for check in checks if not check["matched"])
    return (f"**Trained weights** replayed from `{info['store']}` (searched here) — **the replay check FAILED**: "
            f"{failed}. The stored networks were not reproduced on this machine (another trainer, torch or "
            "processor); `witness hierarchy --full` trains them here.")


def _not_untrained(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if row.get("category") != UNTRAINED]


def write(out: Path, report: dict[str, Any]) -> list[str]:
    """Write DIR/report.md and the plots; return the plots drawn (none without matplotlib, which the report says)."""
    rows = report["rows"]
    try:
        plot_min_precision(out / PLOTS[0], report["precision"])
        plot_outcomes(out / PLOTS[1], rows)
        drawn = list(PLOTS)
        plots = [f"![p* against log2 n]({PLOTS[0]})"]
        outcome_plot = [f"![outcome against budget]({PLOTS[1]})", ""]
    except ImportError:
        drawn, outcome_plot = [], []
        plots = ["Plots not drawn: they need matplotlib (`pip install -e '.[plots]'`)."]
    missing = sorted({row["name"] for row in rows if row["status"] == NOT_AVAILABLE})
    curve = []
    if "capacity" in report:
        source = report["capacity"].get("replayed_from")
        curve = ["## Capacity curves: where trained architectures part", "",
                 *([f"Rows replayed from `{source}`, not trained in this run (one point was retrained here: see "
                    "the summary).", ""] if source else []),
                 capacity.markdown(report["capacity"], heading="###")]
        try:
            capacity.plot(report["capacity"], out / "plots" / "capacity.png")
            drawn.append("plots/capacity.png")
            curve += ["![accuracy against N log2 N / C](plots/capacity.png)", ""]
        except ImportError:
            pass
    untrained = [row for row in rows if row.get("category") == UNTRAINED]
    lines = [
        "# The hierarchy, reproduced",
        "",
        f"Written by `witness hierarchy` ({report['engine']}; stages: "
        + ", ".join(f"{name} {value:.0f} s" for name, value in report["seconds"].items()) + "). Every path below is "
        "relative to this folder; run the commands from here.",
        "",
        "## Summary",
        "",
        *summary_lines(report),
        "",
        "Formats are those of each row (`float:M,E`: M mantissa and E exponent bits plus a sign; fp16, fp32, ...); "
        "**strict** semantics rounds every operation to the format (round to nearest even, with subnormals), "
        "**theory** rounds what leaves a block and is exact inside it (docs/conventions.md §3).",
        "",
        "## Certified constructions and trained networks",
        "",
        "A **certified** row is a proof for every input at its format and semantics; a probe row reports what a "
        "search found in *one* network (a failure replays; \"none found\" counts inputs tried, it proves nothing). "
        "A trained probe counts as evidence only where the trained control (L + 1 full layers, same budget, format "
        "and protocol) learned: at most 2% of its inputs failed.",
        "",
        *results_table(_not_untrained(rows)),
        "",
        "Budget: H heads, d = max(d_head, ⌈d_model/H⌉), p bits of the format (a construction's p is its p*, the "
        "fewest bits at which certify proves it; each probe runs at the p* format of the construction it is "
        "compared with), Hdp = H·d·p; C is the state the recurrent layers carry between positions, in bits; "
        "N·log2 N is what the last table z_L holds (N = N_{L-1} entries of N values each). Counting forces two "
        f"inputs to share a state only where N·log2 N > C: {forced_text(rows)}.",
        "",
        *outcome_plot,
        *curve,
        "## Untrained weights: failures that say nothing about the architecture",
        "",
        "Random initialisations, and the 2-Sum construction's own weights run under sparse attention: each row is "
        "one network that fails, replayably; it is no evidence about what the architecture can learn or express.",
        "",
        *(results_table(untrained) if untrained else ["No such row."]),
        "",
        "## Do the theorems cover these sizes?",
        "",
        *bounds_table(report["bounds"]),
        "",
        "The lower bounds are asymptotic: at a prompt length a laptop can run they cover only tiny budgets (the "
        "smallest n they cover at these Hdp is astronomically large), so a probe failure at these sizes is evidence "
        "about one random or trained network, not an instance of a theorem. The separation rows are the exception: "
        "there the construction is certified, by its parametric description, at a prompt length where Theorem 1.1 "
        "covers its budget, so its certificate (witness's) and the theorem (the paper's) speak of one budget. "
        "Theorem 1.2 (Ye et al.) gives no constants: its two columns are the quantities inside O and Ω, not "
        "thresholds.",
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


def write_unfinished(out: Path, report: dict[str, Any], state: str) -> None:
    """DIR/report.md and report.json of a run that has not finished: what state it is in and what finished.
    Written when a run starts and after each stage, so a run stopped by any means leaves a folder that says so."""
    done = report["finished_stages"]
    lines = ["# The hierarchy — NOT FINISHED", "",
             f"This run of `witness hierarchy` has not finished ({state}). Stages finished: "
             f"{', '.join(done) if done else 'none'}. If no `witness hierarchy` is still writing to this folder, "
             "the run was stopped before its end: the rows below are what finished, nothing else here is a result, "
             "and rerunning the command writes the whole report.", ""]
    if report["rows"]:
        lines += ["## Rows finished so far", "", *results_table(report["rows"]), ""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    (out / "report.json").write_text(json.dumps({**report, "state": state}, indent=1), encoding="utf-8")


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


#: What an outcome row is worth (`row["category"]`, else `category(row)`): only PROVEN is a statement about every
#: input; a trained row is EVIDENCE only where the trained control learned the task; UNTRAINED rows (random or
#: hand-set weights) say nothing about what the architecture can do.
PROVEN = "proven"
EVIDENCE = "evidence"
NO_EVIDENCE = "no evidence"
UNTRAINED = "untrained weights"
CONTROL = "trained control"
#: How each category is drawn in the outcome plot, in legend order: (marker, colour, legend words).
CATEGORY_STYLE = {
    PROVEN: ("o", "tab:green", "certified for every input (proof)"),
    EVIDENCE: ("X", "tab:red", "trained, control learned: evidence"),
    NO_EVIDENCE: ("D", "tab:orange", "trained, no control that learned: no evidence"),
    CONTROL: ("s", "tab:blue", "trained control (the yardstick)"),
    UNTRAINED: ("x", "tab:gray", "random/hand-set weights: says nothing"),
}
#: Colour of the budgets Theorem 1.1 covers (Hdp <= n^(2^-(4L+2))) in the outcome plot.
COVERED_COLOUR = "#2ca02c"


def category(row: dict[str, Any]) -> str | None:
    """The category of a row that carries none: certified -> PROVEN; a trained control -> CONTROL; random or
    natural (hand-set) weights -> UNTRAINED; trained weights -> EVIDENCE where its control learned, else
    NO_EVIDENCE; anything else (unknown, not available) -> None, not drawn."""
    if row.get("status") == CERTIFIED:
        return PROVEN
    if row.get("status") in (UNKNOWN, NOT_AVAILABLE):
        return None
    if row.get("control"):
        return CONTROL
    if row.get("weights") in ("random", "natural"):
        return UNTRAINED
    if row.get("weights") == "trained":
        return EVIDENCE if row.get("control_learned") is True else NO_EVIDENCE
    return None


def covered_Hdp(row: dict[str, Any], n_ctx: dict[int, int]) -> int | None:
    """The largest Hdp Theorem 1.1 covers at this row's depth and prompt length, floor(n^(2^-(4L+2))): the row's
    `largest_covered_Hdp` where it has one (separation rows), else from its `n_ctx`, else from `n_ctx[L]` (the
    construction's prompt length at that depth, which the probes share); None without a depth or a length."""
    stored = (row.get("largest_covered_Hdp") or {}).get("theorem_1_1")
    if stored is not None:
        return int(stored)
    L = row.get("L")
    n = row.get("n_ctx") or n_ctx.get(L)
    if L is None or not n or row.get("task", "composition") != "composition":
        return None
    from verify.theorems import floor_root_power_of_two, theorem_1_1_exponent

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

    drawn = [(row, row.get("category") or category(row)) for row in sorted(rows, key=_order) if row.get("budget")]
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
        if row.get("n_ctx") and row["L"] is not None and row.get("task") == "composition":
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
