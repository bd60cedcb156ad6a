"""What `witness hierarchy` trains, stored once and replayed: the trained probes and their controls.

Training is the one expensive part of the hierarchy and the one part that certifies nothing, so the main job does
not repeat it by default. `witness hierarchy --full` trains every network and writes `DIR/trained.json` beside
`DIR/networks/`: per trained network the job that trained it (architecture, budget, task, seed, protocol), its
training reports and the file. A later run (`--stored DIR`, by default the committed `docs/hierarchy`) replays them:

* every stored job must equal, field for field, the job this run would train (else `--full`: the stored
  networks answer another question);
* the stored network that trained fastest is retrained here from its seed and compared, array by array, bit for bit
  (`replay_network_job`). Training is deterministic on one machine and install, so a difference means another
  trainer, torch or processor made the stored networks; the run says so in its report and does not claim the
  stored rows were reproduced;
* the searches then run fresh on the stored networks: only the weights are loaded, never a verdict.

The report names, for every replayed row, the file it came from (`replayed_from`). The capacity curves the report
shows are not stored here: they are `witness capacity`'s, committed in their own folders (the configuration's
`curves`), and every run replays a point of each (`experiments.hierarchy.jobs.curve_replay_job`).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.rows import Row
from witness.errors import FileFormatError, ParameterError
from witness.tasks import task_from_params

STORE = "trained.json"
#: The committed store the main job replays by default (written by `witness hierarchy --full`).
DEFAULT_STORE = Path(__file__).resolve().parents[1] / "docs" / "hierarchy"
#: The fields of a training job that decide its weights (the rest says where it is written).
TRAINING_FIELDS = ("architecture_kind", "task", "params", "architecture_options", "shape", "seed", "training")


def training_key(job: dict[str, Any], without: tuple[str, ...] = ()) -> dict[str, Any]:
    return {field: job[field] for field in TRAINING_FIELDS if field not in without}


@dataclass(frozen=True, kw_only=True)
class TrainedNetwork(Row):
    """The store's entry for one trained network: its file (relative to the store), the job that trained it
    (`training_key`), the training reports and the seconds training took."""

    name: str
    file: str
    job: dict[str, Any]
    training: list[dict[str, Any]]
    seconds: float


@dataclass(frozen=True, kw_only=True)
class ReplayCheck(Row):
    """One stored network retrained here and compared with what is stored (`matched`)."""

    what: str
    file: str
    matched: bool
    detail: str


def architecture(job: dict[str, Any]):
    """The `lab.train.Architecture` a probe job of kind hybrid / full / control / sparse searches."""
    from lab.architectures import architecture_of_kind

    kind = "full" if job["architecture_kind"] == "control" else job["architecture_kind"]  # a control is full attention
    return architecture_of_kind(kind, task_of(job), **job["shape"], mlp_ratio=job["training"]["mlp_ratio"],
                                **job["architecture_options"])


def task_of(job: dict[str, Any]):
    return task_from_params(job["task"], job["params"])


def train_network(job: dict[str, Any]):
    """(network, training reports) for a training job: `lab.architectures.network` with `trained`
    weights, exactly as a search with weights="trained" builds them."""
    from lab import architectures

    training = job["training"]
    network, weights = architectures.network(architecture(job), task_of(job), "trained", job["seed"],
                                             training["train_seeds"], training["train_steps"])
    return network, list(weights.as_dict().get("training", ()))


def train_job(job: dict[str, Any]) -> TrainedNetwork:
    """Train one network and write it to DIR/networks/NAME.npz; the store's entry for it."""
    network, reports = train_network(job)
    path = f"networks/{job['name']}.npz"
    network.save(Path(job["out"]) / path)
    return TrainedNetwork(name=job["name"], file=path, job=training_key(job), training=reports,
                          seconds=round(sum(report["seconds"] for report in reports), 2))


def same_weights(a, b) -> list[str]:
    """The arrays in which two networks differ (names; a missing or extra array counts), bit for bit."""
    left, right = a.state_dict(), b.state_dict()
    names = sorted(set(left) | set(right))
    return [name for name in names if name not in left or name not in right or left[name].dtype != right[name].dtype
            or not np.array_equal(left[name], right[name])]


