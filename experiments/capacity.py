"""Capacity curves: the empirical side of the hierarchy, measured where counting says architectures must differ.

A hybrid whose full-attention layers are too few must pass what the table block holds through its recurrent
states. The table z_L of composition holds N log2 N bits (N = N_{L-1} entries, each one of N values); the
recurrent layers carry C = `witness.budget` state bits at p bits a number. Where N log2 N <= C the state can hold
the whole table and a hybrid may well learn the task (at L = 1, m = 8 a hybrid with no full attention does); only
where N log2 N > C does counting force some pair of inputs to share a state. So a curve sweeps N across
N log2 N = C at one fixed budget (H, d_head, d_model, p) and trains, with one protocol and several seeds:

* the control: L + 1 full-attention layers (the architecture the construction proves sufficient);
* L full-attention layers (CPW's side);
* the hybrids: L - 1 full layers with `linear_per_gap` recurrent layers per gap, for each mixer.

Every network starts from its seeded random initialisation (never from a construction) and trains for exactly
`steps` steps (`lab.train.train`). Every architecture gets the same chance within the budget: each is trained at
every head width of `d_heads` (all of one Hdp), with the same MLP width, and, given `lr_sweep`, at the learning
rate the same `lab.train.sweep_lr` chooses for it at each (N, seed, d_head). Its accuracy is measured by the
executor at the curve's format and semantics on `eval_inputs` held-out inputs (a row also keeps the float64
accuracy). What a curve can show: where the control stays at (near) 100% while another architecture falls, trained
networks of that architecture did not learn the task at that budget. What it cannot show: that no network of the
architecture solves it -- training may simply have failed. A point counts as evidence only where the control learned
at that N (and d_head), and the report says so at every point.

    spec = CapacitySpec(L=1, sizes=(8, 16, 32), H=1, d_head=4, d_model=32, format="fp16")
    curve = capacity(spec)                 # rows: one per (N, architecture, d_head, seed)
    capacity_report.write(curve, "out/capacity")   # capacity.json, capacity.md, capacity.png
    wider = capacity(dataclasses.replace(spec, sizes=(4, 8, 16, 32)), stored=(curve,))  # trains N = 4 only
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.rows import Row, optional
from lab.architectures import cannot_express, full_architecture, hybrid_architecture
from lab.rates import check_device_name, check_rate, sweep_steps
from witness.arith import arithmetic, parse_format
from witness.budget import budget
from witness.errors import FileFormatError, ParameterError
from witness.mixers import RECURRENT_MIXERS
from lab.sweep import Engine, sweep
from witness.tasks import Composition
from witness.tasks.base import check_int

#: A control "learned" at a size when its mean accuracy over seeds is at least this (at the curve's format).
LEARNED = 0.98
CONTROL = "control"


@dataclass(frozen=True)
class CapacitySpec:
    """One curve: depth L, the sizes N of the last table (`task_for`), the budget (H, d_head, d_model, the format
    accuracy is measured at), the protocol (steps, lr, seeds, hop targets, MLP width) and the architectures beside
    the control (`architectures`).

    `d_heads`: the head widths every architecture is trained at (empty: `d_head` alone, the protocol of the curves
    stored before the field existed); each must keep the budget's Hdp, whose d is max(d_head, ceil(d_model / H)).
    `lr_sweep`: empty, every point trains at `lr`; else each (N, architecture, d_head, seed) first trains
    `lab.rates.sweep_steps` steps at each of these rates and keeps the one `lab.train.sweep_lr` chooses on its
    validation stream. `mlp_ratio`: an MLP of width mlp_ratio x d_model after every layer of every architecture (0:
    none). `judge_formats`: further formats every row is measured at (the same held-out inputs, the same
    semantics), so that each point can be judged at the smallest format at which its control learned on every
    seed (`summarise`): a control trained in float32 may not survive the format of the curve, and a fall is
    evidence only at a format where the control stands. `device`: where every point trains ("cpu", or "cuda",
    whose kernels round otherwise, so its weights differ from the CPU's and a curve is extended only on the device
    it trained on)."""

    L: int = 1
    sizes: tuple[int, ...] = (8, 16, 32, 48, 64)
    H: int = 1
    d_head: int = 4
    d_model: int = 32
    format: str = "fp16"
    semantics: str = "strict"
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 3000
    lr: float = 3e-3
    mixers: tuple[str, ...] = ("deltanet", "gla")
    linear_per_gap: int = 1
    eval_inputs: int = 2048
    hop_weight: float | None = None
    mlp_ratio: int = 0
    d_heads: tuple[int, ...] = ()
    lr_sweep: tuple[float, ...] = ()
    judge_formats: tuple[str, ...] = ()
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_int("L", self.L, 1)
        check_device_name(self.device)
        for name in ("H", "d_head", "d_model", "steps", "linear_per_gap", "eval_inputs"):
            check_int(name, getattr(self, name), 1)
        check_int("mlp_ratio", self.mlp_ratio, 0)
        check_rate("lr", self.lr)
        object.__setattr__(self, "d_heads", distinct("d_heads", [check_int("d_heads", d_head, 1)
                                                                 for d_head in self.d_heads]) or (self.d_head,))
        object.__setattr__(self, "lr_sweep", distinct("lr_sweep", [check_rate("lr_sweep", rate)
                                                                   for rate in self.lr_sweep]))
        budget_d = self.budget_d(self.d_head)
        for d_head in self.d_heads:
            if self.budget_d(d_head) != budget_d:
                raise ParameterError(
                    f"d_heads: d_head {d_head} makes the budget's d = max(d_head, ceil(d_model / H)) = "
                    f"{self.budget_d(d_head)}, not the {budget_d} of d_head {self.d_head} at d_model {self.d_model}, "
                    f"H {self.H}: that probe would hold another Hdp, so it would not be the same chance")
        object.__setattr__(self, "sizes", tuple(check_int("size", size, 2) for size in self.sizes))
        object.__setattr__(self, "seeds", tuple(check_int("seed", seed, 0) for seed in self.seeds))
        object.__setattr__(self, "mixers", tuple(self.mixers))
        if not self.sizes or not self.seeds:
            raise ParameterError("a capacity curve needs at least one size and one seed")
        kinds = {cls.kind for cls in RECURRENT_MIXERS}
        unknown = sorted(set(self.mixers) - kinds)
        if unknown:
            raise ParameterError(f"mixers {unknown} are not recurrent kinds ({sorted(kinds)})")
        object.__setattr__(self, "judge_formats", distinct("judge_formats", map(str, self.judge_formats)))
        for name in (self.format, *self.judge_formats):
            arithmetic(parse_format(name), self.semantics)  # a format the semantics can run
        if parse_format(self.format).name in {parse_format(name).name for name in self.judge_formats}:
            raise ParameterError(f"judge_formats lists {self.format}, the format every row is measured at anyway")

    def formats_by_bits(self) -> list[str]:
        """The curve's format and its judge formats, fewest bits first (the order listed among equals): the order
        in which `judge` looks for the control's format."""
        return sorted((self.format, *self.judge_formats), key=lambda name: parse_format(name).bits)

    def budget_d(self, d_head: int) -> int:
        """The budget's d (`witness.budget.Budget.d`) of this spec's architectures at head width `d_head`."""
        return max(d_head, -(-self.d_model // self.H))

    def task_for(self, size: int) -> Composition:
        """L = 1: m = size. L >= 2: m = size and every n_l = 1 would make the query trivial, so n_l = 2 and
        m = size / 2^(L-1) (size must be divisible): the last table then has N = size entries."""
        if self.L == 1:
            return Composition(L=1, m=size)
        m, rest = divmod(size, 2 ** (self.L - 1))
        if rest or m < 1:
            raise ParameterError(f"size {size} at L = {self.L} must be a multiple of 2^{self.L - 1}")
        return Composition(L=self.L, m=m, n=(2,) * (self.L - 1))

    def architectures(self, d_head: int | None = None) -> dict[str, Any]:
        """name -> lab.train.Architecture at head width `d_head` (default: the spec's), the control first."""
        shape = {"H": self.H, "d_head": self.d_head if d_head is None else d_head, "d_model": self.d_model,
                 "mlp_ratio": self.mlp_ratio}
        found = {CONTROL: full_architecture(self.L + 1, **shape), f"{self.L} full": full_architecture(self.L, **shape)}
        for mixer in self.mixers:
            found[f"{self.L - 1} full + {mixer}"] = hybrid_architecture(self.L - 1, self.linear_per_gap, mixer,
                                                                        **shape)
        return found


def distinct(name: str, values: Iterable[Any]) -> tuple[Any, ...]:
    """`values` as a tuple, or a ParameterError naming the field where one is listed twice (it would train every
    point of it twice)."""
    values = tuple(values)
    twice = sorted({value for value in values if values.count(value) > 1})
    if twice:
        raise ParameterError(f"{name} lists {', '.join(map(str, twice))} more than once")
    return values


@dataclass(frozen=True, kw_only=True)
class CapacityPoint(Row):
    """One trained (size, architecture, d_head, seed) of a curve, measured at `format` (with `semantics`) and in
    float64, trained `steps` steps at peak rate `lr` (`lr_sweep`: how a sweep chose it, where one did) with MLPs of
    width mlp_ratio x d_model; a curve's `rows` hold these as JSON (`to_json`), as capacity.json stores them. Rows
    stored before d_head, mlp_ratio, lr, format and semantics were recorded read as `with_old_protocol` fills them
    in. `expressive` is False, with `why`, where no weights of the architecture answer the task
    (`lab.architectures.cannot_express`): the row's accuracy then says nothing about training. Where it is missing,
    nothing was proven (or the row predates the check)."""

    size: int
    architecture: str
    d_head: int
    seed: int
    params: dict[str, Any]
    layers: list[str]
    mlp_ratio: int
    accuracy: float
    format: str
    semantics: str
    accuracy_fp64: float
    hop_weight: float
    eval_inputs: int
    steps: int
    lr: float
    lr_sweep: dict[str, Any] | None = optional()
    final_loss: float
    seconds: float
    table_bits: float
    budget: dict[str, Any]
    expressive: bool | None = optional()
    why: str | None = optional()
    accuracy_at: dict[str, float] | None = optional()


def point_job(job: dict[str, Any]) -> CapacityPoint:
    """Train one (size, architecture, d_head, seed) -- at the rate the spec's `lr_sweep` chooses for it, if it has
    one -- and measure it at the curve's format and in float64. A job that names no d_head trains the spec's (the
    stored rows of the curves before head widths were scanned name none)."""
    from lab import train  # torch: only where a job trains

    spec = CapacitySpec(**job["spec"])
    task = spec.task_for(job["size"])
    d_head = job.get("d_head", spec.d_head)
    architecture = spec.architectures(d_head)[job["architecture"]]
    sweep, lr = None, spec.lr
    if spec.lr_sweep:
        sweep = train.sweep_lr(architecture, task, steps=sweep_steps(spec.steps), seed=job["seed"],
                               lrs=spec.lr_sweep, hop_weight=spec.hop_weight, device=spec.device)
        lr = sweep.lr
    network, report = train.train(architecture, task, steps=spec.steps, seed=job["seed"], lr=lr,
                                  hop_weight=spec.hop_weight, device=spec.device)
    tokens = task.random_tokens(np.random.default_rng([job["seed"], 3]), spec.eval_inputs)
    fmt = parse_format(spec.format)
    table = task.domain_sizes[-1]
    cost = budget(network, fmt.bits)
    why = cannot_express(architecture, task)
    judged = {name: train.accuracy(network, tokens, arithmetic(parse_format(name), spec.semantics))
              for name in spec.judge_formats}
    return CapacityPoint(size=job["size"], architecture=job["architecture"], d_head=d_head, seed=job["seed"],
                         params=task.params(), layers=[spec_.mixer for spec_ in architecture.layers],
                         mlp_ratio=spec.mlp_ratio,
                         accuracy=train.accuracy(network, tokens, arithmetic(fmt, spec.semantics)),
                         format=spec.format, semantics=spec.semantics, accuracy_fp64=report.accuracy,
                         hop_weight=report.hop_weight, eval_inputs=spec.eval_inputs, steps=report.steps, lr=report.lr,
                         lr_sweep=None if sweep is None else sweep.as_dict(), final_loss=report.final_loss,
                         seconds=round(report.seconds, 2), table_bits=table * math.log2(table),
                         budget=cost.as_dict(), expressive=False if why else None, why=why,
                         accuracy_at=judged or None)


def with_old_protocol(spec: CapacitySpec, row: dict[str, Any]) -> dict[str, Any]:
    """`row` with the fields rows gained later filled in from `spec`, with the values its curve trained every row
    at before they were recorded (the spec's d_head, MLP width, format, semantics and lr): an old row reads as
    today's."""
    return {"d_head": spec.d_head, "mlp_ratio": spec.mlp_ratio, "format": spec.format, "semantics": spec.semantics,
            "lr": spec.lr, **row}


#: What a stored row must reproduce, bit for bit, before a curve reuses the rows stored beside it (`reusable_rows`).
REPLAYED = ("accuracy", "accuracy_fp64", "final_loss", "steps", "hop_weight")


def capacity(spec: CapacitySpec, engine: Engine = Engine(), stored: tuple[dict[str, Any], ...] = ()
             ) -> dict[str, Any]:
    """Every point of the curve (a `lab.sweep` over size x architecture x d_head x seed) and its summary. With
    `stored` curves (`write` wrote them, with the same protocol: see `reusable_rows`), their rows at sizes of `spec`
    are kept, the first curve's where two hold a size, and only the other sizes train."""
    names = list(spec.architectures())
    kept: list[dict[str, Any]] = []
    for curve in stored:
        have = {row["size"] for row in kept}
        kept += [row for row in reusable_rows(spec, curve, engine) if row["size"] not in have]
    done = {row["size"] for row in kept}
    points = list(itertools.product(spec.sizes, names, spec.d_heads, spec.seeds))
    jobs = [{"spec": plain_spec(spec), "size": size, "architecture": name, "d_head": d_head, "seed": seed}
            for size, name, d_head, seed in points if size not in done]
    trained = [point.to_json() for point in sweep(point_job, jobs, engine, progress="capacity points")]
    order = {point: index for index, point in enumerate(points)}
    rows = sorted(kept + trained,
                  key=lambda row: order[row["size"], row["architecture"], row["d_head"], row["seed"]])
    return {"spec": plain_spec(spec), "rows": rows, "summary": summarise(spec, rows)}


def reusable_rows(spec: CapacitySpec, stored: dict[str, Any], engine: Engine) -> list[dict[str, Any]]:
    """The rows of `stored` at sizes of `spec`, after two checks that make them this code's rows: the stored
    protocol equals `spec` in every field but `sizes` (a ParameterError names the first that differs), and the
    stored row that trained fastest, retrained here from its seed, reproduces its `REPLAYED` fields bit for bit
    (training is deterministic, so a difference means the trainer or executor changed since, and the whole curve
    must be retrained)."""
    try:
        old = CapacitySpec(**stored["spec"])
        rows = [CapacityPoint.from_json(with_old_protocol(old, row)).to_json() for row in stored["rows"]]
    except (KeyError, TypeError) as exc:
        raise ParameterError(f"the stored curve is not one `witness capacity` wrote ({exc})") from None
    for field in asdict(spec):
        if field != "sizes" and getattr(old, field) != getattr(spec, field):
            raise ParameterError(f"the stored curve trained with {field} = {getattr(old, field)!r}, this one with "
                                 f"{getattr(spec, field)!r}: only sizes may differ when a curve is extended")
    kept = [row for row in rows if row["size"] in spec.sizes]
    if not kept:
        return []
    probe, job = fastest_replay(spec, kept)
    replay = sweep(point_job, [job], engine, progress="replaying a stored point")[0]
    differ = replay_differences(replay, probe)
    if differ:
        raise ParameterError(f"the stored point N = {probe['size']}, {probe['architecture']}, d_head "
                             f"{probe['d_head']}, seed {probe['seed']} "
                             f"retrained here gives {'; '.join(differ)}: the code changed since the curve was "
                             "stored, so retrain it whole")
    return kept


#: The fields that name a point of a curve: a point job trains exactly the row they name (with the curve's spec).
POINT = ("size", "architecture", "d_head", "seed")


def fastest_replay(spec: CapacitySpec, rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stored row of a curve of `spec` that trained fastest (as today's rows read: `with_old_protocol`) and the
    point job that retrains it from its seed: the cheapest check that this code still trains what the curve stored
    (`replay_differences` compares the two). Both `reusable_rows` and the hierarchy's replay of committed curves
    check a curve this one way."""
    row = with_old_protocol(spec, min(rows, key=lambda row: row["seconds"]))
    return row, {"spec": plain_spec(spec), **{field: row[field] for field in POINT}}


def replay_differences(replay: CapacityPoint, stored: dict[str, Any]) -> list[str]:
    """The `REPLAYED` fields in which a retrained point differs from its stored row, each in words."""
    return [f"{field} {getattr(replay, field)!r} (stored {stored[field]!r})" for field in REPLAYED
            if getattr(replay, field) != stored[field]]


def read_curve(folder: str | Path) -> dict[str, Any]:
    """The curve `capacity_report.write` left in `folder` (its capacity.json), checked to be one: its spec a
    `CapacitySpec`, every row a `CapacityPoint` (an old row as `with_old_protocol` reads it), at least one row. A
    ParameterError where the folder holds no capacity.json, a FileFormatError where that file is no such curve."""
    path = Path(folder) / "capacity.json"
    try:
        curve = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParameterError(f"{folder}: no capacity.json there (a folder `witness capacity` wrote)") from None
    except OSError as exc:
        raise FileFormatError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise FileFormatError(f"{path}: not JSON ({exc})") from None
    try:
        spec = CapacitySpec(**curve["spec"])
        for row in curve["rows"]:
            CapacityPoint.from_json(with_old_protocol(spec, row))
        if not curve["rows"]:
            raise ValueError("no rows")
    except (KeyError, TypeError, ValueError) as exc:
        raise FileFormatError(f"{path}: not a curve `witness capacity` wrote ({type(exc).__name__}: {exc})") from None
    return curve


def plain_spec(spec: CapacitySpec) -> dict[str, Any]:
    """The spec as JSON. `d_heads`, `lr_sweep`, `judge_formats` and `device` are left out where they hold the
    protocol of the curves stored before they existed (`d_head` alone, no sweep, no further formats, the CPU): such a
    curve's stored spec, which lacks them, is then the same dict as today's spec of its protocol."""
    plain = {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(spec).items()}
    if spec.d_heads == (spec.d_head,):
        del plain["d_heads"]
    for field in ("lr_sweep", "judge_formats"):
        if not getattr(spec, field):
            del plain[field]
    if spec.device == "cpu":
        del plain["device"]
    return plain


def summarise(spec: CapacitySpec, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (size, architecture, d_head): accuracies over seeds (mean, min, max), the learning rates they trained
    at, N log2 N, the architecture's own state bits C and N log2 N / C, and whether the control learned at that
    size and d_head (the point's standing as evidence: each point is judged against the control of its own shape);
    `expressive` False and `why` where its rows carry them (an architecture that cannot express the task)."""
    rows = [with_old_protocol(spec, row) for row in rows]
    out = []
    control_mean = {}
    for size in spec.sizes:
        for name in spec.architectures():
            for d_head in spec.d_heads:
                points = [row for row in rows
                          if row["size"] == size and row["architecture"] == name and row["d_head"] == d_head]
                accuracies = [row["accuracy"] for row in points]
                mean = sum(accuracies) / len(accuracies)
                if name == CONTROL:
                    control_mean[size, d_head] = mean
                state_bits = points[0]["budget"]["state_bits"]
                table_bits = points[0]["table_bits"]
                out.append({"size": size, "architecture": name, "d_head": d_head, "seeds": len(points),
                            "mean": mean, "min": min(accuracies), "max": max(accuracies),
                            "mean_fp64": sum(row["accuracy_fp64"] for row in points) / len(points),
                            "lrs": sorted({row["lr"] for row in points}),
                            "table_bits": table_bits, "state_bits": state_bits,
                            "ratio": table_bits / state_bits if state_bits else None,
                            "budget": {key: points[0]["budget"][key] for key in ("H", "d", "p", "Hdp")},
                            "control_learned": control_mean[size, d_head] >= LEARNED,
                            **{key: points[0][key] for key in ("expressive", "why") if key in points[0]}})
    fell_below_c = {(entry["architecture"], entry["d_head"]) for entry in out
                    if entry["ratio"] is not None and entry["ratio"] <= 1 and entry["control_learned"]
                    and entry["mean"] < LEARNED}
    for entry in out:
        entry["fell_below_c"] = (entry["architecture"], entry["d_head"]) in fell_below_c
    if spec.judge_formats:
        judge(spec, rows, out)
    return out


def judge(spec: CapacitySpec, rows: list[dict[str, Any]], summary: list[dict[str, Any]]) -> None:
    """Give every summary entry `judged`: its accuracies (mean, min, max over seeds) and C at the format of fewest
    bits (the curve's or a judge format; the first listed among equals) at which the control of its (size, d_head)
    learned on every seed, its minimum at least LEARNED -- None where it learned at none. C is state numbers times
    that format's bits. `fell_below_c` is recomputed there: an architecture fell below C at its judged formats if,
    at some size, it fell where its C held the table."""
    formats = spec.formats_by_bits()

    def at(row: dict[str, Any], name: str) -> float:
        return row["accuracy"] if name == spec.format else row["accuracy_at"][name]

    def points(entry: dict[str, Any], architecture: str) -> list[dict[str, Any]]:
        return [row for row in rows if row["size"] == entry["size"] and row["d_head"] == entry["d_head"]
                and row["architecture"] == architecture]

    for entry in summary:
        controls = points(entry, CONTROL)
        chosen = next((name for name in formats if min(at(row, name) for row in controls) >= LEARNED), None)
        if chosen is None:
            entry["judged"] = None
            continue
        accuracies = [at(row, chosen) for row in points(entry, entry["architecture"])]
        bits = parse_format(chosen).bits
        state_bits = entry["state_bits"] // entry["budget"]["p"] * bits
        entry["judged"] = {"format": chosen, "bits": bits, "mean": sum(accuracies) / len(accuracies),
                           "min": min(accuracies), "max": max(accuracies), "state_bits": state_bits,
                           "Hdp": entry["budget"]["H"] * entry["budget"]["d"] * bits,
                           "ratio": entry["table_bits"] / state_bits if state_bits else None}
    fell = {(entry["architecture"], entry["d_head"]) for entry in summary if entry["judged"]
            and entry["judged"]["ratio"] is not None and entry["judged"]["ratio"] <= 1
            and entry["judged"]["mean"] < LEARNED}
    for entry in summary:
        if entry["judged"]:
            entry["judged"]["fell_below_c"] = (entry["architecture"], entry["d_head"]) in fell


__all__ = ["CapacitySpec", "CapacityPoint", "capacity", "reusable_rows", "fastest_replay", "replay_differences",
           "read_curve", "POINT", "plain_spec", "summarise", "judge", "point_job", "with_old_protocol", "LEARNED",
           "CONTROL"]
