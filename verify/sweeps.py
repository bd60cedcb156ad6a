"""Checks of large families split into independent jobs of a `lab.sweep`.

`exhaustive(network, arith, engine, chunks)` is `verify.check.exhaustive` cut into chunks of consecutive input
batches, each run by the verifier's own loop (`verify.check.check_batches`) as its own job (in-process, on a local
cluster, or on an existing dask scheduler), and the chunks' tallies joined into the serial run's: the inputs are
taken in the same enumeration order, the first wrong input is the counterexample, and an input whose run
overflows ends the check there (the chunks after it are discarded, as the serial check never reaches them).
"""

from __future__ import annotations

from itertools import islice

from verify import check
from verify.result import Result
from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.ir import Network
from lab.sweep import Engine, sweep

#: Default number of chunks: enough to keep a few workers busy, few enough that each job does real work.
DEFAULT_CHUNKS = 16


def _chunk(job: tuple[Network, Arithmetic, int, int, int, int]) -> check.Tally:
    """Batches [first, stop) of `size` inputs of the family's enumeration, run as `verify.check.exhaustive` runs
    them."""
    network, arith, size, first, stop, limit = job
    batches = islice(network.task.enumerate_tokens(size, limit), first, stop)
    return check.check_batches(network, batches, arith, "exhaustive", complete=True)


def _joined(parts: list[check.Tally], arith: Arithmetic, settings: dict) -> check.Tally:
    """Consecutive chunks of one enumeration as the serial run: counts summed up to and including the first chunk
    that stopped at an overflow, the first chunk's counterexample."""
    checked = failures = 0
    seconds = 0.0
    counterexample = stopped = None
    for part in parts:
        checked, failures, seconds = checked + part.checked, failures + part.failures, seconds + part.seconds
        counterexample = counterexample or part.counterexample
        stopped = part.stopped_by_overflow
        if stopped is not None:
            break
    return check.Tally("exhaustive", arith, True, checked, failures, counterexample, (), stopped, settings, seconds)


def exhaustive(network: Network, arith: Arithmetic, engine: Engine = Engine(), chunks: int = DEFAULT_CHUNKS,
               limit: int = 10**7) -> Result:
    """Every input of the network's task family, in `chunks` jobs on `engine`; the same Result as
    `verify.check.exhaustive(network, arith, limit)` (plus `detail["chunks"]`; an overflow's message in
    `detail["stopped_by_overflow"]` locates the value in its chunk's batch)."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ParameterError(f"chunks must be a positive integer, got {chunks!r}")
    task = check.task_of(network)
    count = task.count()
    next(iter(task.enumerate_tokens(1, limit)))  # refuses a family over the limit, with the task's own message
    size = min(check.batch_size(network), -(-count // chunks))  # small enough that every chunk gets a batch
    batches = -(-count // size)
    edges = [batches * i // chunks for i in range(chunks + 1)]
    jobs = [(network, arith, size, first, stop, limit) for first, stop in zip(edges, edges[1:]) if stop > first]
    return _joined(sweep(_chunk, jobs, engine), arith, {"chunks": len(jobs)}).result()
