"""The plan of `witness hierarchy`: which jobs a configuration makes, what each is estimated to cost, and which
rows the theorems' bounds are evaluated at.

The jobs are plain dicts (`experiments.hierarchy.jobs` runs them). The configuration names the paper's two tasks,
composition (`levels`) and 2-Sum (`two_sum`); this plan is where each section becomes its constructions and probes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import capacity, trained
import experiments.hierarchy.words as words
from experiments.hierarchy.config import COMPOSITION, TWO_SUM, Config, Level, Run
from experiments.hierarchy.rows import ConstructionRow
from lab.architectures import MLP_RATIO, TRAIN_SEEDS
from lab.sweep import Engine
from witness.tasks import task_from_params

#: The composition constructions certified at each depth, and the least depth each is built for (the small-table
#: one needs L - 1 >= 1 full layers after its linear look-up).
COMPOSITION_CONSTRUCTIONS = (("composition", 1), ("composition_hybrid", 1), ("composition_hybrid_small_table", 2))
#: The 2-Sum constructions, and the parameters of the `two_sum` section each takes beyond the task's.
TWO_SUM_CONSTRUCTIONS = (("two_sum", ()), ("two_sum_sparse", ("block", "k")))
#: The positive sides beside each depth's (L+1)-layer decoder: chain of thought (two layers; one with pair tokens)
#: and the encoder, each run on every input of the small family `positive_sides` names for that depth.
POSITIVE_SIDES = ("composition_cot", "composition_cot_pairs", "composition_encoder")
#: The depth plot's curves: the decoder and the positive sides, each compiled at the balanced family m = n_l = 2 of
#: every plotted depth (the smallest where every query digit has two values).
DEPTH_CURVES, DEPTH_FAMILY = ("composition", *POSITIVE_SIDES), 2
#: The construction row each section's probes are compared with and the theorems are evaluated at: the (L+1)-layer
#: composition network of each depth, and the one-layer full-attention 2-Sum network.
COMPOSITION_REFERENCE, TWO_SUM_REFERENCE = "L{L}_composition", "two_sum"


def first_jobs(config: Config, out: Path) -> list[dict[str, Any]]:
    """Stage 1 jobs: the constructions (composition per L, 2-Sum), the p* sweep, the separations, the positive sides
    and the depth plot's curves."""
    jobs = []
    common = {"kind": "construction", "family": config.family, "semantics": config.semantics,
              "fallback_format": config.fallback_format, "out": str(out)}
    for level in config.levels:
        for name, least_depth in COMPOSITION_CONSTRUCTIONS:
            if level.L >= least_depth:
                jobs.append({**common, "L": level.L, "task": COMPOSITION, "construction": name,
                             "name": f"L{level.L}_{name}",
                             "architecture": words.CONSTRUCTION_LABELS[name].format(**words.depth_names(level.L)),
                             "params": level.params()})
    two_sum = config.two_sum
    for name, extra in TWO_SUM_CONSTRUCTIONS:
        jobs.append({**common, "L": None, "task": TWO_SUM, "construction": name, "name": name,
                     "architecture": words.CONSTRUCTION_LABELS[name],
                     "params": two_sum.task_params() | {key: getattr(two_sum, key) for key in extra}})
    for semantics, log2_ms in config.sweep_log2_m:
        for level in config.levels:
            jobs += [{"kind": "precision", "name": f"p* L{level.L} m=2^{j} {semantics}", "L": level.L, "m": 2**j,
                      "family": config.sweep_family, "semantics": semantics} for j in log2_ms]
    jobs += [{"kind": "separation", "name": f"separation L{L}", "L": L, "task": COMPOSITION,
              "construction": "composition", "out": str(out)} for L in config.separation]
    jobs += [{**common, "kind": "positive side", "L": level.L, "task": COMPOSITION, "construction": name,
              "name": f"L{level.L}_{name}", "params": level.params(),
              "architecture": words.CONSTRUCTION_LABELS[name].format(**words.depth_names(level.L))}
             for level in config.positive_sides for name in POSITIVE_SIDES]
    if config.depths:
        jobs += [{"kind": "depth", "name": f"depths {name}", "construction": name,
                  "params": [{"L": L, "m": DEPTH_FAMILY, "n": [DEPTH_FAMILY] * (L - 1)} for L in config.depths]}
                 for name in DEPTH_CURVES]
    return jobs


