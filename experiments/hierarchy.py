"""`witness hierarchy`: the paper's hierarchy reproduced end to end, as one sweep of independent seeded jobs.

For every depth L of the configuration:

1. **constructions** -- compile the (L+1)-layer `composition` network and `composition_hybrid` (L full layers plus
   one linear layer; `composition_hybrid_small_table` too where it is installed), find each one's minimal
   precision p* with certify as the checker (`verify.precision`), certify it at p* and keep the certificate. A
   certified row is a proof for every input; `witness check-certificate` re-checks it.
2. **p* against prompt length** -- the parametric certifier's p* for the construction at growing sizes (balanced
   tables m = n_1 = ... = 2^j), under strict and theory semantics, for the first plot.
3. **probes** -- within the (L+1)-layer construction's budget (its H, d_head, d_model and its p* format): the
   hybrid with L-1 full layers plus linear layers (`verify.search.hybrid.search_hybrid`) and L layers of full
   attention (`search_full`), per weight kind and seed, and -- where weights are trained -- the trained control,
   L + 1 full layers at the same budget and protocol: a trained probe row counts as evidence only where its
   control learned (`judge_against_controls`), and every probe row counts failing / tried inputs; for 2-Sum the one-layer construction(s) are certified and
   one (B,k)-sparse layer is probed within their budget (`verify.search.sparse.search_sparse`). Every failure a
   probe reports was confirmed by `verify.search.report`, so it replays with `witness run FILE --tokens ...`. A
   probe that finds nothing has searched, not proved; a failure shows that *this* network fails, not that every
   network of the architecture does.
4. **bounds** -- the theorems' thresholds at each row's budget and prompt length (`verify.theorems`): they say
   whether the lower bounds cover these sizes at all (at the sizes a laptop runs, they do not).
5. **separation** -- per depth in `separation` {L: [...]}, `experiments.separation`: the smallest size at which the
   (L+1)-layer construction, certified at its p* by the parametric proof, has a budget Theorem 1.1 covers; a row
   with `covered: yes` whose certificate needs no network file.

Stages 1-3 are jobs of a `lab.sweep` (in-process, a local cluster, or an existing scheduler); a job writes its
network and certificate under the output folder itself, so with `--scheduler` that folder must be on a file system
the workers share. A construction that is not installed (its entry point missing) becomes a row with status
`not available` and the reason, never a silent omission.

The configuration is JSON: `hierarchy.json` next to this module is the embedded default; its `quick` section
overrides whole sections for `--quick`. Fields: `levels` {L: {m, n}}; `certify` {family, semantics,
fallback_format}; `precision_sweep` {family, log2_m: {semantics: [j, ...]}}; `probes` {runs: [{weights, seed}],
mixer, linear_per_gap, effort}; `two_sum` {n, M, t, block, k, runs, effort}; `separation` {L: [...]} (optional);
`capacity` (optional): the fields of `experiments.capacity.CapacitySpec`, a capacity curve trained in stage 3. `effort` holds the search
function's own keyword settings (samples, hypothesis_examples, train_steps, ...), passed through unchanged.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verify import precision
from experiments import capacity, hierarchy_report, separation, trained
from verify.certify import certify
from experiments.hierarchy_report import CERTIFIED, FAILURES, NONE_FOUND, NOT_AVAILABLE, UNKNOWN
from verify.result import Status
from verify import theorems as theorem_bounds
from verify.search.hybrid import search_full, search_hybrid
from verify.search.probes import failing_and_tried
from verify.search.sparse import search_sparse
from lab.architectures import MLP_RATIO, TRAIN_SEEDS
from witness.progress import RunBar, quiet, set_quiet
from witness.arith import arithmetic, parse_format
from witness.budget import budget
from witness.errors import FileFormatError, ParameterError, WitnessError
from witness.registry import compile as compile_network
from witness.registry import construction_names
from lab.sweep import Engine, sweep
from witness.tasks import Composition, TwoSum

DEFAULT_CONFIG = Path(__file__).with_name("hierarchy.json")
SECTIONS = ("levels", "certify", "precision_sweep", "probes", "two_sum")


#: A trained control "learned" when at most this fraction of the inputs its search ran failed.
CONTROL_FAILING = 0.02

#: The composition constructions of stage 1: (name, architecture with L filled in).
COMPOSITION_CONSTRUCTIONS = (
    ("composition", "{L1} full attention layers (construction)"),
    ("composition_hybrid", "{L} full + 1 linear (construction)"),
    ("composition_hybrid_small_table", "linear, then {Lm1} full (small-table construction)"),
)
TWO_SUM_CONSTRUCTIONS = (
    ("two_sum", "1 full attention layer (construction)"),
    ("two_sum_sparse", "1 (B,k)-sparse layer, rich summaries (construction)"),
)


# -- configuration -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """A validated configuration (see the module docstring for the fields)."""

    levels: tuple[tuple[int, int, tuple[int, ...]], ...]  # (L, m, n)
    family: str
    semantics: str
    fallback_format: str
    sweep_family: str
    sweep_log2_m: tuple[tuple[str, tuple[int, ...]], ...]
    runs: tuple[tuple[str, int], ...]  # (weights, seed) of each probed network
    mixer: str
    linear_per_gap: int
    effort: dict[str, Any]
    two_sum: dict[str, Any]
    separation: tuple[int, ...] = ()
    capacity: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for L, m, n in self.levels:
            Composition(L, m, n)  # raises ParameterError on a bad size
        for family in (self.family, self.sweep_family):
            if family not in precision.FAMILIES:
                raise ParameterError(f"format family must be one of {sorted(precision.FAMILIES)}, got {family!r}")
        arithmetic(parse_format(self.fallback_format), self.semantics)  # a format the semantics can run
        if not self.runs or not self.two_sum["runs"]:
            raise ParameterError("probes need at least one run (weights, seed)")
        TwoSum(self.two_sum["n"], self.two_sum["M"], self.two_sum["t"])
        if self.capacity is not None:
            capacity.CapacitySpec(**self.capacity)  # raises ParameterError on a bad curve

    def select(self, depths: list[int] | None) -> Config:
        """The same configuration restricted to the depths `depths` (each must be configured)."""
        if depths is None:
            return self
        known = {L for L, _, _ in self.levels}
        missing = sorted(set(depths) - known)
        if missing:
            raise ParameterError(f"--L {missing}: the configuration has levels {sorted(known)} only")
        return replace(self, levels=tuple(level for level in self.levels if level[0] in set(depths)))


def _runs(raw) -> tuple[tuple[str, int], ...]:
    return tuple((str(run["weights"]), int(run["seed"])) for run in raw)


def load_config(path: str | Path | None = None, quick: bool = False) -> Config:
    """The configuration in `path` (default: the embedded one), with its `quick` section applied if asked."""
    path = DEFAULT_CONFIG if path is None else Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FileFormatError(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise FileFormatError(f"{path}: not JSON ({exc})") from None
    try:
        if quick:
            raw = {**raw, **raw.get("quick", {})}
        missing = [name for name in SECTIONS if name not in raw]
        if missing:
            raise FileFormatError(f"{path}: missing sections {missing}")
        cert, sweep_cfg, probes, two_sum = raw["certify"], raw["precision_sweep"], raw["probes"], raw["two_sum"]
        levels = tuple(sorted((int(L), int(level["m"]), tuple(int(v) for v in level["n"]))
                              for L, level in raw["levels"].items()))
        return Config(
            levels=levels, family=cert["family"], semantics=cert["semantics"],
            fallback_format=cert.get("fallback_format", "fp16"), sweep_family=sweep_cfg["family"],
            sweep_log2_m=tuple((sem, tuple(int(j) for j in js)) for sem, js in sweep_cfg["log2_m"].items()),
            runs=_runs(probes["runs"]),
            mixer=str(probes["mixer"]), linear_per_gap=int(probes["linear_per_gap"]), effort=dict(probes["effort"]),
            two_sum={**{key: two_sum[key] for key in ("n", "M", "t", "block", "k", "effort")},
                     "runs": _runs(two_sum["runs"])},
            separation=tuple(int(L) for L in raw.get("separation", {}).get("L", [])),
            capacity=raw.get("capacity"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, WitnessError):
            raise
        raise FileFormatError(f"{path}: bad configuration ({type(exc).__name__}: {exc})") from None


# -- jobs ------------------------------------------------------------------------------------------------------
def _not_available(row: dict[str, Any], reason: str) -> dict[str, Any]:
    return {**row, "status": NOT_AVAILABLE, "evidence": reason}


def _budget_of(network, bits: int) -> dict[str, Any]:
    return budget(network, bits).as_dict()


def construction_job(job: dict[str, Any]) -> dict[str, Any]:
    """Compile, find p* by certify, certify at p*, save network and certificate; a row of the report."""
    name, out = job["construction"], Path(job["out"])
    row = {"stage": "construction", "L": job["L"], "task": job["task"], "name": job["name"],
           "construction": name, "architecture": job["architecture"], "params": job["params"],
           "semantics": job["semantics"], "network": None, "certificate": None}
    if name not in construction_names():
        return _not_available(row, f"construction {name!r} is not installed")
    network = compile_network(name, **job["params"])
    row["n_ctx"] = network.n_ctx
    case = precision.Case(precision.network_checker(network, "certify"), job["family"], job["semantics"])
    found = precision.table([case])[0].result
    row["min_precision"] = found.as_dict()
    network_path = f"networks/{job['name']}.npz"
    network.save(out / network_path)
    row["network"] = network_path
    if found.p is None:
        widest = found.trials[-1] if found.trials else None
        reason = widest.note if widest is not None else "no format could be run"
        fmt = parse_format(job["fallback_format"])
        return {**row, "status": UNKNOWN, "format": fmt.name, "budget": _budget_of(network, fmt.bits),
                "evidence": f"certify verified no {job['family']} format under {job['semantics']}: {reason}"}
    result = certify(network, arithmetic(parse_format(found.format), job["semantics"]))
    if result.status is not Status.VERIFIED:  # min_precision verified this very format with the same checker
        raise AssertionError(f"certify is not deterministic on {name} at {found.format}")
    certificate_path = f"certificates/{job['name']}.json"
    (out / certificate_path).write_text(json.dumps(result.detail["certificate"]), encoding="utf-8")
    verified_below = sum(trial.status == Status.VERIFIED.value for trial in found.below)
    return {**row, "status": CERTIFIED, "format": found.format, "budget": _budget_of(network, found.p),
            "certificate": certificate_path,
            "evidence": f"every input (2^{result.detail['inputs_log2']} inputs) at p* = {found.p}; at "
                        f"{found.p - 1} bits {verified_below} of {len(found.below)} splits verified"}


def precision_job(job: dict[str, Any]) -> dict[str, Any]:
    """p* of the composition construction at one size, by the parametric certifier (no tables built)."""
    L, m = job["L"], job["m"]
    n = (m,) * (L - 1)
    case = precision.Case(precision.composition_checker(L, m, n), job["family"], job["semantics"])
    found = precision.table([case])[0].result
    prompt = theorem_bounds.balanced_prompt_length(L, m)
    return {"stage": "precision", "L": L, "m": m, "n": list(n), "semantics": job["semantics"],
            "prompt_length": prompt, "log2_n": math.log2(prompt), "p": found.p, "format": found.format}


#: The search function of each probed architecture, and how the architecture is described.
SEARCHES = {
    "hybrid": (search_hybrid, "{Lm1} full + {linear} {mixer} per gap (probe)"),
    "full": (search_full, "{L} full attention layers (probe)"),
    "control": (search_full, "{L1} full attention layers (trained control)"),
    "sparse": (search_sparse, "1 ({block},{k})-sparse layer (probe)"),
}


def probe_job(job: dict[str, Any]) -> dict[str, Any]:
    """Search one architecture within a budget for failures; every failure comes confirmed from the search. A
    trained network is read from its file (`job["weights_file"]`, written by a training job or copied from a
    store): the search is this run's, the weights are what training wrote."""
    search = SEARCHES[job["architecture_kind"]][0]
    row = {"stage": "probe", "L": job["L"], "task": job["task"], "name": job["name"],
           "architecture": job["architecture"], "params": job["params"], "weights": job["weights"],
           "seed": job["seed"], "format": job["format"], "semantics": job["semantics"], "network": None,
           "certificate": None, "budget": job["budget"], "control": job["architecture_kind"] == "control"}
    task = trained.task_of(job)
    network_path = f"networks/{job['name']}.npz"
    weights_file = job.get("weights_file")
    report = search(task, **job["architecture_options"], **job["shape"], **job["effort"],
                    arith=arithmetic(parse_format(job["format"]), job["semantics"]),
                    weights=weights_file or job["weights"], seed=job["seed"],
                    save_network=None if weights_file else str(Path(job["out"]) / network_path))
    found = report.as_dict()
    failing, tried = failing_and_tried(found["searched"])
    if weights_file:
        training = job["training_reports"]
        found["searched"]["weights"] = {"source": "trained", "best_accuracy": training[0]["accuracy"],
                                        "training": training, "file": network_path}
        row["replayed_from"] = job.get("replayed_from")
    accuracy = found["searched"].get("weights", {}).get("best_accuracy")
    row.update(network=network_path, budget=found["budget"],
               failures=found["failures"], pairs=found["pairs"], searched=found["searched"], failing=failing,
               tried=tried, trained_accuracy=accuracy)
    if task.name == "composition":
        table = task.domain_sizes[-1]
        row["table_bits"] = round(table * math.log2(table), 1) if table > 1 else 0.0
    kept = f"{len(found['failures'])} kept as replayable examples"
    counts = f"{failing} of {tried} inputs failed at {job['format']} ({kept})"
    if found["pairs"]:
        counts += f"; {len(found['pairs'])} indistinguishable pairs"
    if job["weights"] == "random":
        meaning = "random weights: a failure here says nothing about what the architecture can learn"
    elif job["weights"] == "trained":
        meaning = f"trained to accuracy {accuracy:.3f} (float64 executor, held-out inputs)"
        if row.get("replayed_from"):
            meaning += f"; weights replayed from {row['replayed_from']}, searched here"
    else:
        meaning = f"{job['weights']} weights (the construction's own, under sparse attention)"
    status = FAILURES if failing or found["pairs"] else NONE_FOUND
    evidence = f"{counts}; {meaning}" if status == FAILURES else \
        f"none of {tried} inputs failed at {job['format']} (a search, not a proof); {meaning}"
    return {**row, "status": status, "evidence": evidence}


