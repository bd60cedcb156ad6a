"""The committed capacity curves in `witness hierarchy`'s report: report.json's entry for each (`curve_entry`), its
line of the summary (`capacity_words`) and its section of report.md (`curves_section`).

The curves are `witness capacity`'s (`experiments.capacity`), trained and committed in their own folders, which the
configuration's `curves` names: the hierarchy trains none, it retrains the fastest point of each
(`jobs.curve_replay_job`) and judges the stored rows with today's code. Their rows stay in their folders, and so do
their plots.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from experiments import capacity, capacity_report
import experiments.hierarchy.config as config
from experiments.hierarchy.rows import CurveReplay


def curve_entry(curve: dict[str, Any], replay: CurveReplay) -> dict[str, Any]:
    """report.json's entry for one committed curve: its folder, protocol, summary (today's `capacity.summarise` of
    the stored rows; each point's `judged` where the curve has judge formats) and the replay check. The rows stay
    in the folder's capacity.json."""
    spec = capacity.CapacitySpec(**curve["spec"])
    return {"folder": replay.folder, "spec": curve["spec"], "summary": capacity.summarise(spec, curve["rows"]),
            "replay": {key: value for key, value in replay.to_json().items() if key != "folder"}}


def capacity_words(curve: dict[str, Any]) -> str:
    """A committed capacity curve's line of the summary (`curve`: its entry in report.json): where the control
    learned, what fell there -- at the format each point is judged at where the curve has judge formats, else at the
    curve's -- and whether its replayed point matched. An architecture that cannot express the task is named apart:
    its fall says nothing about training."""
    spec = capacity.CapacitySpec(**curve["spec"])
    judged = bool(spec.judge_formats)

    def counts(entry: dict[str, Any]) -> bool:  # the control of its (N, d_head) learned, so the point is evidence
        return entry["judged"] is not None if judged else entry["control_learned"]

    def mean(entry: dict[str, Any]) -> float:
        return entry["judged"]["mean"] if judged else entry["mean"]

    summary = curve["summary"]
    learned = sorted({entry["size"] for entry in summary if entry["architecture"] == capacity.CONTROL
                      and counts(entry)})
    unable = sorted({entry["architecture"] for entry in summary if entry.get("expressive") is False})
    fell = [entry for entry in summary if entry["architecture"] not in [capacity.CONTROL, *unable]
            and counts(entry) and mean(entry) < capacity.LEARNED]
    best = max(fell, key=mean, default=None)
    at = ", each point at the fewest bits at which its control learned" if judged else ""
    opening = f"* **Capacity curve** `{curve['folder']}` (L = {spec.L}, {spec.format} {spec.semantics}{at}): "
    replayed = (" Its replayed point matched bit for bit." if curve["replay"]["matched"] else
                " Its replayed point did **NOT** match: this trainer does not reproduce the stored rows.")
    if not learned:
        return opening + "the control learned at no size, so no point of the curve is evidence." + replayed
    return (opening + f"the control learned at N = {', '.join(map(str, learned))}"
            + (f"; {len(fell)} point{'' if len(fell) == 1 else 's'} of other architectures fell there (best: "
               f"{best['architecture']}{head_width(spec, best)}, {mean(best):.2f} at N = {best['size']}) — training "
               "did not find a solution at this budget, which does not prove that none exists" if best else
               f"; every other architecture{' but those that cannot express the task' if unable else ''} learned "
               "there too")
            + (f"; {', '.join(unable)} cannot express the task, whatever the weights" if unable else "") + "."
            + replayed)


def head_width(spec: capacity.CapacitySpec, point: dict[str, Any]) -> str:
    """A point's d_head in words, where its curve scans several (else the curve's protocol names the one)."""
    return f", d_head {point['d_head']}" if len(spec.d_heads) > 1 else ""


def protocol_words(spec: capacity.CapacitySpec) -> str:
    """A curve's protocol in one line: depth, budget, training, format, and where it judges its points."""
    heads = f"d_head{'s' if len(spec.d_heads) > 1 else ''} {', '.join(map(str, spec.d_heads))}"
    judged = f", judge formats {', '.join(spec.judge_formats)}" if spec.judge_formats else ""
    return (f"Protocol: L = {spec.L}, N = {', '.join(map(str, spec.sizes))}, H {spec.H}, {heads}, d_model "
            f"{spec.d_model}, {spec.steps} steps, seeds {', '.join(map(str, spec.seeds))}, measured at {spec.format} "
            f"{spec.semantics}{judged}.")


def replay_words(spec: capacity.CapacitySpec, replay: dict[str, Any]) -> str:
    """The replay check of a committed curve: its fastest point retrained here, matched or how it differs."""
    point = replay["point"]
    retrained = (f"Replay: point N = {point['size']}, {point['architecture']}{head_width(spec, point)}, seed "
                 f"{point['seed']} retrained here")
    if replay["matched"]:
        return f"{retrained}: matched bit for bit ({', '.join(capacity.REPLAYED)} equal)."
    return (f"{retrained}: **did NOT match** — {'; '.join(replay['differences'])}. This trainer, torch or "
            "processor does not reproduce the stored rows: the table is what another one trained.")


def curve_page(folder: str, out: Path) -> str:
    """The curve's page: a link relative to DIR where DIR lies in the repository's docs/ too (the committed report,
    whose links hold wherever the repository is), else its path in the repository as text."""
    try:
        out.resolve().relative_to(config.DOCS)
    except ValueError:
        return f"`{folder}/capacity.md` (in the repository)"
    page = Path(os.path.relpath(config.DOCS.parent / folder / "capacity.md", out.resolve())).as_posix()
    return f"[{folder}/capacity.md]({page})"


def curves_section(report: dict[str, Any], out: Path) -> list[str]:
    """Each committed capacity curve the configuration names: its page, protocol, replay check and table (judged
    where the curve has judge formats). Its plot is the curve's own capacity.png, beside its page."""
    lines = ["## Capacity curves: where trained architectures part", ""]
    if not report["capacity"]:
        return lines + ["This configuration names no committed curve (its `curves` list is empty).", ""]
    lines += ["Curves `witness capacity` trained and committed, each in its own folder (rows in capacity.json, page "
              "capacity.md, plot capacity.png); the configuration's `curves` names them and this run trains none. "
              "The tables judge the stored rows with today's code; the point of each curve that trained fastest was "
              "retrained here and compared with its stored row, bit for bit.", ""]
    for curve in report["capacity"]:
        spec = capacity.CapacitySpec(**curve["spec"])
        table = (capacity_report.judged_table(spec, curve["summary"])[1:] if spec.judge_formats else
                 capacity_report.summary_table(spec, curve["summary"]))
        lines += [f"### `{curve['folder']}`", "", f"Page and plot: {curve_page(curve['folder'], out)}. "
                  + protocol_words(spec), "", replay_words(spec, curve["replay"]), "", *table, ""]
    return lines

