"""The written form of `witness hierarchy`: DIR/report.md (its summary, tables and prose) from the report's JSON
object, and the plots drawn beside it (`experiments.hierarchy.plots`).

Nothing here computes a verdict; it lays out the rows report.json holds, so it reads them as JSON. Paths in the
report are relative to DIR, so every command it prints runs from there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments.hierarchy.config import COMPOSITION, TWO_SUM
from experiments.hierarchy.curves import capacity_words, curves_section
from experiments.hierarchy.evidence import (CANNOT_EXPRESS, CATEGORIES, CONTROL, EVIDENCE, NO_EVIDENCE, PROVEN,
                                             UNTRAINED)
from experiments.hierarchy.plan import COMPOSITION_REFERENCE, DEPTH_FAMILY
from experiments.hierarchy.plots import plot_depths, plot_min_precision, plot_outcomes
from experiments.hierarchy.rows import EXHAUSTIVE, NOT_AVAILABLE, UNKNOWN, table_order
from experiments.hierarchy.words import ruled_out
from witness.tasks import task_from_params

PLOTS = ("plots/min_precision.png", "plots/outcomes.png", "plots/depths.png")
#: The output the executor gives where the largest logit is not unique (docs/conventions.md).
TIE = -1
#: How the summary names each task of the configuration.
TASK_WORDS = {COMPOSITION: "composition", TWO_SUM: "2-Sum"}


def replay_command(row: dict[str, Any], tokens: list[int]) -> str:
    return (f"witness run {row['network']} --tokens {','.join(map(str, tokens))} --format {row['format']} "
            f"--semantics {row['semantics']}")


def _cell(value: Any) -> str:
    return "—" if value is None else str(value)


def results_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| L | task | architecture | network | H·d·p = Hdp | C (state bits) | N·log2 N | failing / tried "
             "| outcome | what it shows |",
             "|---:|---|---|---|---:|---:|---:|---:|---|---|"]
    for row in sorted(rows, key=table_order):
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
    """Theorem 1.1 and CPW at each composition row's depth, then Theorem 1.2's scales at each 2-Sum row."""
    yes = {True: "yes", False: "no"}
    lines = ["| L | n | Hdp | Thm 1.1 covers it (L−1 full + linear fail) | smallest n Thm 1.1 covers at this Hdp "
             "| CPW covers it (L full fail) | smallest n CPW covers at this Hdp |",
             "|---:|---:|---:|---|---|---|---|"]
    for item in limits:
        if item["task"] != COMPOSITION:
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
        if item["task"] == TWO_SUM:
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


def _family(params: dict[str, Any]) -> str:
    return f"m = {params['m']}, n = {list(params['n'])}"


def _inputs(count: int) -> str:
    """A family's size: exact where it is short, else its order of magnitude (a certified family can be vast)."""
    return f"{count:,}" if count < 10**7 else f"≈ {count:.2e}"


