"""The job kinds of `witness hierarchy`: one function each, dispatched by `run_job` through `JOBS`.

A job is a plain dict (`experiments.hierarchy.plan` writes them; it travels to a worker process as it is) and
returns a typed row (`experiments.hierarchy.rows`, `experiments.trained.TrainedNetwork` / `ReplayCheck`). A job
writes its network and certificate under the output folder itself, so with a scheduler that folder must be on a
file system the workers share.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from experiments import capacity, separation, trained
import experiments.hierarchy.words as words
from experiments.hierarchy.rows import (
    CERTIFIED, EXHAUSTIVE, FAILURES, NONE_FOUND, NOT_AVAILABLE, UNKNOWN, ConstructionRow, CurveReplay, DepthCurve,
    PositiveSideRow, PrecisionPoint, ProbeRow, SeparationRow)
from lab.architectures import cannot_express
from verify import precision
from verify import theorems as theorem_bounds
from verify.result import Status
from verify.search.hybrid import search_full, search_hybrid
from verify.search.probes import failing_and_tried
from verify.search.sparse import search_sparse
from witness.arith import arithmetic, parse_format
from witness.budget import budget
from witness.generate import generated_count
from witness.ir import Network
from witness.progress import quiet, set_quiet
from witness.registry import compile as compile_network
from witness.registry import construction_names

#: The search each probed architecture kind runs (the control is searched as the full layers are).
SEARCHES = {"hybrid": search_hybrid, "full": search_full, "control": search_full, "sparse": search_sparse}


#: The fields a construction's job names and its row repeats.
KNOWN = ("L", "task", "name", "construction", "architecture", "params", "semantics")


def searched(job: dict[str, Any], method: str) -> tuple[Network, precision.PrecisionResult, dict[str, Any]]:
    """The job's construction compiled, its p* searched with `method` ("certify" or "exhaustive") as the checker,
    and its network saved; with the fields its row takes from them."""
    network = compile_network(job["construction"], **job["params"])
    case = precision.Case(precision.network_checker(network, method), job["family"], job["semantics"])
    found = precision.table([case])[0].result
    network_path = f"networks/{job['name']}.npz"
    network.save(Path(job["out"]) / network_path)
    return network, found, {"network": network_path, "n_ctx": network.n_ctx, "min_precision": found.as_dict()}


def construction_job(job: dict[str, Any]) -> ConstructionRow:
    """Compile, find p* by certify, certify at p*, save network and certificate."""
    name, out = job["construction"], Path(job["out"])
    known = {key: job[key] for key in KNOWN}
    if name not in construction_names():
        return ConstructionRow(**known, status=NOT_AVAILABLE, evidence=words.not_installed(name))
    network, found, compiled = searched(job, "certify")
    known |= compiled
    if found.p is None:
        widest = found.trials[-1] if found.trials else None
        reason = widest.note if widest is not None else "no format could be run"
        fmt = parse_format(job["fallback_format"])
        return ConstructionRow(**known, status=UNKNOWN, format=fmt.name, budget=budget(network, fmt.bits).as_dict(),
                               evidence=words.not_certified(job["family"], job["semantics"], reason))
    result = found.verdict  # certify's own verified Result at p*, with its certificate
    certificate_path = f"certificates/{job['name']}.json"
    (out / certificate_path).write_text(json.dumps(result.detail["certificate"]), encoding="utf-8")
    verified_below = sum(trial.status == Status.VERIFIED.value for trial in found.below)
    return ConstructionRow(**known, certificate=certificate_path, status=CERTIFIED, format=found.format,
                           budget=budget(network, found.p).as_dict(),
                           evidence=words.certified(result.detail["inputs_log2"], found.p, verified_below,
                                                    len(found.below)))


def positive_side_job(job: dict[str, Any]) -> PositiveSideRow:
    """Compile a positive side at its small family, find p* by running every input at each format (the exhaustive
    search: for this family, format and semantics as much a proof as a certificate, but nothing the trusted checker
    re-derives), save the network."""
    name = job["construction"]
    known = {key: job[key] for key in KNOWN}
    if name not in construction_names():
        return PositiveSideRow(**known, status=NOT_AVAILABLE, evidence=words.not_installed(name))
    network, found, compiled = searched(job, "exhaustive")
    generated = generated_count(network)
    known |= compiled | {"layers": len(network.layers), "generated": generated, "inputs": network.task.count()}
    if found.p is None:
        return PositiveSideRow(**known, status=FAILURES, evidence=words.not_verified_exhaustively(
            job["family"], job["semantics"], found.max_bits, len(found.trials)))
    return PositiveSideRow(**known, status=EXHAUSTIVE, format=found.format, budget=budget(network, found.p).as_dict(),
                           evidence=words.verified_exhaustively(known["inputs"], found.format, job["semantics"],
                                                                job["family"], found.p, generated, len(found.below),
                                                                len(found.unrunnable)))


def depth_job(job: dict[str, Any]) -> DepthCurve:
    """One construction compiled at each depth of the plot: its layers and generated tokens as the networks have
    them, so the plot shows what was built, not what a formula says."""
    name = job["construction"]
    known = {"construction": name, "label": words.DEPTH_LABELS[name]}
    if name not in construction_names():
        return DepthCurve(**known, causal=None, L=[], layers=[], generated=[], missing=words.not_installed(name))
    networks = [compile_network(name, **params) for params in job["params"]]
    return DepthCurve(**known, causal=all(layer.mixer.causal for layer in networks[0].layers),
                      L=[params["L"] for params in job["params"]], layers=[len(net.layers) for net in networks],
                      generated=[generated_count(net) for net in networks])


def precision_job(job: dict[str, Any]) -> PrecisionPoint:
    """p* of the composition construction at one size, by the parametric certifier (no tables built)."""
    L, m = job["L"], job["m"]
    n = (m,) * (L - 1)
    case = precision.Case(precision.composition_checker(L, m, n), job["family"], job["semantics"])
    found = precision.table([case])[0].result
    prompt = theorem_bounds.balanced_prompt_length(L, m)
    return PrecisionPoint(L=L, m=m, n=list(n), semantics=job["semantics"], prompt_length=prompt,
                          log2_n=math.log2(prompt), p=found.p, format=found.format)


def probe_job(job: dict[str, Any]) -> ProbeRow:
    """Search one architecture within a budget for failures; every failure comes confirmed from the search. A
    trained network is read from its file (`job["weights_file"]`, written by a training job or copied from a
    store): the search is this run's, the weights are what training wrote."""
    network_path = f"networks/{job['name']}.npz"
    weights_file = job.get("weights_file")
    report = SEARCHES[job["architecture_kind"]](
        trained.task_of(job), **job["architecture_options"], **job["shape"], **job["effort"],
        arith=arithmetic(parse_format(job["format"]), job["semantics"]), weights=weights_file or job["weights"],
        seed=job["seed"], save_network=None if weights_file else str(Path(job["out"]) / network_path))
    found = report.as_dict()
    failing, tried = failing_and_tried(found["searched"])
    if weights_file:  # the search built no network: say which weights it loaded, as a search that trains would
        training = job["training_reports"]
        found["searched"]["weights"] = {"source": "trained", "best_accuracy": training[0]["accuracy"],
                                        "training": training, "file": network_path}
    accuracy = found["searched"].get("weights", {}).get("best_accuracy")
    replayed_from = job.get("replayed_from")
    why = cannot_express(trained.architecture(job), trained.task_of(job))
    return ProbeRow(L=job["L"], task=job["task"], name=job["name"], architecture=job["architecture"],
                    params=job["params"], weights=job["weights"], seed=job["seed"], format=job["format"],
                    semantics=job["semantics"], network=network_path, budget=found["budget"],
                    control=job["architecture_kind"] == "control", replayed_from=replayed_from,
                    failures=found["failures"], pairs=found["pairs"], searched=found["searched"], failing=failing,
                    tried=tried, trained_accuracy=accuracy, table_bits=job["table_bits"],
                    status=FAILURES if failing or found["pairs"] else NONE_FOUND,
                    evidence=words.probe_evidence(job["weights"], job["format"], failing, tried,
                                                  len(found["failures"]), len(found["pairs"]), accuracy,
                                                  replayed_from, why),
                    expressive=False if why else None, why=why)