def replay_network_job(job: dict[str, Any]) -> ReplayCheck:
    """Retrain one stored network (`job["entry"]`, a TrainedNetwork) from its seed and compare it, array by array,
    with the stored file."""
    from witness.io import load

    entry: TrainedNetwork = job["entry"]
    network, _ = train_network({**entry.job, "name": entry.name})
    differ = same_weights(network, load(job["file"]))
    return ReplayCheck(what=f"network {entry.name}", file=job["file"], matched=not differ,
                       detail="every array equal bit for bit" if not differ else
                       f"{len(differ)} arrays differ (first: {differ[0]})")


def write(out: Path, networks: list[TrainedNetwork]) -> None:
    """DIR/trained.json: the store a later run replays (the separations it replays lie in DIR/separation/)."""
    store = {"about": "Written by `witness hierarchy --full`: every trained network (the job that trained it, "
                      "its training reports, its file). `witness hierarchy --stored DIR` replays them "
                      "(experiments/trained.py).",
             "networks": {entry.name: entry.to_json() for entry in networks}}
    (out / STORE).write_text(json.dumps(store, indent=1), encoding="utf-8")


class Store:
    """A stored DIR/trained.json and its networks, matched against the jobs of this run."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder).resolve()
        path = self.folder / STORE
        if self.folder.is_file():
            raise ParameterError(f"--stored {folder}: is a file, not a folder `witness hierarchy --full` wrote")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            # A store written before the hierarchy stopped training a capacity curve also holds its rows under
            # "capacity": they are ignored (read gracefully, as nothing here needs them), the networks are replayed.
            self.networks = {name: TrainedNetwork.from_json(entry) for name, entry in raw["networks"].items()}
        except FileNotFoundError:
            raise ParameterError(f"--stored {folder}: no {STORE} there (a folder `witness hierarchy --full` "
                                 "wrote); run with --full to train instead") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FileFormatError(f"{path}: not a store `witness hierarchy --full` wrote ({exc})") from None

    def path(self, name: str) -> Path:
        return self.folder / self.networks[name].file

    def display(self, relative: str) -> str:
        """A path inside the store as a reader finds it: relative to the current folder where it lies below it."""
        path = self.folder / relative
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)

    def entry_for(self, job: dict[str, Any], without: tuple[str, ...] = ()) -> TrainedNetwork:
        """The stored entry trained by exactly `job` (but for the fields `without`), else a ParameterError naming
        the first field that differs."""
        entry = self.networks.get(job["name"])
        if entry is None:
            raise ParameterError(f"{self.folder / STORE} holds no trained network {job['name']!r}; run with "
                                 "--full (or --stored a folder trained with this configuration)")
        wanted = training_key(job, without)
        for field, value in wanted.items():
            if entry.job.get(field) != value:
                raise ParameterError(f"the stored network {job['name']} was trained with {field} = "
                                     f"{entry.job.get(field)!r}, this run would train {value!r}: run with "
                                     "--full (or --stored a folder trained with this configuration)")
        if not self.path(job["name"]).is_file():
            raise ParameterError(f"{self.path(job['name'])}: the stored network file is missing")
        return entry

    def training_seconds(self) -> float:
        """The seconds a --full run spent training what is stored."""
        return sum(entry.seconds for entry in self.networks.values())

    def separation(self, L: int) -> Path:
        """The folder of the stored separation at depth L (a --full run scanned for it)."""
        folder = self.folder / "separation" / f"L{L}"
        if not (folder / "separation.json").is_file():
            raise ParameterError(f"{folder}: no stored separation at L = {L}; run with --full")
        return folder

    def copy_into(self, name: str, out: Path) -> str:
        """Copy a stored network into DIR/networks (unless DIR is the store itself); its path relative to DIR."""
        target = out / self.networks[name].file
        if target.resolve() != self.path(name):
            shutil.copyfile(self.path(name), target)
        return self.networks[name].file

    def replay_jobs(self, names: list[str]) -> list[dict[str, Any]]:
        """The bit-for-bit check: the stored network among `names` that trained fastest, retrained here."""
        if not names:
            return []
        fastest = min(names, key=lambda name: self.networks[name].seconds)
        return [{"kind": "replay_network", "name": f"replay {fastest}", "entry": self.networks[fastest],
                 "file": str(self.path(fastest)), "seconds": self.networks[fastest].seconds}]


__all__ = ["Store", "TrainedNetwork", "ReplayCheck", "train_job", "replay_network_job", "write", "training_key",
           "same_weights", "DEFAULT_STORE", "STORE"]
