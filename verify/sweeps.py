"""Checks of large families split into independent jobs of a `witness.sweep`.

`exhaustive(network, arith, engine, chunks)` is `verify.check.exhaustive` cut into chunks of consecutive input
batches, each checked by its own job (in-process, on a local cluster, or on an existing dask scheduler), and
merged so that the Result is the serial one: the inputs are taken in the same enumeration order, the first wrong
input is the counterexample, and an input whose run overflows ends the check there (the chunks after it are
discarded, as the serial check never reaches them).
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from verify import check
from verify.result import Result, Status
from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.ir import Network
from witness.sweep import Engine, sweep

#: Default number of chunks: enough to keep a few workers busy, few enough that each job does real work.
DEFAULT_CHUNKS = 16


def _chunk(job: tuple[Network, Arithmetic, int, int, int, int]) -> Result:
    """Batches [first, stop) of `size` inputs of the family's enumeration, checked as `verify.check.exhaustive`
    checks them."""
    network, arith, size, first, stop, limit = job
    batches = islice(network.task.enumerate_tokens(size, limit), first, stop)
    return check.check_batches(network, batches, arith, "exhaustive", complete=True)


def exhaustive(network: Network, arith: Arithmetic, engine: Engine = Engine(), chunks: int = DEFAULT_CHUNKS,
               limit: int = 10**7) -> Result:
    """Every input of the network's task family, in `chunks` jobs on `engine`; the same Result as
    `verify.check.exhaustive(network, arith, limit)` (plus `detail["chunks"]`)."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ParameterError(f"chunks must be a positive integer, got {chunks!r}")
    task = check.task_of(network)
    count = task.count()
    next(iter(task.enumerate_tokens(1, limit)))  # refuses a family over the limit, with the task's own message
    size = min(check.batch_size(network), -(-count // chunks))  # small enough that every chunk gets a batch
    batches = -(-count // size)
    edges = [batches * i // chunks for i in range(chunks + 1)]
    jobs = [(network, arith, size, first, stop, limit) for first, stop in zip(edges, edges[1:]) if stop > first]
    checked = failures = 0
    counterexample = None
    detail: dict[str, Any] = {"chunks": len(jobs)}
    for part in sweep(_chunk, jobs, engine):
        checked += part.checked
        failures += part.failures
        counterexample = counterexample or part.counterexample
        if "stopped_by_overflow" in part.detail:
            detail["stopped_by_overflow"] = part.detail["stopped_by_overflow"]
            break
    status = Status.FALSIFIED if failures else Status.VERIFIED
    return Result(status, "exhaustive", arith.describe(), checked, failures, counterexample,
                  check.rests_on(arith, detail))