def separation_job(job: dict[str, Any]) -> SeparationRow:
    """The separation at depth L (experiments.separation), written under DIR/separation/L{L}/. With `job["stored"]`
    (a folder a --full run wrote) its certificate is re-checked here (`separation.recheck`) and only the scan that
    found the smallest size is replayed."""
    L, out = job["L"], Path(job["out"])
    stored = job.get("stored")
    found = separation.separation(L) if stored is None else separation.recheck(stored)
    folder = f"separation/L{L}"
    separation.write(found, out / folder)
    replayed_from = None if stored is None else job["shown_as"]
    return SeparationRow(
        L=L, task=job["task"], name=f"L{L}_separation", construction=job["construction"],
        architecture=words.separation_architecture(L, found["prompt_length_log2"]), params=found["params"],
        semantics=found["semantics"], format=found["format"], certificate=f"{folder}/certificate.json",
        report=f"{folder}/separation.md",
        budget={key: found[key] for key in ("H", "d_head", "d_model", "d", "p", "Hdp")} | {"state_bits": 0},
        covered=found["covered"], prompt_length=found["prompt_length"],
        prompt_length_log2=found["prompt_length_log2"],
        largest_covered_Hdp={"theorem_1_1": found["theorem"]["largest_Hdp"], "cpw": found["cpw"]["largest_Hdp"]},
        cpw_covered=found["cpw"]["covered"], evidence=words.separation_evidence(L, found, folder, replayed_from),
        replayed_from=replayed_from)


def curve_replay_job(job: dict[str, Any]) -> CurveReplay:
    """Retrain the point of a committed capacity curve that trained fastest (`job["point"]`, the point job
    `capacity.fastest_replay` made) and compare it with the stored row (`job["row"]`), bit for bit: the curve was
    committed apart from the hierarchy's store, so every run checks that today's trainer still gives its rows."""
    row = job["row"]
    differences = capacity.replay_differences(capacity.point_job(job["point"]), row)
    return CurveReplay(folder=job["folder"], point={field: row[field] for field in capacity.POINT},
                       matched=not differences, differences=differences)


#: Every job kind: `job["kind"]` -> the function that runs it.
JOBS = {"construction": construction_job, "precision": precision_job, "probe": probe_job,
        "separation": separation_job, "positive side": positive_side_job, "depth": depth_job,
        "curve replay": curve_replay_job, "train": trained.train_job, "replay_network": trained.replay_network_job}


def run_job(job: dict[str, Any]) -> Any:
    """The sweep's one entry point: dispatch on `job["kind"]`. A job draws no bar of its own: the run has one."""
    was_quiet = quiet()
    set_quiet(True)
    try:
        return JOBS[job["kind"]](job)
    finally:
        set_quiet(was_quiet)
