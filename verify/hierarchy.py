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
4. **bounds** -- the theorems' thresholds at each row's budget and prompt length (`verify.search.bounds`): they say
   whether the lower bounds cover these sizes at all (at the sizes a laptop runs, they do not).
5. **separation** -- per depth in `separation` {L: [...]}, `verify.separation`: the smallest size at which the
   (L+1)-layer construction, certified at its p* by the parametric proof, has a budget Theorem 1.1 covers; a row
   with `covered: yes` whose certificate needs no network file.

Stages 1-3 are jobs of a `witness.sweep` (in-process, a local cluster, or an existing scheduler); a job writes its
network and certificate under the output folder itself, so with `--scheduler` that folder must be on a file system
the workers share. A construction that is not installed (its entry point missing) becomes a row with status
`not available` and the reason, never a silent omission.

The configuration is JSON: `hierarchy.json` next to this module is the embedded default; its `quick` section
overrides whole sections for `--quick`. Fields: `levels` {L: {m, n}}; `certify` {family, semantics,
fallback_format}; `precision_sweep` {family, log2_m: {semantics: [j, ...]}}; `probes` {runs: [{weights, seed}],
mixer, linear_per_gap, effort}; `two_sum` {n, M, t, block, k, runs, effort}; `separation` {L: [...]} (optional);
`capacity` (optional): the fields of `verify.capacity.CapacitySpec`, a capacity curve trained in stage 3. `effort` holds the search
function's own keyword settings (samples, hypothesis_examples, train_steps, ...), passed through unchanged.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


from verify import capacity, hierarchy_report, precision, separation
from verify.certify import certify
from verify.hierarchy_report import CERTIFIED, FAILURES, NONE_FOUND, NOT_AVAILABLE, UNKNOWN
from verify.result import Status
from verify.search import bounds as theorem_bounds
from verify.search.hybrid import search_full, search_hybrid
from verify.search.probes import failing_and_tried
from verify.search.sparse import search_sparse
from witness.progress import bar
from witness.arith import arithmetic, parse_format
from witness.budget import budget
from witness.errors import FileFormatError, ParameterError, WitnessError
from witness.registry import compile as compile_network
from witness.registry import construction_names
from witness.sweep import Engine, sweep
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
    """Search one architecture within a budget for failures; every failure comes confirmed from the search."""
    search = SEARCHES[job["architecture_kind"]][0]
    row = {"stage": "probe", "L": job["L"], "task": job["task"], "name": job["name"],
           "architecture": job["architecture"], "params": job["params"], "weights": job["weights"],
           "seed": job["seed"], "format": job["format"], "semantics": job["semantics"], "network": None,
           "certificate": None, "budget": job["budget"], "control": job["architecture_kind"] == "control"}
    task = Composition(**job["params"]) if job["task"] == "composition" else TwoSum(**job["params"])
    network_path = f"networks/{job['name']}.npz"
    shape = {key: job["budget"][key] for key in ("H", "d_head", "d_model")}
    report = search(task, **job["architecture_options"], **shape, **job["effort"],
                    arith=arithmetic(parse_format(job["format"]), job["semantics"]), weights=job["weights"],
                    seed=job["seed"], save_network=str(Path(job["out"]) / network_path))
    found = report.as_dict()
    failing, tried = failing_and_tried(found["searched"])
    accuracy = found["searched"].get("weights", {}).get("best_accuracy")
    row.update(network=network_path if report.network else None, budget=found["budget"],
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
    else:
        meaning = f"{job['weights']} weights"
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
    """The separation at depth L (verify.separation), written under DIR/separation/L{L}/; a certified row."""
    L, out = job["L"], Path(job["out"])
    found = separation.separation(L)
    folder = f"separation/L{L}"
    separation.write(found, out / folder)
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
                        f"(`{folder}/separation.md`)"}


JOBS = {"construction": construction_job, "precision": precision_job, "probe": probe_job,
        "separation": separation_job, "capacity": capacity.point_job}


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """The sweep's one entry point: dispatch on `job["kind"]`."""
    return JOBS[job["kind"]](job)


# -- the plan --------------------------------------------------------------------------------------------------
def _names(L: int) -> dict[str, Any]:
    return {"L": L, "L1": L + 1, "Lm1": L - 1}


