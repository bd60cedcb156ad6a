"""The configuration of `witness hierarchy`: its JSON schema, read and validated into frozen dataclasses.

`experiments/hierarchy.json` is the embedded default; its `quick` section replaces whole sections for `--quick`.
The sections:

* `levels` {L: {m, n}}: the depths, each the size of its composition task (m, and n = [n_1 .. n_{L-1}]);
* `certify` {family, semantics, fallback_format}: how the constructions' p* is searched (`verify.precision`'s
  format family), under which semantics, and the format a row gets where no format of the family verifies
  (default fp16);
* `precision_sweep` {family, log2_m: {semantics: [j, ...]}}: the p* plot's sizes m = 2^j per semantics;
* `probes` {runs: [{weights, seed}], mixer, linear_per_gap, effort}: the probed networks of every depth (weights
  random or trained), the recurrent mixer of the hybrids and how many per gap;
* `two_sum` {n, M, t, block, k, runs, effort}: the 2-Sum task, the (block, k)-sparse layer probed, its networks;
* `separation` {L: [...]} (optional): the depths whose separation is certified at the theorem's own scale;
* `positive_sides` {levels: {L: {m, n}}, depths: [...]} (optional): per configured depth a small composition family
  at which the chain-of-thought and encoder constructions are compiled and run on every input at each format (the
  exhaustive p* search: each family must be enumerable), and the depths at which every positive side is compiled
  for the plot of layers against L;
* `curves` (optional, a list): committed capacity curves, each a folder relative to the repository's docs/ (e.g.
  "capacity/dhead") that `witness capacity` wrote (capacity.json, capacity.md, capacity.png). The hierarchy trains
  no curve of its own: it reports each named curve and retrains its fastest point to check that today's trainer
  still gives the stored row (`experiments.capacity.fastest_replay`).

An `effort` holds the search function's own keyword settings (samples, hypothesis_examples, train_steps, ...),
passed through unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from experiments.capacity import distinct, read_curve
from verify import precision
from witness.arith import arithmetic, parse_format
from witness.errors import FileFormatError, ParameterError, WitnessError
from witness.tasks import task_from_params
from witness.tasks.base import DEFAULT_ENUMERATION_LIMIT, check_int

DEFAULT_CONFIG = Path(__file__).parents[1] / "hierarchy.json"
#: The folder the `curves` are relative to: the repository's docs/, where `witness capacity` curves are committed
#: (found as `experiments.trained.DEFAULT_STORE` finds docs/hierarchy).
DOCS = Path(__file__).resolve().parents[2] / "docs"
SECTIONS = ("levels", "certify", "precision_sweep", "probes", "two_sum")
#: The paper's two tasks: that of the `levels` section (one composition task per depth) and of `two_sum`.
COMPOSITION, TWO_SUM = "composition", "two_sum"


class Level(NamedTuple):
    L: int
    m: int
    n: tuple[int, ...]

    def params(self) -> dict[str, Any]:
        return {"L": self.L, "m": self.m, "n": list(self.n)}


class Run(NamedTuple):
    """One probed network: its weights ("random", "trained", or the construction's own, "natural") and seed."""

    weights: str
    seed: int

    def to_json(self) -> dict[str, Any]:
        return {"weights": self.weights, "seed": self.seed}


def _runs(runs) -> tuple[Run, ...]:
    runs = tuple(Run(str(weights), int(seed)) for weights, seed in runs)
    if not runs:
        raise ParameterError("probes need at least one run (weights, seed)")
    return runs


@dataclass(frozen=True)
class TwoSumConfig:
    """The `two_sum` section: the task (n, M, t), the (block, k)-sparse layer probed and the probed networks."""

    n: int
    M: int
    t: int
    block: int
    k: int
    effort: dict[str, Any]
    runs: tuple[Run, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", _runs(self.runs))
        task_from_params(TWO_SUM, self.task_params())  # raises ParameterError on a bad size

    def task_params(self) -> dict[str, int]:
        return {"n": self.n, "M": self.M, "t": self.t}

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "M": self.M, "t": self.t, "block": self.block, "k": self.k, "effort": self.effort,
                "runs": [run.to_json() for run in self.runs]}


@dataclass(frozen=True)
class Config:
    """A validated configuration (the module docstring describes the sections)."""

    levels: tuple[Level, ...]
    family: str
    semantics: str
    fallback_format: str
    sweep_family: str
    sweep_log2_m: tuple[tuple[str, tuple[int, ...]], ...]
    runs: tuple[Run, ...]
    mixer: str
    linear_per_gap: int
    effort: dict[str, Any]
    two_sum: TwoSumConfig
    separation: tuple[int, ...] = ()
    curves: tuple[str, ...] = ()
    positive_sides: tuple[Level, ...] = ()
    depths: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(Level(L, m, tuple(n)) for L, m, n in self.levels))
        for level in self.levels:
            task_from_params(COMPOSITION, level.params())  # raises ParameterError on a bad size
        object.__setattr__(self, "positive_sides", tuple(Level(L, m, tuple(n)) for L, m, n in self.positive_sides))
        for level in self.positive_sides:
            self._check_positive_side(level)
        object.__setattr__(self, "depths", tuple(check_int("depth", L, 1) for L in self.depths))
        for family in (self.family, self.sweep_family):
            if family not in precision.FAMILIES:
                raise ParameterError(f"format family must be one of {sorted(precision.FAMILIES)}, got {family!r}")
        arithmetic(parse_format(self.fallback_format), self.semantics)  # a format the semantics can run
        object.__setattr__(self, "runs", _runs(self.runs))
        object.__setattr__(self, "curves", _curves(self.curves))

    def _check_positive_side(self, level: Level) -> None:
        """A positive side stands beside its depth's decoder row, and its p* search runs every input at each
        format: refused here, not after the constructions' stage, where its depth is not configured or its family
        is too large to enumerate."""
        if level.L not in {configured.L for configured in self.levels}:
            raise ParameterError(f"positive side L = {level.L}: the configuration has levels "
                                 f"{sorted(configured.L for configured in self.levels)} only")
        count = task_from_params(COMPOSITION, level.params()).count()
        if count > DEFAULT_ENUMERATION_LIMIT:
            raise ParameterError(f"positive side L = {level.L} (m = {level.m}, n = {list(level.n)}): {count} inputs, "
                                 f"more than the {DEFAULT_ENUMERATION_LIMIT} an exhaustive search enumerates")

    def curve_folders(self) -> dict[str, Path]:
        """Each curve's folder: by how report.json names it (relative to the repository, "docs/capacity/dhead"),
        where it lies."""
        return {f"{DOCS.name}/{name}": DOCS / name for name in self.curves}

    def select(self, depths: list[int] | None) -> Config:
        """The same configuration restricted to the depths `depths` (each must be configured)."""
        if depths is None:
            return self
        known = {level.L for level in self.levels}
        missing = sorted(set(depths) - known)
        if missing:
            raise ParameterError(f"--L {missing}: the configuration has levels {sorted(known)} only")
        return replace(self, levels=tuple(level for level in self.levels if level.L in set(depths)),
                       positive_sides=tuple(level for level in self.positive_sides if level.L in set(depths)))

    def to_json(self) -> dict[str, Any]:
        """The configuration as report.json records it (the file's layout, without `quick`)."""
        return {"levels": _levels_json(self.levels),
                "certify": {"family": self.family, "semantics": self.semantics,
                            "fallback_format": self.fallback_format},
                "precision_sweep": {"family": self.sweep_family,
                                    "log2_m": {semantics: list(js) for semantics, js in self.sweep_log2_m}},
                "probes": {"runs": [run.to_json() for run in self.runs], "mixer": self.mixer,
                           "linear_per_gap": self.linear_per_gap, "effort": self.effort},
                "two_sum": self.two_sum.to_json(), "separation": {"L": list(self.separation)},
                "curves": list(self.curves),
                "positive_sides": {"levels": _levels_json(self.positive_sides), "depths": list(self.depths)}}