def rechecking_separations(jobs: list[dict[str, Any]], store: trained.Store) -> list[dict[str, Any]]:
    """`jobs` with each separation re-checked from the store instead of scanned."""
    return [{**job, "stored": str(store.separation(job["L"])), "shown_as": store.display(f"separation/L{job['L']}")}
            if job["kind"] == "separation" else job for job in jobs]


def probe_plan(config: Config, out: Path) -> list[dict[str, Any]]:
    """The probes of stage 2, before their budgets are known (`within_budgets` fills them in): per depth the hybrid
    with L-1 full layers, L full layers and, where weights are trained, the control; the sparse layer on 2-Sum."""
    jobs = []

    def add(kind: str, L: int | None, task: str, params: dict, reference: str, options: dict,
            runs: tuple[Run, ...], effort: dict, table_bits: float | None = None):
        label = words.PROBE_LABELS[kind].format(**{"linear": config.linear_per_gap, "mixer": config.mixer,
                                                   **options, **({} if L is None else words.depth_names(L))})
        prefix = "" if L is None else f"L{L}_"
        training = {"train_seeds": effort.get("train_seeds", TRAIN_SEEDS), "train_steps": effort.get("train_steps"),
                    "mlp_ratio": effort.get("mlp_ratio", MLP_RATIO)}
        for run in runs:
            jobs.append({"kind": "probe", "architecture_kind": kind, "L": L, "task": task, "params": params,
                         "name": f"{prefix}{kind}_{run.weights}_s{run.seed}", "architecture": label,
                         "reference": reference, "architecture_options": options, "effort": effort,
                         "training": training, "semantics": config.semantics, "weights": run.weights,
                         "seed": run.seed, "out": str(out), "table_bits": table_bits})

    for level in config.levels:
        L, params, reference = level.L, level.params(), COMPOSITION_REFERENCE.format(L=level.L)
        bits = last_table_bits(level)
        add("hybrid", L, COMPOSITION, params, reference,
            {"full_layers": L - 1, "linear_per_gap": config.linear_per_gap, "mixer": config.mixer},
            config.runs, config.effort, bits)
        add("full", L, COMPOSITION, params, reference, {"layers": L}, config.runs, config.effort, bits)
        trained_runs = tuple(run for run in config.runs if run.weights == "trained")
        if trained_runs:
            add("control", L, COMPOSITION, params, reference, {"layers": L + 1}, trained_runs, config.effort, bits)
    two_sum = config.two_sum
    add("sparse", None, TWO_SUM, two_sum.task_params(), TWO_SUM_REFERENCE, {"block": two_sum.block, "k": two_sum.k},
        two_sum.runs, two_sum.effort)
    return jobs


def last_table_bits(level: Level) -> float:
    """N log2 N, what the last table z_L of the level's composition task holds: past the state bits C a hybrid
    carries, counting forces two inputs to share a state."""
    table = task_from_params(COMPOSITION, level.params()).domain_sizes[-1]
    return round(table * math.log2(table), 1) if table > 1 else 0.0


def within_budgets(jobs: list[dict[str, Any]], constructions: dict[str, ConstructionRow], fallback_format: str
                   ) -> list[dict[str, Any]]:
    """Each probe within the budget and at the p* format of the construction it is compared with."""
    placed = []
    for job in jobs:
        reference = constructions[job["reference"]]
        placed.append({**job, "budget": reference.budget, "format": reference.format or fallback_format,
                       "shape": {key: reference.budget[key] for key in ("H", "d_head", "d_model")}})
    return placed


