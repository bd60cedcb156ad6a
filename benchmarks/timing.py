"""The one timer every benchmark uses: the fastest of several runs, since other jobs on a machine only add time."""

from __future__ import annotations

import time
from typing import Any, Callable


def best_time(action: Callable[[], Any], repeats: int,
              clock: Callable[[], float] = time.perf_counter) -> tuple[float, Any]:
    """Seconds of the fastest of `repeats` calls of `action` (wall time, or `clock`: time.process_time counts only
    this process's CPU time), and what the last call returned."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = clock()
        result = action()
        best = min(best, clock() - start)
    return best, result
