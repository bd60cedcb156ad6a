"""Minimal precision: the smallest number of bits p at which a checker verifies a network, per format family.

A format family splits its p bits between range and precision: `float` into exponent and mantissa
(p = 1 + exponent + mantissa), `fixed` into integer and fraction (p = 1 + integer + fraction). More precision bits
need not help: rounding β down at fewer bits can land on a different side of a threshold than at more (at m = 5000
the composition construction fails at float:1,5 and holds at float:2,5; at m = 2^1000 the other way round). So the
default search assumes nothing: it tries every split of p = 3, 4, 5, ... bits and stops at the first p at which
some split verifies. p* is then the least p at which anything verifies, and the result lists every split tried
below it, each with its status and reason. Ties at p* go to fewer range bits (exponent, or integer bits). The
result keeps the checker's own verdict at p* (`PrecisionResult.verdict`; with certify, its `certificate`), so a
caller that needs the proof at p* need not run the checker again.

`search="bisect"` is the cheaper search for slow checkers: per range width it bisects for the smallest precision
width, which assumes that more precision bits never turn a verified network into a failing one; it then checks
every split of p* - 1 bits as well. Its result says so (`assumes_monotone`), and lists the monotonicity
violations its own trials show (`violations`: a split that verified beside one with more precision bits and the
same range that did not).

A checker is any function `(format, semantics) -> Result`; `network_checker` and `composition_checker` build the
usual ones (exhaustive or certify on a network, parametric certify of the composition construction);
`two_sum_checker` the 2-Sum construction's.

Every min-precision table -- `witness min-precision`, the hierarchy's p* rows, scripts/min_precision_table.py,
scripts/two_sum_min_precision_table.py, scripts/sparse_table.py, benchmarks/hybrid_constructions.py -- comes from
`table(cases)`: one `Row` (the `PrecisionResult` and the seconds it took) per `Case` (a checker, a family, a
semantics, a bit limit), in order, in this process or as the jobs of a `lab.sweep`. `cell` and `slope` are
how the committed tables print a result and its growth.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from verify import check
from verify.certify import Construction, certify
from verify.defaults import FAMILY_SPLITS, METHODS
from verify.result import Result, Status
from witness.arith.formats import Fixed, Float
from witness.arith.semantics import SEMANTICS, arithmetic
from witness.errors import OverflowInFormat, ParameterError, StandInOverflow
from witness.progress import bar
from witness.ir import Network
from witness.registry import compile as compile_network
from witness.tasks.composition import Composition
from witness.tasks.two_sum import TwoSum

if TYPE_CHECKING:
    from lab.sweep import Engine

Checker = Callable[[Any, str], Result]


@dataclass(frozen=True)
class Family:
    """How a format family splits its bits: `make(range_bits, precision_bits)`, and the widths its formats allow
    (witness.arith.formats: a Float has exponent 2..11 and mantissa 1..52; a Fixed has 1..52 bits after the sign)."""

    name: str
    range_field: str
    precision_field: str
    range_widths: range

    def make(self, range_bits: int, precision_bits: int):
        kwargs = {self.range_field: range_bits, self.precision_field: precision_bits}
        return (Float if self.name == "float" else Fixed)(**kwargs)

    def precision_widths(self, range_bits: int) -> range:
        if self.name == "float":
            return range(1, 53)
        return range(max(0, 1 - range_bits), 53 - range_bits)


FAMILIES = {name: Family(name, *split) for name, split in FAMILY_SPLITS.items()}  # float, fixed


@dataclass(frozen=True)
class Trial:
    """One run of the checker: the format, its p, the status it returned, and `note`: the checker's stated reason
    for not verifying (certify's `detail["reason"]`) or the overflow message."""

    format: str
    p: int
    status: str
    note: str = ""


SEARCHES = ("every-split", "bisect")


@dataclass(frozen=True)
class PrecisionResult:
    """`status` is verified when some format in the searched range verified; then `format`, `p` and `split` name
    the minimal one, `verdict` is the checker's VERIFIED Result there (for certify, with its certificate), and
    `below` lists the checker's status in every split of p - 1 bits the semantics can run (`unrunnable`: the
    splits it cannot). `trials` lists every check run, in order. `assumes_monotone` is true for the bisection
    search, whose answer rests on more precision bits never hurting below p* - 1; `violations` are the pairs
    (verified format, failing format with more precision and the same range) among the trials.

    Not a verdict of its own: the answer of a search over many checker verdicts, one per format."""

    status: Status
    family: str
    semantics: str
    format: str | None
    p: int | None
    split: dict[str, int]
    below: tuple[Trial, ...]
    unrunnable: tuple[str, ...]
    trials: tuple[Trial, ...]
    max_bits: int
    assumes_monotone: bool = False
    violations: tuple[tuple[str, str], ...] = ()
    verdict: Result | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ParameterError(f"family must be one of {sorted(FAMILIES)}, got {self.family!r}")
        if (self.status is Status.VERIFIED) != (self.p is not None):
            raise ParameterError("a verified precision result names its p, and only a verified one does")
        if (self.status is Status.VERIFIED) != (self.verdict is not None and self.verdict.status is Status.VERIFIED):
            raise ParameterError("a verified precision result carries the checker's verified Result at p*, and only "
                                 "a verified one does")

    @property
    def certificate(self) -> dict | None:
        """The certificate of p*'s format when the checker certifies (None otherwise, or when nothing verified)."""
        return None if self.verdict is None else self.verdict.detail.get("certificate")

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of `witness min-precision` and the hierarchy's rows. Without `verdict`: its certificate
        is a file's worth of JSON, written where a caller wants it (`witness certify --out`, the hierarchy's
        certificates/)."""
        out = {item.name: getattr(self, item.name) for item in fields(self) if item.name != "verdict"}
        out["status"] = self.status.value
        out["below"], out["trials"] = (tuple(asdict(trial) for trial in out[key]) for key in ("below", "trials"))
        out.update(out.pop("split"))  # mantissa/exponent or integer/fraction as top-level keys
        return out


def min_precision(checker: Checker, family: str, semantics: str, max_bits: int = 64,
                  search: str = "every-split") -> PrecisionResult:
    """The smallest p <= max_bits at which `checker` verifies in `family` ("float" or "fixed") under `semantics`
    (module docstring for the two searches).

    Only formats the semantics can run are tried (strict runs float formats with mantissa <= 24 and exponent
    <= 9, fp64, and fixed formats with integer + fraction <= 25: see witness.arith.semantics); the splits of
    p* - 1 bits it cannot run are listed in `unrunnable`.
    """
    if family not in FAMILIES:
        raise ParameterError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
    if semantics not in SEMANTICS:
        raise ParameterError(f"semantics must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    if isinstance(max_bits, bool) or not isinstance(max_bits, int) or max_bits < 2:
        raise ParameterError(f"max_bits must be an integer >= 2, got {max_bits!r}")
    if search not in SEARCHES:
        raise ParameterError(f"search must be one of {SEARCHES}, got {search!r}")
    spec = FAMILIES[family]
    trials: dict[tuple[int, int], Trial] = {}
    verified: dict[tuple[int, int], Result] = {}  # the checker's Result of each split that verified
    progress = bar(total=None, desc=f"min-precision ({family}, {semantics})", unit="format")

    def runnable(range_bits: int, precision_bits: int) -> bool:
        try:
            arithmetic(spec.make(range_bits, precision_bits), semantics)
        except ParameterError:
            return False
        return True

    def verifies(range_bits: int, precision_bits: int) -> bool:
        key = (range_bits, precision_bits)
        if key not in trials:
            fmt = spec.make(range_bits, precision_bits)
            progress.set_postfix_str(fmt.name, refresh=False)
            progress.update(1)
            try:
                result = checker(fmt, semantics)
                trials[key] = Trial(fmt.name, fmt.bits, result.status.value, str(result.detail.get("reason", "")))
                if result.status is Status.VERIFIED:
                    verified[key] = result
            except OverflowInFormat as exc:
                trials[key] = Trial(fmt.name, fmt.bits, Status.FALSIFIED.value, f"overflow: {exc}")
            except StandInOverflow as exc:  # a theory run that cannot stand in for the exact model decides nothing
                trials[key] = Trial(fmt.name, fmt.bits, Status.UNKNOWN.value, str(exc))
        return trials[key].status == Status.VERIFIED.value

    def splits(p: int) -> list[tuple[int, int]]:
        return [(r, p - 1 - r) for r in spec.range_widths if p - 1 - r in spec.precision_widths(r)]

    best: tuple[int, int] | None = None  # (range_bits, precision_bits)
    with progress:
        if search == "every-split":
            for p in range(2, max_bits + 1):
                found = [split for split in splits(p) if runnable(*split) and verifies(*split)]
                if found:
                    best = found[0]
                    break
        else:
            best = _bisect(spec, max_bits, runnable, verifies)
            while best is not None:
                lower = [split for split in splits(sum(best)) if runnable(*split) and verifies(*split)]
                if not lower:
                    break
                best = lower[0]

    violations = tuple((trials[a].format, trials[b].format) for a in trials for b in trials
                       if a[0] == b[0] and a[1] < b[1] and trials[a].status == "verified"
                       and trials[b].status != "verified")
    monotone = search == "bisect"
    if best is None:
        return PrecisionResult(Status.UNKNOWN, family, semantics, None, None, {}, (), (), tuple(trials.values()),
                               max_bits, monotone, violations)
    below = splits(sum(best))
    fmt = spec.make(*best)
    split = {spec.range_field: best[0], spec.precision_field: best[1]}
    return PrecisionResult(Status.VERIFIED, family, semantics, fmt.name, fmt.bits, split,
                           tuple(trials[key] for key in below if key in trials),
                           tuple(spec.make(*key).name for key in below if key not in trials),
                           tuple(trials.values()), max_bits, monotone, violations, verified[best])


def _bisect(spec: Family, max_bits: int, runnable, verifies) -> tuple[int, int] | None:
    """Per range width, the smallest precision width that verifies, by bisection (assuming monotonicity)."""
    best = None
    for range_bits in spec.range_widths:
        below_bits = max_bits + 1 if best is None else 1 + sum(best)
        widths = [q for q in spec.precision_widths(range_bits) if 1 + range_bits + q < below_bits
                  and runnable(range_bits, q)]
        if not widths or not verifies(range_bits, widths[-1]):
            continue
        low, high = 0, len(widths) - 1  # widths[high] verifies; find the first that does
        while low < high:
            middle = (low + high) // 2
            if verifies(range_bits, widths[middle]):
                high = middle
            else:
                low = middle + 1
        best = (range_bits, widths[high])
    return best


def network_checker(network: Network, method: str) -> Checker:
    """Check `network` by `method`: "exhaustive" (every input; small families only) or "certify"."""
    if method == "exhaustive":
        return lambda fmt, semantics: check.exhaustive(network, arithmetic(fmt, semantics))
    if method == "certify":
        return lambda fmt, semantics: certify(network, arithmetic(fmt, semantics))
    raise ParameterError(f"method must be one of {METHODS}, got {method!r}")


def two_sum_checker(n: int, M: int, t: int, causal: bool = False, method: str = "certify") -> Checker:
    """Check the 2-Sum construction for (n, M, t, causal) by "certify" (all inputs at
    any size it can materialise) or "exhaustive" (every one of the M^n inputs; small families only)."""
    if method == "exhaustive":
        TwoSum(n, M, t, causal).enumerate_tokens()  # refuses a family over the enumeration limit before compiling
    return network_checker(compile_network("two_sum", n=n, M=M, t=t, causal=causal), method)


def composition_checker(L: int, m: int, n=(), method: str = "certify") -> Checker:
    """Check the composition construction for (L, m, n): "certify" reasons parametrically (no tables are
    materialised, so m and n may be huge); "exhaustive" compiles the network and runs every input."""
    if method == "certify":
        return lambda fmt, semantics: certify(Construction(L, m, tuple(n)), arithmetic(fmt, semantics))
    if method == "exhaustive":
        Composition(L, m, tuple(n)).enumerate_tokens()  # refuses a family over the enumeration limit before compiling
    return network_checker(compile_network("composition", L=L, m=m, n=list(n)), method)


#: The (family, semantics) columns of the committed p* tables.
COLUMNS = (("float", "strict"), ("fixed", "strict"), ("float", "theory"), ("fixed", "theory"))


@dataclass(frozen=True)
class Case:
    """One cell of a min-precision table (docs/conventions.md §5): `min_precision(checker, family, semantics,
    max_bits)`."""

    checker: Checker
    family: str
    semantics: str
    max_bits: int = 64


@dataclass(frozen=True)
class Row:
    """What one `Case` gave: its `PrecisionResult` and the seconds the search took (kept beside the result, not in
    it, so that one case's results compare equal wherever and however fast it ran)."""

    result: PrecisionResult
    seconds: float


def _row(case: Case) -> Row:
    start = time.perf_counter()
    result = min_precision(case.checker, case.family, case.semantics, case.max_bits)
    return Row(result, time.perf_counter() - start)


def table(cases: Sequence[Case], engine: Engine | None = None) -> list[Row]:
    """A row per case, in the order of `cases`: one after another in this process, or with `engine` each case a
    job of a `lab.sweep` (the rows do not depend on where the jobs ran)."""
    if engine is None:
        return [_row(case) for case in cases]
    from lab.sweep import sweep  # dask: imported only where a sweep runs, not on every command line start

    return sweep(_row, cases, engine, progress="p* cells")


def cell(result: PrecisionResult | None) -> str:
    """A table cell: `p (format)`, `unknown` when nothing verified, empty for a case not run."""
    if result is None:
        return ""
    return "unknown" if result.p is None else f"{result.p} ({result.format})"


def slope(points: Sequence[tuple[float, int]]) -> float | None:
    """Least-squares slope of p* against log2 of a swept size (bits per doubling); None below two points."""
    if len(points) < 2:
        return None
    x, y = np.array(points, dtype=float).T
    return float(np.polyfit(x, y, 1)[0])
