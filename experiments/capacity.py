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
`steps` steps (`lab.train.train`). Its accuracy is measured by the executor at the curve's format and
semantics on `eval_inputs` held-out inputs (a row also keeps the float64 accuracy). What a curve can show: where
the control stays at (near) 100% while another architecture falls, trained networks of that architecture did not
learn the task at that budget. What it cannot show: that no network of the architecture solves it -- training
may simply have failed. A point counts as evidence only where the control learned at that N, and the report says
so at every point.

    spec = CapacitySpec(L=1, sizes=(8, 16, 32), H=1, d_head=4, d_model=32, format="fp16")
    curve = capacity(spec)                 # rows: one per (N, architecture, seed)
    write(curve, "out/capacity")           # capacity.json, capacity.md, capacity.png
    wider = capacity(dataclasses.replace(spec, sizes=(4, 8, 16, 32)), stored=(curve,))  # trains N = 4 only
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.rows import Row
from lab.architectures import full_architecture, hybrid_architecture
from witness.arith import arithmetic, parse_format
from witness.budget import budget
from witness.errors import ParameterError
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
    the control (`architectures`)."""

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

    def __post_init__(self) -> None:
        check_int("L", self.L, 1)
        for name in ("H", "d_head", "d_model", "steps", "linear_per_gap", "eval_inputs"):
            check_int(name, getattr(self, name), 1)
        object.__setattr__(self, "sizes", tuple(check_int("size", size, 2) for size in self.sizes))
        object.__setattr__(self, "seeds", tuple(check_int("seed", seed, 0) for seed in self.seeds))
        object.__setattr__(self, "mixers", tuple(self.mixers))
        if not self.sizes or not self.seeds:
            raise ParameterError("a capacity curve needs at least one size and one seed")
        kinds = {cls.kind for cls in RECURRENT_MIXERS}
        unknown = sorted(set(self.mixers) - kinds)
        if unknown:
            raise ParameterError(f"mixers {unknown} are not recurrent kinds ({sorted(kinds)})")
        arithmetic(parse_format(self.format), self.semantics)  # a format the semantics can run

    def task_for(self, size: int) -> Composition:
        """L = 1: m = size. L >= 2: m = size and every n_l = 1 would make the query trivial, so n_l = 2 and
        m = size / 2^(L-1) (size must be divisible): the last table then has N = size entries."""
        if self.L == 1:
            return Composition(L=1, m=size)
        m, rest = divmod(size, 2 ** (self.L - 1))
        if rest or m < 1:
            raise ParameterError(f"size {size} at L = {self.L} must be a multiple of 2^{self.L - 1}")
        return Composition(L=self.L, m=m, n=(2,) * (self.L - 1))

    def architectures(self) -> dict[str, Any]:
        """name -> lab.train.Architecture, the control first."""
        shape = {"H": self.H, "d_head": self.d_head, "d_model": self.d_model, "mlp_ratio": self.mlp_ratio}
        found = {CONTROL: full_architecture(self.L + 1, **shape), f"{self.L} full": full_architecture(self.L, **shape)}
        for mixer in self.mixers:
            found[f"{self.L - 1} full + {mixer}"] = hybrid_architecture(self.L - 1, self.linear_per_gap, mixer,
                                                                        **shape)
        return found


@dataclass(frozen=True, kw_only=True)
class CapacityPoint(Row):
    """One trained (size, architecture, seed) of a curve, measured at the curve's format and in float64; a curve's
    `rows` hold these as JSON (`to_json`), as capacity.json and the hierarchy's trained.json store them."""

    size: int
    architecture: str
    seed: int
    params: dict[str, Any]
    layers: list[str]
    accuracy: float
    accuracy_fp64: float
    hop_weight: float
    eval_inputs: int
    steps: int
    final_loss: float
    seconds: float
    table_bits: float
    budget: dict[str, Any]


def point_job(job: dict[str, Any]) -> CapacityPoint:
    """Train one (size, architecture, seed) and measure it at the curve's format and in float64."""
    from lab import train  # torch: only where a job trains

    spec = CapacitySpec(**job["spec"])
    task = spec.task_for(job["size"])
    architecture = spec.architectures()[job["architecture"]]
    network, report = train.train(architecture, task, steps=spec.steps, seed=job["seed"], lr=spec.lr,
                                  hop_weight=spec.hop_weight)
    tokens = task.random_tokens(np.random.default_rng([job["seed"], 3]), spec.eval_inputs)
    fmt = parse_format(spec.format)
    table = task.domain_sizes[-1]
    cost = budget(network, fmt.bits)
    return CapacityPoint(size=job["size"], architecture=job["architecture"], seed=job["seed"], params=task.params(),
                         layers=[spec_.mixer for spec_ in architecture.layers],
                         accuracy=train.accuracy(network, tokens, arithmetic(fmt, spec.semantics)),
                         accuracy_fp64=report.accuracy, hop_weight=report.hop_weight, eval_inputs=spec.eval_inputs,
                         steps=report.steps, final_loss=report.final_loss, seconds=round(report.seconds, 2),
                         table_bits=table * math.log2(table), budget=cost.as_dict())


