"""Progress bars: one tqdm bar per long step, on stderr, with the work ahead as its total.

Bars are shown (for steps that last more than a second) whether or not stderr is a terminal, so that a log file or a pipe shows where a run is (tqdm
writes carriage returns there; `leave=False` erases each bar when its step ends, so no bar adds a line). The
command line's `--quiet` turns them off (`set_quiet(True)`); library callers may do the same.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tqdm is imported where a bar is made: a command that draws none starts without it
    from tqdm import tqdm

_quiet = False


def set_quiet(off: bool) -> None:
    global _quiet
    _quiet = bool(off)


def quiet() -> bool:
    return _quiet


def bar(iterable: Iterable | None = None, *, total: float | None = None, desc: str, unit: str) -> tqdm:
    """A bar counting `unit`s towards `total` (None: a running count), unless progress is off."""
    from tqdm import tqdm

    interactive = sys.stderr.isatty()
    # delay: a step shorter than a second draws nothing, so only the steps one waits for appear in a log.
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=_quiet, leave=False, file=sys.stderr,
                mininterval=0.1 if interactive else 2.0, delay=1.0, ascii=not interactive, dynamic_ncols=interactive)


#: How often a `RunBar` writes to a log file (stderr not a terminal) while nothing finishes.
LOG_SECONDS = 10.0


class RunBar:
    """One bar for a whole run of many jobs: its total is the estimated seconds of every job still ahead, in every
    stage, so its ETA covers the stages to come; while a job runs it earns up to 90% of its estimate by the clock,
    so a long job moves the bar too, and the postfix names the jobs running now. `refresh()` redraws (a sweep calls
    it about once a second), so nothing is silent for long, even in a log file."""

    def __init__(self, costs: dict[str, float], desc: str, workers: int = 1):
        self.costs = dict(costs)
        self.workers = workers
        self.began = time.monotonic()
        self.done: set[str] = set()
        self.running: dict[str, float] = {}
        self.interactive = sys.stderr.isatty()
        self.drawn = 0.0
        from tqdm import tqdm

        self.bar = tqdm(total=round(sum(self.costs.values()), 1), desc=desc, disable=_quiet, file=sys.stderr,
                        leave=True, mininterval=0.5, ascii=not self.interactive,
                        bar_format="{desc}: {percentage:3.0f}%|{bar:20}| {elapsed} elapsed{postfix}")

    def add(self, name: str, cost: float) -> None:
        """A job not in the first estimate (its cost joins the total)."""
        if name not in self.costs:
            self.costs[name] = cost
            self.bar.total = round(sum(self.costs.values()), 1)

    def started(self, name: str) -> None:
        self.running.setdefault(name, time.monotonic())

    def finished(self, name: str) -> None:
        self.running.pop(name, None)
        self.done.add(name)
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        """Redraw: on a terminal every call, in a log file at most every LOG_SECONDS unless `force`."""
        now = time.monotonic()
        if not (force or self.interactive or now - self.drawn >= LOG_SECONDS):
            return
        self.drawn = now
        earned = sum(self.costs.get(name, 0.0) for name in self.done) + sum(
            min(now - start, 0.9 * self.costs.get(name, 0.0)) for name, start in self.running.items())
        self.bar.n = round(min(earned, self.bar.total), 1)
        running = list(self.running)
        shown = ", ".join(running[:3]) + (f" and {len(running) - 3} more" if len(running) > 3 else "")
        eta = self.bar.format_interval(self.seconds_left(earned, now))
        self.bar.set_postfix_str(f"about {eta} left" + (f"; running: {shown}" if shown else ""), refresh=False)
        self.bar.refresh()

    def seconds_left(self, earned: float, now: float) -> float:
        """The estimated work left over the workers' pace: the estimates' own pace at first, then (after a minute)
        the pace this run has shown, within a factor of four of it."""
        elapsed = now - self.began
        pace = self.workers
        if elapsed > 60 and earned > 0:
            pace = min(max(earned / elapsed, self.workers / 4), self.workers * 4)
        return max(self.bar.total - earned, 0.0) / pace

    def write(self, line: str) -> None:
        """A line above the bar (e.g. a stage that finished)."""
        if not self.bar.disable:
            self.bar.write(line, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()


__all__ = ["bar", "quiet", "set_quiet", "RunBar"]