def committed_curves(config: Config) -> dict[str, dict[str, Any]]:
    """The configuration's committed capacity curves (`capacity.read_curve`), by the folder report.json names."""
    return {folder: capacity.read_curve(path) for folder, path in config.curve_folders().items()}


def curve_jobs(curves: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per committed curve, the job that retrains its fastest stored point and compares it with the stored row."""
    jobs = []
    for folder, curve in curves.items():
        row, point = capacity.fastest_replay(capacity.CapacitySpec(**curve["spec"]), curve["rows"])
        jobs.append({"kind": "curve replay", "name": f"replay {folder} N={row['size']} {row['architecture']} "
                                                    f"d_head {row['d_head']} s{row['seed']}",
                     "folder": folder, "point": point, "row": row, "seconds": row["seconds"]})
    return jobs


@dataclass(frozen=True)
class BoundsQuestion:
    """Stage 4 for one construction row: the theorems at depth L, at the row's budget and prompt length; with B,
    the block size of the sparse layer compared with it (2-Sum), or else with the row's own budget reported beside
    the thresholds (composition)."""

    L: int
    B: int | None = None

    def arguments(self, Hdp: int) -> dict[str, Any]:
        return {"B": self.B} if self.B is not None else {"network_Hdp": Hdp}


def bounds_questions(config: Config) -> dict[str, BoundsQuestion]:
    """The construction rows (by name) whose budgets the theorems are evaluated at: each section's reference, the
    2-Sum one against the sparse layer's block size."""
    questions = {COMPOSITION_REFERENCE.format(L=level.L): BoundsQuestion(level.L) for level in config.levels}
    questions[TWO_SUM_REFERENCE] = BoundsQuestion(1, B=config.two_sum.block)
    return questions


#: Seconds one worker takes for a job, measured on the 2-core machine (docs/benchmarks.md): the bar's estimate of
#: the work ahead, never a limit. A replay check (a stored network, a committed curve's point) retrains stored
#: material: it takes the seconds stored with it.
ESTIMATED_SECONDS = {"construction": 1.0, "precision": 1.0, "probe": 3.0, "depth": 0.5,
                     "positive side": {1: 0.5, 2: 2.0, 3: 1.0},
                     "train": {1: 20.0, 2: 55.0, 3: 300.0, None: 30.0}, "separation": {1: 2.0, 2: 20.0},
                     "separation recheck": {1: 1.0, 2: 25.0}}


def estimated_seconds(job: dict[str, Any]) -> float:
    if "seconds" in job:  # a replay check: the seconds the stored material took to train
        return float(job["seconds"])
    if job["kind"] == "separation" and job.get("stored"):
        return ESTIMATED_SECONDS["separation recheck"].get(job["L"], 30.0)
    guess = ESTIMATED_SECONDS.get(job["kind"], 1.0)
    return float(guess.get(job.get("L"), 30.0) if isinstance(guess, dict) else guess)


def bar_name(job: dict[str, Any]) -> str:
    """A job's name on the run's bar: a training job is named after the probe that searches what it trains."""
    return job["name"] + (" (training)" if job["kind"] == "train" else "")


def plan_words(costs: dict[str, float], engine: Engine, store: trained.Store | None, config: Config) -> str:
    """What the run is about to do and roughly how long it takes, said before it starts."""
    workers = engine.workers or 1
    where = f"on {workers} worker{'s' if workers > 1 else ''}" if engine.scheduler is None else "on the cluster"
    said = (f"witness hierarchy: {len(costs)} jobs, about {sum(costs.values()) / 60:.0f} min of work {where} "
            f"(about {sum(costs.values()) / 60 / workers:.0f} min if they share it evenly)")
    if store is not None:
        scans = sum(estimated_seconds({"kind": "separation", "L": L}) for L in config.separation)
        said += (f"; trained networks and separation scans replayed from {store.display('')} "
                 f"(--full computes them here: about {(store.training_seconds() + scans) / 60:.0f} min of work "
                 "more)")
    return said