#: What a stored row must reproduce, bit for bit, before a curve reuses the rows stored beside it (`reusable_rows`).
REPLAYED = ("accuracy", "accuracy_fp64", "final_loss", "steps", "hop_weight")


def capacity(spec: CapacitySpec, engine: Engine = Engine(), stored: tuple[dict[str, Any], ...] = ()
             ) -> dict[str, Any]:
    """Every point of the curve (a `lab.sweep` over size x architecture x seed) and its summary. With `stored`
    curves (`write` wrote them, with the same protocol: see `reusable_rows`), their rows at sizes of `spec` are
    kept, the first curve's where two hold a size, and only the other sizes train."""
    names = list(spec.architectures())
    kept: list[dict[str, Any]] = []
    for curve in stored:
        have = {row["size"] for row in kept}
        kept += [row for row in reusable_rows(spec, curve, engine) if row["size"] not in have]
    done = {row["size"] for row in kept}
    points = list(itertools.product(spec.sizes, names, spec.seeds))
    jobs = [{"spec": plain_spec(spec), "size": size, "architecture": name, "seed": seed}
            for size, name, seed in points if size not in done]
    trained = [point.to_json() for point in sweep(point_job, jobs, engine, progress="capacity points")]
    order = {point: index for index, point in enumerate(points)}
    rows = sorted(kept + trained, key=lambda row: order[row["size"], row["architecture"], row["seed"]])
    return {"spec": plain_spec(spec), "rows": rows, "summary": summarise(spec, rows)}


def reusable_rows(spec: CapacitySpec, stored: dict[str, Any], engine: Engine) -> list[dict[str, Any]]:
    """The rows of `stored` at sizes of `spec`, after two checks that make them this code's rows: the stored
    protocol equals `spec` in every field but `sizes` (a ParameterError names the first that differs), and the
    stored row that trained fastest, retrained here from its seed, reproduces its `REPLAYED` fields bit for bit
    (training is deterministic, so a difference means the trainer or executor changed since, and the whole curve
    must be retrained)."""
    try:
        old = CapacitySpec(**stored["spec"])
        rows = list(stored["rows"])
    except (KeyError, TypeError) as exc:
        raise ParameterError(f"the stored curve is not one `witness capacity` wrote ({exc})") from None
    for field in asdict(spec):
        if field != "sizes" and getattr(old, field) != getattr(spec, field):
            raise ParameterError(f"the stored curve trained with {field} = {getattr(old, field)!r}, this one with "
                                 f"{getattr(spec, field)!r}: only sizes may differ when a curve is extended")
    kept = [row for row in rows if row["size"] in spec.sizes]
    if not kept:
        return []
    probe = min(kept, key=lambda row: row["seconds"])
    replay = sweep(point_job, [{"spec": plain_spec(spec), "size": probe["size"],
                                "architecture": probe["architecture"], "seed": probe["seed"]}], engine,
                   progress="replaying a stored point")[0]
    differ = replay_differences(replay, probe)
    if differ:
        raise ParameterError(f"the stored point N = {probe['size']}, {probe['architecture']}, seed {probe['seed']} "
                             f"retrained here gives {'; '.join(differ)}: the code changed since the curve was "
                             "stored, so retrain it whole")
    return kept


def replay_differences(replay: CapacityPoint, stored: dict[str, Any]) -> list[str]:
    """The `REPLAYED` fields in which a retrained point differs from its stored row, each in words."""
    return [f"{field} {getattr(replay, field)!r} (stored {stored[field]!r})" for field in REPLAYED
            if getattr(replay, field) != stored[field]]


def plain_spec(spec: CapacitySpec) -> dict[str, Any]:
    return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(spec).items()}