def positive_sides_table(report: dict[str, Any]) -> list[str]:
    """Per depth with positive sides: the certified (L+1)-layer decoder (its construction row), the chain-of-thought
    and encoder rows, and the hybrid Theorem 1.1 rules out (named by its probe rows, which the tables above hold)."""
    rows = {row["name"]: row for row in report["rows"]}
    bounds = {item["L"]: item for item in report["bounds"] if item["task"] == COMPOSITION and "separation" not in item}
    lines = ["| L | architecture | family | layers | generated tokens | H | d_head | d_model | d | p* (format) | Hdp "
             "| inputs | verdict |", "|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]

    def line(L, architecture, family, layers, generated, budget, fmt, inputs, verdict):
        b = budget or {}
        cells = [_cell(b.get(key)) for key in ("H", "d_head", "d_model", "d")]
        p = f"{b['p']} ({fmt})" if b.get("p") is not None else "—"
        lines.append(f"| {L} | {architecture} | {family} | {_cell(layers)} | {_cell(generated)} | {' | '.join(cells)} "
                     f"| {p} | {_cell(b.get('Hdp'))} | {inputs} | {verdict} |")

    for L in sorted(dict.fromkeys(row["L"] for row in report["positive_sides"])):
        decoder = rows.get(COMPOSITION_REFERENCE.format(L=L))
        if decoder is not None:
            certificate = f" (`{decoder['certificate']}`)" if decoder.get("certificate") else ""
            line(L, decoder["architecture"], _family(decoder["params"]), (decoder.get("budget") or {}).get("n_layers"),
                 0, decoder.get("budget"), decoder.get("format"),
                 _inputs(task_from_params(COMPOSITION, decoder["params"]).count()),
                 f"**{decoder['status']}**: {decoder['evidence']}{certificate}")
        for row in (row for row in report["positive_sides"] if row["L"] == L):
            line(L, row["architecture"], _family(row["params"]), row.get("layers"), row.get("generated"),
                 row.get("budget"), row.get("format"), _inputs(row["inputs"]) if "inputs" in row else "—",
                 f"**{row['status']}**: {row['evidence']}")
        hybrids = [row for row in report["rows"] if row["name"].startswith(f"L{L}_hybrid_")]
        if hybrids and L in bounds:
            item, first = bounds[L], hybrids[0]
            separation = rows.get(f"L{L}_separation")
            probes = [f"{row['name']} ({row['status']}, {row['failing']} / {row['tried']})" for row in hybrids]
            verdict = ruled_out(L, item["applies"]["theorem_1_1.applies"], item["n"], item["Hdp"],
                                item["thresholds"]["theorem_1_1.min_n"],
                                None if separation is None else separation["name"], probes)
            line(L, first["architecture"], _family(first["params"]), first["budget"].get("n_layers"), 0,
                 first["budget"], first["format"], "—", verdict)
    return lines


def positive_sides_section(report: dict[str, Any], depth_plot: list[str]) -> list[str]:
    """The positive sides beside the decoder and the hybrid Theorem 1.1 rules out, and the depth plot."""
    if not (report["positive_sides"] or report["depths"]):
        return []
    lines = ["## The positive sides: depth, generated tokens and budget", "",
             "Three ways to solve L-step composition (CPW): the (L+1)-layer decoder in one pass; a constant-depth "
             "decoder that generates a chain of thought, one hop per generated token (2 layers, or 1 layer whose "
             "tokens carry pairs); and an encoder (no causal mask) that composes by pointer doubling. The decoder "
             "row is the certified construction row above, at the configuration's family; the chain-of-thought and "
             "encoder rows are at a small family, where every input is run at every format the p* search tries "
             "(`witness min-precision NAME --method exhaustive`): a proof for that family, format and semantics, but "
             "no certificate — the trusted checker does not know these constructions yet. Layers and generated "
             "tokens are read from the compiled networks. Beside them, the hybrid Theorem 1.1 rules out, by its probe "
             "rows.",
             ""]
    if report["positive_sides"]:
        lines += [*positive_sides_table(report), ""]
    if depth_plot:
        depths = sorted({L for curve in report["depths"] for L in curve["L"]})
        lines += [f"Layers against L = {depths[0]} … {depths[-1]}, each network compiled at m = n_l = {DEPTH_FAMILY} "
                  "(the plot reads how many layers each has and how many tokens it generates; it checks no answer):",
                  "", *depth_plot]
    return lines


def replay_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for row in sorted(rows, key=table_order):
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
            for row in sorted(rows, key=table_order) if row.get("certificate")] or ["No row was certified."]


def _span(values: list[int]) -> str:
    """The range of sorted values, or the one value they all are."""
    return str(values[0]) if values[0] == values[-1] else f"{values[0]}–{values[-1]}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _proven_words(constructions: list[dict[str, Any]]) -> str:
    """How many constructions of each task are certified, and at which depths."""
    parts = []
    for task in dict.fromkeys(row["task"] for row in constructions):
        of_task = [row for row in constructions if row["task"] == task]
        depths = sorted({row["L"] for row in of_task if row["L"] is not None})
        parts.append(f"{len(of_task)} for {TASK_WORDS.get(task, task)}"
                     + (f" at L = {', '.join(map(str, depths))}" if depths else ""))
    return "; ".join(parts)


