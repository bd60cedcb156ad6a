"""The orchestration of `witness hierarchy`: the plan's jobs run stage by stage on one `lab.sweep` engine, their
typed rows judged and assembled into report.json, and the report written (`experiments.hierarchy.report`).

The stages run in order because each needs the one before: the probes run within the constructions' budgets, and
the trained probes search what the training jobs wrote. Everything else shares the second stage, so the workers
stay busy. A replaying run has no third stage: its trained networks exist before the probes start.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from experiments import trained
import experiments.hierarchy.plan as plan
import experiments.hierarchy.report as written
from experiments.hierarchy.config import Config
from experiments.hierarchy.curves import curve_entry
from experiments.hierarchy.evidence import category_of, judge_against_controls
from experiments.hierarchy.jobs import run_job
from experiments.hierarchy.rows import (BoundsRow, ConstructionRow, CurveReplay, DepthCurve, OutcomeRow,
                                        PositiveSideRow, PrecisionPoint, ProbeRow, SeparationRow)
from lab.sweep import Engine, sweep
from verify import theorems as theorem_bounds
from witness.progress import RunBar

#: The stages, in order (their names are report.json's `seconds` and `finished_stages`).
STAGES = ("certify the constructions at their p*", "separations, p* sweep, probes, training",
          "probe the trained networks")


class Stages:
    """Runs the jobs of one stage at a time on the engine, longest first, and records in the report's JSON object
    how long each stage took."""

    def __init__(self, report: dict[str, Any], engine: Engine, costs: dict[str, float], run_bar: RunBar):
        self.report, self.engine, self.costs, self.run_bar = report, engine, costs, run_bar

    def run(self, name: str, jobs: list[dict[str, Any]]) -> list[Any]:
        """The jobs' results, in job order."""
        start = time.perf_counter()
        names = [plan.bar_name(job) for job in jobs]
        order = sorted(range(len(jobs)), key=lambda i: -self.costs[names[i]])  # the longest first: both workers busy
        done = sweep(run_job, [jobs[i] for i in order], self.engine, run_bar=self.run_bar,
                     names=[names[i] for i in order])
        results: list[Any] = [None] * len(jobs)
        for position, result in zip(order, done):
            results[position] = result
        self.report["seconds"][name] = round(time.perf_counter() - start, 2)
        self.report["finished_stages"].append(name)
        self.run_bar.write(f"witness hierarchy: {name}: done ({len(jobs)} jobs, {self.report['seconds'][name]:.0f} s)")
        return results


def of_type(results: list[Any], kind: type) -> list[Any]:
    return [result for result in results if isinstance(result, kind)]