def judge_against_controls(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A trained probe row counts as evidence only where the trained control of its depth -- L + 1 full layers at
    the same budget, format and training protocol -- learned the task (at most CONTROL_FAILING of its inputs
    failed); the row says which, in words."""
    controls = {row["L"]: row for row in rows if row.get("control")}
    judged = []
    for row in rows:
        if row["stage"] != "probe" or row.get("control") or row["weights"] != "trained" or row["task"] != "composition":
            judged.append(row)
            continue
        control = controls.get(row["L"])
        if control is None:
            judged.append({**row, "evidence": row["evidence"] + "; no trained control at this depth: no evidence"})
            continue
        rate = control["failing"] / max(1, control["tried"])
        learned = rate <= CONTROL_FAILING
        failed = (f"the trained control ({control['architecture']}) failed {control['failing']} of "
                  f"{control['tried']} inputs at {control['format']}")
        verdict = (failed + ", so it learned: this row counts as evidence that training did not find a solution "
                   "for this architecture at this budget (not that none exists)") if learned else \
            (failed + ": the control did not learn the task at this format either, so this row is no evidence "
             "about the architecture")
        judged.append({**row, "control_learned": learned, "evidence": row["evidence"] + "; " + verdict})
    return judged


def separation_job(job: dict[str, Any]) -> dict[str, Any]:
    """The separation at depth L (experiments.separation), written under DIR/separation/L{L}/; a certified row. With
    `job["stored"]` (a folder a --full run wrote) its certificate is re-checked here (`separation.recheck`) and
    only the scan that found the smallest size is replayed."""
    L, out = job["L"], Path(job["out"])
    stored = job.get("stored")
    found = separation.separation(L) if stored is None else separation.recheck(stored)
    folder = f"separation/L{L}"
    separation.write(found, out / folder)
    scan = "" if stored is None else (
        f"; certificate and coverage re-checked here, the scan that found this smallest size ({found['sizes_scanned']} "
        f"sizes, {found['certify_calls']} certify calls) replayed from {job['shown_as']}")
    budget = {key: found[key] for key in ("H", "d_head", "d_model", "d", "p", "Hdp")} | {"state_bits": 0}
    theorem = found["theorem"]
    return {"stage": "separation", "L": L, "task": "composition", "name": f"L{L}_separation",
            "construction": "composition", "architecture": f"{L + 1} full attention layers (construction, at "
                                                           f"log2 n = {found['prompt_length_log2']})",
            "params": found["params"], "semantics": found["semantics"], "format": found["format"],
            "network": None, "certificate": f"{folder}/certificate.json", "report": f"{folder}/separation.md",
            "budget": budget, "status": CERTIFIED, "covered": found["covered"],
            "prompt_length": found["prompt_length"], "prompt_length_log2": found["prompt_length_log2"],
            "largest_covered_Hdp": {"theorem_1_1": theorem["largest_Hdp"], "cpw": found["cpw"]["largest_Hdp"]},
            "cpw_covered": found["cpw"]["covered"],
            "evidence": f"every input (2^{found['inputs_log2']} inputs) at p* = {found['p']}, the smallest covered "
                        f"size of the family ({found['family']}, k = {found['k']}); Hdp = {found['Hdp']} <= "
                        f"{theorem['largest_Hdp']} = floor(n^(2^-{4 * L + 2})): Theorem 1.1 covers this budget "
                        f"(`{folder}/separation.md`){scan}", **({"replayed_from": job["shown_as"]} if stored else {})}


JOBS = {"construction": construction_job, "precision": precision_job, "probe": probe_job,
        "separation": separation_job, "capacity": capacity.point_job, "train": trained.train_job,
        "replay_network": trained.replay_network_job, "replay_capacity": trained.replay_capacity_job}


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """The sweep's one entry point: dispatch on `job["kind"]`. A job draws no bar of its own: the run has one."""
    was_quiet = quiet()
    set_quiet(True)
    try:
        return JOBS[job["kind"]](job)
    finally:
        set_quiet(was_quiet)


# -- the plan --------------------------------------------------------------------------------------------------
def _names(L: int) -> dict[str, Any]:
    return {"L": L, "L1": L + 1, "Lm1": L - 1}


def first_jobs(config: Config, out: Path) -> list[dict[str, Any]]:
    """Stage 1 jobs: the constructions (composition per L, 2-Sum), the p* sweep and the separations."""
    jobs = []
    common = {"kind": "construction", "family": config.family, "semantics": config.semantics,
              "fallback_format": config.fallback_format, "out": str(out)}
    for L, m, n in config.levels:
        for name, architecture in COMPOSITION_CONSTRUCTIONS:
            if name == "composition_hybrid_small_table" and L < 2:
                continue  # it needs L - 1 >= 1 full layers after the linear look-up
            jobs.append({**common, "L": L, "task": "composition", "construction": name, "name": f"L{L}_{name}",
                         "architecture": architecture.format(**_names(L)),
                         "params": {"L": L, "m": m, "n": list(n)}})
    two_sum = config.two_sum
    for name, architecture in TWO_SUM_CONSTRUCTIONS:
        params = {"n": two_sum["n"], "M": two_sum["M"], "t": two_sum["t"]}
        if name == "two_sum_sparse":
            params |= {"block": two_sum["block"], "k": two_sum["k"]}
        jobs.append({**common, "L": None, "task": "two_sum", "construction": name, "name": name,
                     "architecture": architecture, "params": params})
    for semantics, log2_ms in config.sweep_log2_m:
        for L, _, _ in config.levels:
            jobs += [{"kind": "precision", "name": f"p* L{L} m=2^{j} {semantics}", "L": L, "m": 2**j,
                      "family": config.sweep_family, "semantics": semantics} for j in log2_ms]
    jobs += [{"kind": "separation", "name": f"separation L{L}", "L": L, "out": str(out)} for L in config.separation]
    return jobs


def probe_plan(config: Config, out: Path) -> list[dict[str, Any]]:
    """The probes of stage 2, before their budgets are known (`within_budgets` fills them in): per depth the hybrid
    with L-1 full layers, L full layers and, where weights are trained, the control; the sparse layer on 2-Sum."""
    jobs = []

    def add(kind: str, L: int | None, task: str, params: dict, reference: str, options: dict, runs, effort: dict):
        label = SEARCHES[kind][1].format(**{"linear": config.linear_per_gap, "mixer": config.mixer, **options,
                                            **({} if L is None else _names(L))})
        prefix = "" if L is None else f"L{L}_"
        training = {"train_seeds": effort.get("train_seeds", TRAIN_SEEDS), "train_steps": effort.get("train_steps"),
                    "mlp_ratio": effort.get("mlp_ratio", MLP_RATIO)}
        for weight, seed in runs:
            jobs.append({"kind": "probe", "architecture_kind": kind, "L": L, "task": task, "params": params,
                         "name": f"{prefix}{kind}_{weight}_s{seed}", "architecture": label, "reference": reference,
                         "architecture_options": options, "effort": effort, "training": training,
                         "semantics": config.semantics, "weights": weight, "seed": seed, "out": str(out)})

    for L, m, n in config.levels:
        params = {"L": L, "m": m, "n": list(n)}
        reference = f"L{L}_composition"
        add("hybrid", L, "composition", params, reference,
            {"full_layers": L - 1, "linear_per_gap": config.linear_per_gap, "mixer": config.mixer},
            config.runs, config.effort)
        add("full", L, "composition", params, reference, {"layers": L}, config.runs, config.effort)
        trained_runs = tuple(run for run in config.runs if run[0] == "trained")
        if trained_runs:
            add("control", L, "composition", params, reference, {"layers": L + 1}, trained_runs, config.effort)
    two_sum = config.two_sum
    add("sparse", None, "two_sum", {"n": two_sum["n"], "M": two_sum["M"], "t": two_sum["t"]}, "two_sum",
        {"block": two_sum["block"], "k": two_sum["k"]}, two_sum["runs"], two_sum["effort"])
    return jobs


def within_budgets(jobs: list[dict[str, Any]], constructions: dict[str, dict[str, Any]], fallback_format: str
                   ) -> list[dict[str, Any]]:
    """Each probe within the budget and at the p* format of the construction it is compared with."""
    placed = []
    for job in jobs:
        reference = constructions[job["reference"]]
        budget_ = reference["budget"]
        placed.append({**job, "budget": budget_, "format": reference.get("format") or fallback_format,
                       "shape": {key: budget_[key] for key in ("H", "d_head", "d_model")}})
    return placed


def capacity_jobs(config: Config) -> list[dict[str, Any]]:
    if config.capacity is None:
        return []
    spec = capacity.CapacitySpec(**config.capacity)
    return [{"kind": "capacity", "name": f"capacity N={size} {name} s{seed}", "spec": config.capacity,
             "size": size, "architecture": name, "seed": seed}
            for size in spec.sizes for name in spec.architectures() for seed in spec.seeds]


#: Seconds one worker takes for a job, measured on the 2-core machine (docs/benchmarks.md): the bar's estimate of
#: the work ahead, never a limit. Training jobs use the seconds their stored twin took, where there is one.
ESTIMATED_SECONDS = {"construction": 1.0, "precision": 1.0, "probe": 3.0, "capacity": 150.0,
                     "train": {1: 20.0, 2: 55.0, 3: 300.0, None: 30.0}, "separation": {1: 2.0, 2: 1500.0},
                     "separation recheck": {1: 1.0, 2: 25.0}}


def estimated_seconds(job: dict[str, Any]) -> float:
    if "seconds" in job:
        return float(job["seconds"])
    if job["kind"] == "separation" and job.get("stored"):
        return ESTIMATED_SECONDS["separation recheck"].get(job["L"], 30.0)
    if job["kind"] == "capacity":  # about 150 s per 16,000 steps at the default budget, and a start-up
        return 5.0 + ESTIMATED_SECONDS["capacity"] * job["spec"]["steps"] / 16000
    guess = ESTIMATED_SECONDS.get(job["kind"], 1.0)
    return float(guess.get(job.get("L"), 30.0) if isinstance(guess, dict) else guess)


def bounds_rows(config: Config, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stage 4: per configured depth and for 2-Sum, whether the theorems cover the budget the constructions use."""
    out = []
    for row in rows:
        if row["stage"] == "separation":
            out.append({"stage": "bounds", "L": row["L"], "task": "composition", "Hdp": row["budget"]["Hdp"],
                        "n": row["prompt_length"],
                        "applies": {"theorem_1_1.applies": row["covered"], "cpw.applies": row["cpw_covered"]},
                        "thresholds": {"theorem_1_1.min_n": "≤ this n", "cpw.min_n": "≤ this n"},
                        "separation": row["report"]})
            continue
        if row["stage"] != "construction" or row["construction"] not in ("composition", "two_sum") \
                or "budget" not in row:
            continue
        Hdp, n = row["budget"]["Hdp"], row["n_ctx"]
        if row["task"] == "composition":
            report = theorem_bounds.bounds(row["L"], Hdp, n, network_Hdp=Hdp)
        else:
            report = theorem_bounds.bounds(1, Hdp, n, B=config.two_sum["block"])
        applies = {item.name: item.holds for item in report.applies}
        thresholds = {item.name: item.display() for item in report.bounds}
        out.append({"stage": "bounds", "L": row["L"], "task": row["task"], "Hdp": Hdp, "n": n,
                    "applies": applies, "thresholds": thresholds})
    return out


def _split(results: list, *sizes: int) -> list[list]:
    """`results` cut into consecutive parts of the given sizes, and the rest."""
    parts, start = [], 0
    for size in sizes:
        parts.append(list(results[start:start + size]))
        start += size
    return parts + [list(results[start:])]


def plan_words(costs: dict[str, float], engine: Engine, store: trained.Store | None, config: Config) -> str:
    """What the run is about to do and roughly how long it takes, said before it starts."""
    workers = engine.workers or 1
    where = f"on {workers} worker{'s' if workers > 1 else ''}" if engine.scheduler is None else "on the cluster"
    words = (f"witness hierarchy: {len(costs)} jobs, about {sum(costs.values()) / 60:.0f} min of work {where} "
             f"(about {sum(costs.values()) / 60 / workers:.0f} min if they share it evenly)")
    if store is not None:
        scans = sum(estimated_seconds({"kind": "separation", "L": L}) for L in config.separation)
        words += (f"; trained networks, capacity curve and separation scans replayed from {store.display('')} "
                  f"(--full computes them here: about {(store.training_seconds() + scans) / 60:.0f} min of work "
                  "more)")
    return words


# -- the command -------------------------------------------------------------------------------------------------
#: The stages, in order (a replayed run has no third: its trained networks exist before the probes start).
STAGES = ("certify the constructions at their p*", "separations, p* sweep, probes, training",
          "probe the trained networks")


def hierarchy(out: str | Path, config: Config, engine: Engine = Engine(), store: trained.Store | None = None,
              quick: bool = False) -> dict[str, Any]:
    """Run every stage and write DIR/report.md, DIR/report.json, DIR/plots/*.png, DIR/networks, DIR/certificates;
    return the report's JSON object. With `store` the trained networks and the capacity curve are replayed from it
    (`experiments.trained`); without, they are trained here and DIR/trained.json is written for later replays.

    DIR/report.md and report.json exist from the first second on: until the run ends they say that it has not
    finished and what has (so a run that is stopped, even killed, leaves an honest folder)."""
    out = Path(out).resolve()
    for folder in ("networks", "certificates", "plots"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    probes = probe_plan(config, out)
    learned = [job for job in probes if job["weights"] == "trained"]
    untrained = [job for job in probes if job["weights"] != "trained"]
    curve_spec = None if config.capacity is None else capacity.plain_spec(capacity.CapacitySpec(**config.capacity))
    if store is not None:
        for job in learned:
            store.entry_for(job, without=("shape",))  # refused now, not after stage 1
        stored_curve = None if curve_spec is None else store.curve_for(curve_spec)
    first = first_jobs(config, out)
    if store is not None:
        first = [{**job, "stored": str(store.separation(job["L"])), "shown_as": store.display(
            f"separation/L{job['L']}")} if job["kind"] == "separation" else job for job in first]
        first += store.replay_jobs([job["name"] for job in learned], with_capacity=curve_spec is not None)
    # the constructions come first, alone: every probe needs their budgets; the rest runs beside the probes
    constructions_first = [job for job in first if job["kind"] == "construction"]
    independent = [job for job in first if job["kind"] != "construction"]
    later = probes + ([] if store is not None else [{**job, "kind": "train"} for job in learned]
                      + capacity_jobs(config))
    report: dict[str, Any] = {
        "complete": False, "quick": quick, "config": config_dict(config), "engine": engine.describe(),
        "rows": [], "precision": [], "bounds": [], "seconds": {}, "finished_stages": [],
        "trained": {"mode": "replayed" if store is not None else ("trained here" if learned or curve_spec else
                                                                  "none"),
                    "store": None if store is None else store.display(trained.STORE), "checks": []}}
    costs = {job["name"] + (" (training)" if job["kind"] == "train" else ""): estimated_seconds(job)
             for job in first + later}
    run_bar = RunBar(costs, "witness hierarchy", engine.workers or 1)
    run_bar.write(plan_words(costs, engine, store, config))
    hierarchy_report.write_unfinished(out, report, "started")

    def stage(name: str, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        start = time.perf_counter()
        names = [job["name"] + (" (training)" if job["kind"] == "train" else "") for job in jobs]
        order = sorted(range(len(jobs)), key=lambda i: -costs[names[i]])  # the longest first: both workers busy
        done = sweep(run_job, [jobs[i] for i in order], engine, run_bar=run_bar, names=[names[i] for i in order])
        results: list[Any] = [None] * len(jobs)
        for position, result in zip(order, done):
            results[position] = result
        report["seconds"][name] = round(time.perf_counter() - start, 2)
        report["finished_stages"].append(name)
        run_bar.write(f"witness hierarchy: {name}: done ({len(jobs)} jobs, {report['seconds'][name]:.0f} s)")
        return results

    try:
        rows = stage(STAGES[0], constructions_first)
        report["rows"] = list(rows)
        hierarchy_report.write_unfinished(out, report, STAGES[0])
        constructions = {row["name"]: row for row in rows if row["stage"] == "construction"}
        placed = within_budgets(probes, constructions, config.fallback_format)
        by_name = {job["name"]: job for job in placed}
        if store is not None:
            for job in learned:
                entry = store.entry_for(by_name[job["name"]])
                by_name[job["name"]] |= {"weights_file": str(out / store.copy_into(job["name"], out)),
                                         "training_reports": entry["training"],
                                         "replayed_from": store.display(entry["file"])}
            done = stage(STAGES[1], independent + [by_name[job["name"]] for job in probes])
            searched = done[len(independent):]
            curve_rows = stored_curve["rows"] if stored_curve else []
        else:
            trainings = [{**by_name[job["name"]], "kind": "train"} for job in learned]
            done = stage(STAGES[1], independent + [by_name[job["name"]] for job in untrained] + trainings
                         + capacity_jobs(config))
            searched, entries, curve_rows = _split(done[len(independent):], len(untrained), len(trainings))
            for entry in entries:
                by_name[entry["name"]] |= {"weights_file": str(out / entry["file"]),
                                           "training_reports": entry["training"]}
            searched += stage(STAGES[2], [by_name[job["name"]] for job in learned])
            trained.write(out, entries, {"spec": curve_spec, "rows": curve_rows} if curve_spec else None)
        found = done[:len(independent)]
        rows += [row for row in found if row.get("stage") == "separation"]
        report["precision"] = [row for row in found if row.get("stage") == "precision"]
        report["trained"]["checks"] = [row for row in found if "matched" in row]
        report["rows"] = rows + judge_against_controls(searched)
        if curve_spec is not None:
            report["capacity"] = {"spec": curve_spec, "rows": curve_rows,
                                  "summary": capacity.summarise(capacity.CapacitySpec(**curve_spec), curve_rows),
                                  "replayed_from": None if store is None else store.display(trained.STORE)}
        report["bounds"] = bounds_rows(config, report["rows"])
        report["rows"] = [{**row, "category": hierarchy_report.category(row)} for row in report["rows"]]
        report["complete"] = True
        report["plots"] = hierarchy_report.write(out, report)
    except BaseException as exc:
        run_bar.close()
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"stopped by an error ({exc})"
        hierarchy_report.write_unfinished(out, report, reason)
        raise
    run_bar.close()
    (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return report


def config_dict(config: Config) -> dict[str, Any]:
    return {"levels": {str(L): {"m": m, "n": list(n)} for L, m, n in config.levels},
            "certify": {"family": config.family, "semantics": config.semantics,
                        "fallback_format": config.fallback_format},
            "precision_sweep": {"family": config.sweep_family,
                                "log2_m": {sem: list(js) for sem, js in config.sweep_log2_m}},
            "probes": {"runs": [{"weights": w, "seed": s} for w, s in config.runs], "mixer": config.mixer,
                       "linear_per_gap": config.linear_per_gap, "effort": config.effort},
            "two_sum": {**config.two_sum, "runs": [{"weights": w, "seed": s} for w, s in config.two_sum["runs"]]},
            "separation": {"L": list(config.separation)}, "capacity": config.capacity}