def summarise(spec: CapacitySpec, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (size, architecture): accuracies over seeds (mean, min, max), N log2 N, the architecture's own state
    bits C and N log2 N / C, and whether the control learned at that size (the point's standing as evidence)."""
    out = []
    control_mean = {}
    for size in spec.sizes:
        for name in spec.architectures():
            points = [row for row in rows if row["size"] == size and row["architecture"] == name]
            accuracies = [row["accuracy"] for row in points]
            mean = sum(accuracies) / len(accuracies)
            if name == CONTROL:
                control_mean[size] = mean
            state_bits = points[0]["budget"]["state_bits"]
            table_bits = points[0]["table_bits"]
            out.append({"size": size, "architecture": name, "seeds": len(points), "mean": mean,
                        "min": min(accuracies), "max": max(accuracies),
                        "mean_fp64": sum(row["accuracy_fp64"] for row in points) / len(points),
                        "table_bits": table_bits, "state_bits": state_bits,
                        "ratio": table_bits / state_bits if state_bits else None,
                        "budget": {key: points[0]["budget"][key] for key in ("H", "d", "p", "Hdp")},
                        "control_learned": control_mean[size] >= LEARNED})
    fell_below_c = {entry["architecture"] for entry in out
                    if entry["ratio"] is not None and entry["ratio"] <= 1 and entry["control_learned"]
                    and entry["mean"] < LEARNED}
    for entry in out:
        entry["fell_below_c"] = entry["architecture"] in fell_below_c
    return out


def standing(entry: dict[str, Any]) -> str:
    """What one point of the curve says, in words: a fall counts only where the control learned; past C (N log2 N
    > C) counting forces every network of the architecture to answer some input wrong, below C it forces nothing,
    and the fall is then not forced by counting -- training, or the architecture's form (its layers, MLP and key
    width), may explain it, and one curve cannot tell which. Counting forces one wrong input, not a fall to chance:
    where the same architecture fell below C too, the fall past it need not be forced either, and the words say so."""
    if entry["architecture"] == CONTROL:
        return "control: learned" if entry["control_learned"] else "control: did NOT learn"
    if not entry["control_learned"]:
        return "no evidence (control did not learn)"
    if entry["mean"] >= LEARNED:
        return "learned too"
    if entry["ratio"] is None:
        return "fell where the control learned (no recurrent state: CPW's side)"
    if entry["ratio"] > 1 and entry.get("fell_below_c"):
        return ("fell past C, where the control learned: counting forces some input wrong here, but this "
                "architecture fell below C too, so training or its form may explain the fall")
    if entry["ratio"] > 1:
        return "fell past C, where the control learned: where counting forces some input wrong"
    return "fell below C, where the control learned: not forced by counting (training or the architecture's form)"


def row_text(entry: dict[str, Any], ratio: str) -> str:
    return (f"| {entry['size']} | {entry['table_bits']:.1f} | {ratio} | {entry['architecture']} | "
            f"{entry['budget']['Hdp']} | {entry['state_bits']} | {entry['mean']:.3f} "
            f"({entry['min']:.3f}–{entry['max']:.3f}) | {entry['mean_fp64']:.3f} | {standing(entry)} |")


def _hop_targets(rows: list[dict[str, Any]]) -> str:
    """The intermediate-hop loss the rows trained with, in words (the trainer's default applies where L >= 2)."""
    weights = sorted({row["hop_weight"] for row in rows})
    if weights == [0]:
        return "no hop targets"
    return ("hop targets (each intermediate hop read out after its layer) of weight "
            + ", ".join(f"{w:g}" for w in weights))


def markdown(curve: dict[str, Any], heading: str = "#") -> str:
    spec = CapacitySpec(**curve["spec"])
    hybrids = {entry["architecture"]: entry["state_bits"] for entry in curve["summary"] if entry["state_bits"]}
    lines = [f"{heading} Capacity curve, L = {spec.L}", "",
             f"Budget: H {spec.H}, d_head {spec.d_head}, d_model {spec.d_model}, evaluated at {spec.format} "
             f"({spec.semantics} semantics: every operation rounded to the format, round to nearest even). "
             f"Protocol: `lab.train.train` from seeded random initialisations, exactly {spec.steps} steps, "
             f"peak lr {spec.lr:g}, {_hop_targets(curve['rows'])}, seeds {list(spec.seeds)}; accuracy = fraction "
             f"of {spec.eval_inputs} held-out inputs whose unique argmax at the read position is the answer, run by "
             "the executor at "
             f"{spec.format}. C, the state bits that cross the boundary ({spec.linear_per_gap} recurrent layer(s) "
             "per gap): " + ", ".join(f"{name} {bits}" for name, bits in hybrids.items()) + "; the control and the "
             "full layers carry no state.", "",
             "| N | N·log2 N | N·log2 N / C | architecture | Hdp | C (state bits) | accuracy mean (min–max) "
             "| fp64 mean | evidence |",
             "|---:|---:|---:|---|---:|---:|---|---:|---|"]
    for entry in curve["summary"]:
        ratio = f"{entry['ratio']:.3g}" if entry["ratio"] is not None else "—"
        lines.append(row_text(entry, ratio))
    lines += ["", "A fall of a trained architecture where the control learned shows that training at this budget "
              "did not find a solution; it does not prove that none exists. Where N·log2 N <= C the state can "
              "hold the whole table, so a hybrid that learns there is what the theory allows.", ""]
    return "\n".join(lines)


def plot(curve: dict[str, Any], path: str | Path):
    """Accuracy (mean over seeds, bars from min to max) against N log2 N, one line per architecture; a dashed line
    at each hybrid's C (right of it, counting forces that hybrid's states to collide; a C far right of every N is
    named in the legend only) and a dotted line at chance, 1/N (the answer is one of N values). x ticks name N, with
    a * where the control did not learn (no point at that N is evidence). The legend sits right of the axes.
    Saves to `path`; returns the Figure."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator

    spec = CapacitySpec(**curve["spec"])
    figure = Figure(figsize=(9.0, 4.2), layout="constrained")
    ax = figure.add_subplot()
    handles = []
    states: dict[int, list[tuple[str, str]]] = {}
    for name in spec.architectures():
        entries = [entry for entry in curve["summary"] if entry["architecture"] == name]
        if not entries:
            continue
        x = [entry["table_bits"] for entry in entries]
        mean = np.array([entry["mean"] for entry in entries])
        low = mean - np.array([entry["min"] for entry in entries])
        high = np.array([entry["max"] for entry in entries]) - mean
        handles.append(ax.errorbar(x, mean, yerr=[low, high], marker="o", capsize=3, label=name))
        if entries[0]["state_bits"]:
            states.setdefault(entries[0]["state_bits"], []).append((name, handles[-1][0].get_color()))
    sizes = sorted({entry["size"]: entry["table_bits"] for entry in curve["summary"]}.items())
    learned = {entry["size"]: entry["control_learned"] for entry in curve["summary"]}
    table = [bits for _, bits in sizes]
    shown = [bits for bits in states if bits <= 2.5 * max(table)]  # further right would squeeze every point
    ax.set_xscale("log")
    ax.set_xlim(min(table + shown) / 1.25, max(table + shown) * 1.25)
    for bits, owners in sorted(states.items()):
        names = ", ".join(name for name, _ in owners)
        style = {"color": owners[0][1], "linestyle": "--", "linewidth": 1.2}
        if bits in shown:
            handles.append(ax.axvline(bits, **style, label=f"C = {bits} state bits ({names})"))
        else:
            handles.append(Line2D([], [], **style, label=f"C = {bits} state bits ({names}),\n"
                                                         "off the right edge: N·log2 N < C at every N here"))
    handles += ax.plot(table, [1 / size for size, _ in sizes], color="black", linestyle=":", linewidth=1.5,
                       label="chance: 1/N (the answer is one of N)")
    if not all(learned.values()):
        handles.append(Line2D([], [], linestyle="", label=f"N*: the control's mean < {LEARNED:.0%},\n"
                                                           "so no point at that N is evidence"))
    ax.xaxis.set_major_locator(FixedLocator(table))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"N = {size}{'' if learned[size] else '*'}\n{bits:.0f} bits" for size, bits in sizes],
                       fontsize=8)
    ax.set_xlabel("N·log2 N, the bits in the last table (log scale); right of a dashed line, N·log2 N > C")
    ax.set_ylabel(f"accuracy at {spec.format}")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)
    ax.set_title(f"L = {spec.L}: H {spec.H}, d_head {spec.d_head}, d_model {spec.d_model}, {spec.steps} steps, "
                 f"{len(spec.seeds)} seeds", fontsize=10)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              title="accuracy: mean over seeds, bars min–max", title_fontsize=8)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    return figure


def write(curve: dict[str, Any], out: str | Path) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.json").write_text(json.dumps(curve, indent=1), encoding="utf-8")
    (out / "capacity.md").write_text(markdown(curve), encoding="utf-8")
    plot(curve, out / "capacity.png")


__all__ = ["CapacitySpec", "CapacityPoint", "capacity", "reusable_rows", "replay_differences", "plain_spec",
           "summarise", "markdown", "plot", "write", "point_job", "LEARNED", "CONTROL"]