def _curves(curves) -> tuple[str, ...]:
    """The `curves` entries (as POSIX paths), each refused in one line unless it is a folder below docs/ that holds a
    curve `witness capacity` wrote: a path that could leave docs/ would make the report depend on what lies outside
    the repository."""
    if isinstance(curves, str) or not isinstance(curves, (list, tuple)):
        raise ParameterError(f"curves must be a list of folders relative to docs/ (e.g. [\"capacity/dhead\"]), "
                             f"got {curves!r}")
    for name in curves:
        if not isinstance(name, str) or not name:
            raise ParameterError(f"curves: {name!r} is not a folder relative to docs/ (e.g. \"capacity/dhead\")")
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise ParameterError(f"curves: {name!r} must be a folder relative to docs/ without \"..\" "
                                 "(e.g. \"capacity/dhead\")")
    names = distinct("curves", [Path(name).as_posix() for name in curves])
    for name in names:
        try:
            read_curve(DOCS / name)
        except WitnessError as exc:
            raise type(exc)(f"curves: {exc}") from None
    return names


def _levels_json(levels: tuple[Level, ...]) -> dict[str, dict[str, Any]]:
    return {str(level.L): {"m": level.m, "n": list(level.n)} for level in levels}


def _read_levels(raw) -> tuple[Level, ...]:
    return tuple(sorted(Level(int(L), int(level["m"]), tuple(int(v) for v in level["n"])) for L, level in raw.items()))


def _read_runs(raw) -> tuple[Run, ...]:
    return tuple(Run(run["weights"], run["seed"]) for run in raw)


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
        cert, sweep, probes, two_sum = raw["certify"], raw["precision_sweep"], raw["probes"], raw["two_sum"]
        positive = raw.get("positive_sides", {})
        return Config(
            levels=_read_levels(raw["levels"]), family=cert["family"], semantics=cert["semantics"],
            fallback_format=cert.get("fallback_format", "fp16"), sweep_family=sweep["family"],
            sweep_log2_m=tuple((semantics, tuple(int(j) for j in js)) for semantics, js in sweep["log2_m"].items()),
            runs=_read_runs(probes["runs"]), mixer=str(probes["mixer"]), linear_per_gap=int(probes["linear_per_gap"]),
            effort=dict(probes["effort"]),
            two_sum=TwoSumConfig(**{key: two_sum[key] for key in ("n", "M", "t", "block", "k", "effort")},
                                 runs=_read_runs(two_sum["runs"])),
            separation=tuple(int(L) for L in raw.get("separation", {}).get("L", [])),
            curves=raw.get("curves", ()), positive_sides=_read_levels(positive.get("levels", {})),
            depths=tuple(positive.get("depths", ())))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, WitnessError):
            raise
        raise FileFormatError(f"{path}: bad configuration ({type(exc).__name__}: {exc})") from None
