"""The rows of `witness hierarchy`: what each job kind returns, and how report.json writes it.

Every field of report.json's rows is a field here, in the order report.json lists them (`experiments.rows.Row`);
`category` is not: it is derived from the other fields when the report is written (`evidence.category_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from experiments.rows import Row, optional

#: Row statuses. Only CERTIFIED and EXHAUSTIVE are statements about every input: CERTIFIED by a certificate the
#: trusted checker re-derives, EXHAUSTIVE by running every input of a small family (no certificate).
CERTIFIED, EXHAUSTIVE, UNKNOWN, FAILURES, NONE_FOUND, NOT_AVAILABLE = (
    "certified", "verified (exhaustive)", "unknown", "failures found", "none found", "not available")


@dataclass(frozen=True, kw_only=True)
class OfConstruction(Row):
    """The fields that open every row about one construction (stage 1's and the separation's): which one, of
    which task and depth, at which parameters and semantics. A separation row always has its depth L."""

    L: int | None
    task: str
    name: str
    construction: str
    architecture: str
    params: dict[str, Any]
    semantics: str


@dataclass(frozen=True, kw_only=True)
class Compiled(OfConstruction):
    """The fields of a construction compiled and its p* searched: its network file, certificate (where there is
    one), context, the p* search, status, format, budget and verdict. A construction that is not installed has
    neither n_ctx, p* search, format nor budget."""

    network: str | None = None
    certificate: str | None = None
    n_ctx: int | None = optional()
    min_precision: dict[str, Any] | None = optional()
    status: str
    format: str | None = optional()
    budget: dict[str, Any] | None = optional()
    evidence: str


@dataclass(frozen=True, kw_only=True)
class ConstructionRow(Compiled):
    """A construction compiled, its p* found by certify and certified there (stage 1); one certify could not prove
    has no certificate."""

    STAGE: ClassVar[str] = "construction"


@dataclass(frozen=True, kw_only=True)
class SeparationRow(OfConstruction):
    """The (L+1)-layer construction certified at the smallest size where Theorem 1.1 covers its budget
    (`experiments.separation`); its certificate needs no network file. `replayed_from` names the stored separation
    a replaying run re-checked."""

    STAGE: ClassVar[str] = "separation"
    format: str
    network: None = None
    certificate: str
    report: str
    budget: dict[str, Any]
    status: str = CERTIFIED
    covered: bool
    prompt_length: str
    prompt_length_log2: str
    largest_covered_Hdp: dict[str, Any]
    cpw_covered: bool
    evidence: str
    replayed_from: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class PositiveSideRow(Compiled):
    """A positive side of the hierarchy (chain of thought, the encoder) at a small family: compiled, its p* found by
    running every input at each format (`verify.precision` with the exhaustive checker), saved. `layers` and
    `generated` (tokens generated per input; 0 for one pass) are read from the compiled network, `inputs` is the
    family's size. Verified rows have a format and budget; no row has a certificate (the checker does not know these
    constructions), and one that is not installed has none of the compiled fields."""

    STAGE: ClassVar[str] = "positive side"
    layers: int | None = optional()
    generated: int | None = optional()
    inputs: int | None = optional()


@dataclass(frozen=True, kw_only=True)
class DepthCurve(Row):
    """One construction compiled at each depth of the depth plot: its layer count and the tokens it generates per
    input, read from each compiled network. Empty where the construction is not installed (`missing` says so)."""

    construction: str
    label: str
    causal: bool | None
    L: list[int]
    layers: list[int]
    generated: list[int]
    missing: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class ProbeRow(Row):
    """One network of a weaker architecture (or a trained control) searched for failures within a construction's
    budget. `table_bits` (N log2 N of the last table) exists for the composition probes; `control_learned` once the
    row was judged against its trained control (`evidence.judge_against_controls`); `expressive` False, with `why`,
    where no weights of the architecture answer the task (`lab.architectures.cannot_express`)."""

    STAGE: ClassVar[str] = "probe"
    L: int | None
    task: str
    name: str
    architecture: str
    params: dict[str, Any]
    weights: str
    seed: int
    format: str
    semantics: str
    network: str
    certificate: None = None
    budget: dict[str, Any]
    control: bool
    replayed_from: str | None = None
    failures: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    searched: dict[str, Any]
    failing: int
    tried: int
    trained_accuracy: float | None
    table_bits: float | None = optional()
    status: str
    evidence: str
    control_learned: bool | None = optional()
    expressive: bool | None = optional()
    why: str | None = optional()

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.weights != "trained":  # trained weights come from a file: null where this run trained them
            del data["replayed_from"]
        return data


@dataclass(frozen=True, kw_only=True)
class PrecisionPoint(Row):
    """p* of the composition construction at one balanced size (m = n_1 = ... = n_{L-1}), for the first plot."""

    STAGE: ClassVar[str] = "precision"
    L: int
    m: int
    n: list[int]
    semantics: str
    prompt_length: int
    log2_n: float
    p: int | None
    format: str | None


@dataclass(frozen=True, kw_only=True)
class BoundsRow(Row):
    """The theorems evaluated at one row's budget and prompt length (stage 4): which apply, and their thresholds
    in words. A separation row's bounds name its report (`separation`)."""

    STAGE: ClassVar[str] = "bounds"
    L: int | None
    task: str
    Hdp: int
    n: int | str
    applies: dict[str, bool]
    thresholds: dict[str, str]
    separation: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class CurveReplay(Row):
    """A committed capacity curve (`folder`, relative to the repository) checked against today's trainer: its
    stored point that trained fastest (`point`: size, architecture, d_head, seed) retrained here and compared with
    the stored row, bit for bit (`experiments.capacity.REPLAYED`); `differences` in words, none where it `matched`.
    The curve's rows stay in its own capacity.json: report.json names the folder."""

    folder: str
    point: dict[str, Any]
    matched: bool
    differences: list[str]


#: The rows of report.json's "rows", by their stage.
OUTCOME_ROWS = {cls.STAGE: cls for cls in (ConstructionRow, SeparationRow, ProbeRow)}
OutcomeRow = ConstructionRow | SeparationRow | ProbeRow


def outcome_row_from_json(data: dict[str, Any]) -> OutcomeRow:
    """A row of report.json's "rows" read back into its type (its derived `category` dropped)."""
    fields = {key: value for key, value in data.items() if key != "category"}
    return OUTCOME_ROWS[data["stage"]].from_json(fields)


def table_order(row: dict[str, Any]) -> tuple:
    """Where a row of report.json's "rows" stands in the report's tables and plots: by depth (2-Sum, which has
    none, last), constructions before the separation before the probes, then by name."""
    stage = {"construction": 0, "separation": 1}.get(row["stage"], 2)
    return (row["L"] is None, row["L"] or 0, stage, row["name"])