def hierarchy(out: str | Path, config: Config, engine: Engine = Engine(), store: trained.Store | None = None,
              quick: bool = False) -> dict[str, Any]:
    """Run every stage and write DIR/report.md, DIR/report.json, DIR/plots/*.png, DIR/networks, DIR/certificates;
    return the report's JSON object. With `store` the trained networks are replayed from it (`experiments.trained`);
    without, they are trained here and DIR/trained.json is written for later replays. Either way each committed
    capacity curve of the configuration (`curves`) is reported from its own folder, and its fastest point retrained
    here and compared with the stored row: the curves are committed apart from the store.

    DIR/report.md and report.json exist from the first second on: until the run ends they say that it has not
    finished and what has (so a run that is stopped, even killed, leaves an honest folder)."""
    out = Path(out).resolve()
    for folder in ("networks", "certificates", "plots"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    probes = plan.probe_plan(config, out)
    learned = [job for job in probes if job["weights"] == "trained"]
    untrained = [job for job in probes if job["weights"] != "trained"]
    curves = plan.committed_curves(config)
    first = plan.first_jobs(config, out) + plan.curve_jobs(curves)
    if store is not None:
        for job in learned:
            store.entry_for(job, without=("shape",))  # refused now, not after stage 1
        first = plan.rechecking_separations(first, store) + store.replay_jobs([job["name"] for job in learned])
    # the constructions come first, alone: every probe needs their budgets; the rest runs beside the probes
    constructions_first = [job for job in first if job["kind"] == "construction"]
    independent = [job for job in first if job["kind"] != "construction"]
    later = probes + ([] if store is not None else [{**job, "kind": "train"} for job in learned])
    report: dict[str, Any] = {
        "complete": False, "quick": quick, "config": config.to_json(), "engine": engine.describe(),
        "rows": [], "precision": [], "bounds": [], "positive_sides": [], "depths": [], "capacity": [], "seconds": {},
        "finished_stages": [],
        "trained": {"mode": "replayed" if store is not None else ("trained here" if learned else "none"),
                    "store": None if store is None else store.display(trained.STORE), "checks": []}}
    costs = {plan.bar_name(job): plan.estimated_seconds(job) for job in first + later}
    run_bar = RunBar(costs, "witness hierarchy", engine.workers or 1)
    run_bar.write(plan.plan_words(costs, engine, store, config))
    written.write_unfinished(out, report, "started")
    stages = Stages(report, engine, costs, run_bar)

    try:
        constructions: list[ConstructionRow] = stages.run(STAGES[0], constructions_first)
        report["rows"] = [row.to_json() for row in constructions]
        written.write_unfinished(out, report, STAGES[0])
        placed = plan.within_budgets(probes, {row.name: row for row in constructions}, config.fallback_format)
        by_name = {job["name"]: job for job in placed}
        if store is not None:
            for job in learned:
                entry = store.entry_for(by_name[job["name"]])
                by_name[job["name"]] |= {"weights_file": str(out / store.copy_into(job["name"], out)),
                                         "training_reports": entry.training,
                                         "replayed_from": store.display(entry.file)}
            done = stages.run(STAGES[1], independent + [by_name[job["name"]] for job in probes])
            searched = of_type(done, ProbeRow)
        else:
            trainings = [{**by_name[job["name"]], "kind": "train"} for job in learned]
            done = stages.run(STAGES[1], independent + [by_name[job["name"]] for job in untrained] + trainings)
            entries = of_type(done, trained.TrainedNetwork)
            for entry in entries:
                by_name[entry.name] |= {"weights_file": str(out / entry.file), "training_reports": entry.training}
            searched = of_type(done, ProbeRow) + stages.run(STAGES[2], [by_name[job["name"]] for job in learned])
            trained.write(out, entries)
        rows = constructions + of_type(done, SeparationRow) + judge_against_controls(searched)
        report["precision"] = [point.to_json() for point in of_type(done, PrecisionPoint)]
        report["positive_sides"] = [row.to_json() for row in of_type(done, PositiveSideRow)]
        report["depths"] = [curve.to_json() for curve in of_type(done, DepthCurve)]
        report["trained"]["checks"] = [check.to_json() for check in of_type(done, trained.ReplayCheck)]
        report["rows"] = [{**row.to_json(), "category": category_of(row)} for row in rows]
        report["capacity"] = [curve_entry(curves[replay.folder], replay) for replay in of_type(done, CurveReplay)]
        report["bounds"] = [row.to_json() for row in bounds_rows(plan.bounds_questions(config), rows)]
        report["complete"] = True
        report["plots"] = written.write(out, report)
    except BaseException as exc:
        run_bar.close()
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"stopped by an error ({exc})"
        written.write_unfinished(out, report, reason)
        raise
    run_bar.close()
    (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return report


def bounds_rows(questions: dict[str, plan.BoundsQuestion], rows: list[OutcomeRow]) -> list[BoundsRow]:
    """Stage 4: whether the theorems cover the budgets the constructions use -- at each construction row the plan
    asks about (`plan.bounds_questions`), and at each separation, whose own scan already evaluated them."""
    out = []
    for row in rows:
        if isinstance(row, SeparationRow):
            out.append(BoundsRow(L=row.L, task=row.task, Hdp=row.budget["Hdp"], n=row.prompt_length,
                                 applies={"theorem_1_1.applies": row.covered, "cpw.applies": row.cpw_covered},
                                 thresholds={"theorem_1_1.min_n": "≤ this n", "cpw.min_n": "≤ this n"},
                                 separation=row.report))
            continue
        question = questions.get(row.name) if isinstance(row, ConstructionRow) else None
        if question is None or row.budget is None:
            continue
        Hdp, n = row.budget["Hdp"], row.n_ctx
        found = theorem_bounds.bounds(question.L, Hdp, n, **question.arguments(Hdp))
        out.append(BoundsRow(L=row.L, task=row.task, Hdp=Hdp, n=n,
                             applies={item.name: item.holds for item in found.applies},
                             thresholds={item.name: item.display() for item in found.bounds}))
    return out
