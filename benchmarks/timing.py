"""The one timer every benchmark uses: the fastest of several runs, since other jobs on a machine only add time."""

from __future__ import annotations

import time
from typing import Any, Callable


def best_time(action: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Seconds of the fastest of `repeats` calls of `action`, and what the last call returned."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - start)
    return best, result
