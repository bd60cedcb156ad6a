"""Progress bars: one tqdm bar per long step, on stderr, with the work ahead as its total.

Bars are shown (for steps that last more than a second) whether or not stderr is a terminal, so that a log file or a pipe shows where a run is (tqdm
writes carriage returns there; `leave=False` erases each bar when its step ends, so no bar adds a line). The
command line's `--quiet` turns them off (`set_quiet(True)`); library callers may do the same.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from tqdm import tqdm

_quiet = False


def set_quiet(off: bool) -> None:
    global _quiet
    _quiet = bool(off)


def quiet() -> bool:
    return _quiet


def bar(iterable: Iterable | None = None, *, total: float | None = None, desc: str, unit: str) -> tqdm:
    """A bar counting `unit`s towards `total` (None: a running count), unless progress is off."""
    interactive = sys.stderr.isatty()
    # delay: a step shorter than a second draws nothing, so only the steps one waits for appear in a log.
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=_quiet, leave=False, file=sys.stderr,
                mininterval=0.1 if interactive else 2.0, delay=1.0, ascii=not interactive, dynamic_ncols=interactive)


__all__ = ["bar", "quiet", "set_quiet"]