def first_jobs(config: Config, out: Path) -> list[dict[str, Any]]:
    """Stage 1 and 2 jobs: the constructions (composition per L, 2-Sum) and the p* sweep."""
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
            jobs += [{"kind": "precision", "L": L, "m": 2**j, "family": config.sweep_family, "semantics": semantics}
                     for j in log2_ms]
    jobs += [{"kind": "separation", "L": L, "out": str(out)} for L in config.separation]
    return jobs


def probe_jobs(config: Config, out: Path, constructions: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Stage 3 jobs: each probe runs within the budget and format of the construction it is compared with."""
    jobs = []

    def add(kind: str, L: int | None, task: str, params: dict, reference: dict, options: dict, runs, effort: dict):
        fmt = reference.get("format") or config.fallback_format
        label = SEARCHES[kind][1].format(**{"linear": config.linear_per_gap, "mixer": config.mixer, **options,
                                            **({} if L is None else _names(L))})
        prefix = "" if L is None else f"L{L}_"
        for weight, seed in runs:
            jobs.append({"kind": "probe", "architecture_kind": kind, "L": L, "task": task, "params": params,
                         "name": f"{prefix}{kind}_{weight}_s{seed}", "architecture": label,
                         "architecture_options": options, "effort": effort, "budget": reference["budget"],
                         "format": fmt, "semantics": config.semantics, "weights": weight, "seed": seed,
                         "out": str(out)})

    for L, m, n in config.levels:
        reference = constructions[f"L{L}_composition"]
        params = {"L": L, "m": m, "n": list(n)}
        add("hybrid", L, "composition", params, reference,
            {"full_layers": L - 1, "linear_per_gap": config.linear_per_gap, "mixer": config.mixer},
            config.runs, config.effort)
        add("full", L, "composition", params, reference, {"layers": L}, config.runs, config.effort)
        trained = tuple(run for run in config.runs if run[0] == "trained")
        if trained:
            add("control", L, "composition", params, reference, {"layers": L + 1}, trained, config.effort)
    if config.capacity is not None:
        spec = capacity.CapacitySpec(**config.capacity)
        jobs += [{"kind": "capacity", "spec": config.capacity, "size": size, "architecture": name, "seed": seed}
                 for size in spec.sizes for name in spec.architectures() for seed in spec.seeds]
    two_sum = config.two_sum
    add("sparse", None, "two_sum", {"n": two_sum["n"], "M": two_sum["M"], "t": two_sum["t"]},
        constructions["two_sum"], {"block": two_sum["block"], "k": two_sum["k"]}, two_sum["runs"],
        two_sum["effort"])
    return jobs


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


# -- the command -------------------------------------------------------------------------------------------------
STAGES = ("constructions, p* sweep and separation", "probes", "bounds", "report")


def hierarchy(out: str | Path, config: Config, engine: Engine = Engine()) -> dict[str, Any]:
    """Run every stage and write DIR/report.md, DIR/report.json, DIR/plots/*.png, DIR/networks, DIR/certificates.
    Returns the report's JSON object."""
    out = Path(out).resolve()
    for folder in ("networks", "certificates", "plots"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    with bar(total=len(STAGES), desc="hierarchy", unit="stage") as stages:
        def stage(name: str, action):
            stages.set_postfix_str(name)
            start = time.perf_counter()
            value = action()
            seconds[name] = round(time.perf_counter() - start, 2)
            stages.update(1)
            return value

        first = stage(STAGES[0], lambda: sweep(run_job, first_jobs(config, out), engine, progress="jobs"))
        constructions = {row["name"]: row for row in first if row["stage"] == "construction"}
        probes = stage(STAGES[1], lambda: sweep(run_job, probe_jobs(config, out, constructions), engine,
                                                progress="jobs"))
        curve = [row for row in probes if "stage" not in row]  # capacity points
        probes = [row for row in probes if "stage" in row]
        rows = [row for row in first if row["stage"] in ("construction", "separation")] + judge_against_controls(probes)
        limits = stage(STAGES[2], lambda: bounds_rows(config, rows))
        report = {"config": config_dict(config), "engine": engine.describe(), "rows": rows,
                  "precision": [row for row in first if row["stage"] == "precision"], "bounds": limits,
                  "seconds": seconds}
        if config.capacity is not None:
            spec = capacity.CapacitySpec(**config.capacity)
            report["capacity"] = {"spec": config.capacity, "rows": curve, "summary": capacity.summarise(spec, curve)}
        report["plots"] = stage(STAGES[3], lambda: hierarchy_report.write(out, report))
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