def summary_lines(report: dict[str, Any]) -> list[str]:
    """At most ten lines that keep apart what is proven, what is evidence and what is neither."""
    rows = report["rows"]
    of = {name: [row for row in rows if row.get("category") == name] for name in CATEGORIES}
    constructions = [row for row in of[PROVEN] if row["stage"] == "construction"]
    separations = [row for row in of[PROVEN] if row["stage"] == "separation"]
    semantics = sorted({row["semantics"] for row in constructions})
    bits = sorted(row["budget"]["p"] for row in constructions)
    lines = [f"* **Proven** (a certificate for every input; `witness check-certificate` re-checks it, commands "
             f"below): {_count(len(constructions), 'construction')} ({_proven_words(constructions) or 'none'}) at "
             f"their minimal precision p* ({_span(bits)} bits, {', '.join(semantics)} semantics)"
             * bool(constructions)
             + ("* **Proven**: nothing certified" if not constructions else "")
             + "".join(f"; the separation at the theorem's own scale, L = {row['L']} (log2 n = "
                       f"{row['prompt_length_log2']}, Hdp {row['budget']['Hdp']:,}, {row['semantics']})"
                       for row in separations) + "."]
    verified = [row for row in report["positive_sides"] if row["status"] == EXHAUSTIVE]
    if report["positive_sides"]:
        bits = sorted(row["budget"]["p"] for row in verified)
        others = len(report["positive_sides"]) - len(verified)
        lines.append("* **Verified by running every input** (exhaustive, small families; no certificate): "
                     + (f"{_count(len(verified), 'positive side')} (chain of thought and encoder at L = "
                        f"{', '.join(map(str, sorted({row['L'] for row in verified})))}) at their p* "
                        f"({_span(bits)} bits, {', '.join(sorted({row['semantics'] for row in verified}))} semantics)"
                        if verified else "no positive side")
                     + (f"; {others} not verified or not available (their table says why)" if others else "") + ".")
    if not (of[EVIDENCE] or of[NO_EVIDENCE] or of[CANNOT_EXPRESS] or of[CONTROL]):
        lines.append("* **Evidence** from trained probes: none; this configuration trains no probe.")
    elif of[EVIDENCE]:
        lines.append("* **Evidence** (trained probes whose trained control learned at the same format): "
                     + ", ".join(f"{row['name']} ({row['failing']} of {row['tried']} inputs failed)"
                                 for row in of[EVIDENCE]) + " — training did not find a solution; none exists is "
                     "not proven.")
    elif not of[CANNOT_EXPRESS]:
        lines.append("* **Evidence** from trained probes: none — no trained control learned the task at its "
                     "construction's p* format, so no trained probe row counts.")
    else:
        lines.append("* **Evidence** from trained probes: none — "
                     + ("where a trained probe's architecture may express the task, no trained control of its depth "
                        "learned it at the construction's p* format; the other probes' architectures cannot express "
                        "it (next line)." if of[NO_EVIDENCE] else
                        "every trained probe is of an architecture that cannot express the task (next line)."))
    if of[CANNOT_EXPRESS]:
        lines.append("* **Cannot express the task** (proven for the architecture, whatever its weights, so these "
                     "trained rows say nothing about training): " + ", ".join(row["name"] for row in of[CANNOT_EXPRESS])
                     + ".")
    lines += [capacity_words(curve) for curve in report["capacity"]]
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
        drawn = list(PLOTS[:2])
        plots = [f"![p* against log2 n]({PLOTS[0]})"]
        outcome_plot = [f"![outcome against budget]({PLOTS[1]})", ""]
        depth_plot = []
        if report["depths"]:
            plot_depths(out / PLOTS[2], report["depths"])
            drawn.append(PLOTS[2])
            depth_plot = [f"![layers against L]({PLOTS[2]})", ""]
    except ImportError:
        drawn, outcome_plot, depth_plot = [], [], []
        plots = ["Plots not drawn: they need matplotlib (`pip install -e '.[plots]'`)."]
    missing = sorted({row["name"] for row in rows + report["positive_sides"] if row["status"] == NOT_AVAILABLE}
                     | {curve["construction"] for curve in report["depths"] if curve.get("missing")})
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
        *positive_sides_section(report, depth_plot),
        *curves_section(report, out),
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
