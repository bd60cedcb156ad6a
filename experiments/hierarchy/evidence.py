"""What a row of `witness hierarchy` is worth: its category, and the trained controls that decide it.

Only PROVEN is a statement about every input. A trained probe is EVIDENCE only where the trained control of its
depth -- L + 1 full layers at the same budget, format and training protocol -- learned the task: otherwise a
failure may be training's, not the architecture's, and the row is NO_EVIDENCE. A trained probe of an architecture
that cannot express the task (`lab.architectures.cannot_express`) is CANNOT_EXPRESS, whatever its control did: its
failures are forced, so they say nothing about training. UNTRAINED rows (random or hand-set weights) say nothing
about what the architecture can do. Unknown and not-available rows have no category.
"""

from __future__ import annotations

from dataclasses import replace

import experiments.hierarchy.words as words
from experiments.hierarchy.rows import CERTIFIED, NOT_AVAILABLE, UNKNOWN, OutcomeRow, ProbeRow

#: A trained control "learned" when at most this fraction of the inputs its search ran failed.
CONTROL_FAILING = 0.02

PROVEN = "proven"
EVIDENCE = "evidence"
NO_EVIDENCE = "no evidence"
UNTRAINED = "untrained weights"
CONTROL = "trained control"
CANNOT_EXPRESS = "cannot express the task"
#: Every category, in the order the report's legends list them.
CATEGORIES = (PROVEN, EVIDENCE, NO_EVIDENCE, CANNOT_EXPRESS, CONTROL, UNTRAINED)


def category(status: str | None, weights: str | None = None, control: bool = False,
             control_learned: bool | None = None, expressive: bool | None = None) -> str | None:
    """The category of a row with this status (and, for a probe, these weights, control flag, verdict and
    expressiveness: False where the architecture cannot express the task, None where that is not known)."""
    if status == CERTIFIED:
        return PROVEN
    if status in (UNKNOWN, NOT_AVAILABLE):
        return None
    if control:
        return CONTROL
    if weights in ("random", "natural"):
        return UNTRAINED
    if weights == "trained" and expressive is False:
        return CANNOT_EXPRESS
    if weights == "trained":
        return EVIDENCE if control_learned is True else NO_EVIDENCE
    return None


def category_of(row: OutcomeRow) -> str | None:
    if isinstance(row, ProbeRow):
        return category(row.status, row.weights, row.control, row.control_learned, row.expressive)
    return category(row.status)


def judge_against_controls(rows: list[OutcomeRow]) -> list[OutcomeRow]:
    """Each trained probe row judged against the trained control of its depth: counted as evidence only where the
    control learned (at most CONTROL_FAILING of its inputs failed); the row's evidence says which, in words. Rows
    without a depth (2-Sum) have no control, and rows of an architecture that cannot express the task need none:
    they are left as they are."""
    controls = {row.L: row for row in rows if isinstance(row, ProbeRow) and row.control}
    judged: list[OutcomeRow] = []
    for row in rows:
        if (not isinstance(row, ProbeRow) or row.control or row.weights != "trained" or row.L is None
                or row.expressive is False):
            judged.append(row)
            continue
        control = controls.get(row.L)
        if control is None:
            judged.append(replace(row, evidence=f"{row.evidence}; {words.NO_CONTROL}"))
            continue
        learned = control.failing / max(1, control.tried) <= CONTROL_FAILING
        judged.append(replace(row, control_learned=learned,
                              evidence=f"{row.evidence}; {words.control_verdict(control, learned)}"))
    return judged
