"""Sweeps: independent, seeded jobs run through dask.distributed, results returned in job order.

A sweep is `function(job)` for every job of a list. Each job carries everything it depends on (its parameters and
its seed), so the result of a job does not depend on where or when it runs, and `sweep` returns the results in
the order of `jobs`: the same list a plain loop `[function(job) for job in jobs]` gives, on one thread or a
cluster. Where the jobs run is an `Engine`:

* `Engine()` -- in-process: a dask.distributed client whose one worker is a thread of this process (no process
  start-up, nothing to serialise to disk); the default of every command;
* `Engine(workers=N)` -- a `LocalCluster` of N worker processes with one thread each (`--workers N`);
* `Engine(scheduler="tcp://host:8786")` -- an existing cluster's scheduler (`--scheduler ADDRESS`); its workers
  must have witness installed. A job's result travels back to this process; a job that writes files writes them
  on its worker's machine, so give it a folder every worker shares (as `witness hierarchy --scheduler` asks).

dask moves functions, jobs and results between processes with (cloud)pickle; that is transport inside one
sweep, never a file format.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from distributed import Client, as_completed, get_worker

from witness.errors import ParameterError
from witness.progress import RunBar, bar, set_quiet

Job = TypeVar("Job")
#: How long to wait for an existing scheduler to answer before giving up.
CONNECT_TIMEOUT = "10s"
#: How often a tracked sweep looks for finished jobs and redraws its bar.
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Engine:
    """Where a sweep runs: in-process (neither field set), `workers` local processes, or an existing `scheduler`."""

    workers: int | None = None
    scheduler: str | None = None

    def __post_init__(self) -> None:
        if self.workers is not None and self.scheduler is not None:
            raise ParameterError("give at most one of workers (a local cluster) and scheduler (an existing one)")
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise ParameterError(f"workers must be a positive integer, got {self.workers!r}")
        if self.scheduler is not None and (not isinstance(self.scheduler, str) or not self.scheduler.strip()):
            raise ParameterError(f"scheduler must be an address such as tcp://host:8786, got {self.scheduler!r}")

    def describe(self) -> str:
        if self.scheduler is not None:
            return f"scheduler {self.scheduler}"
        if self.workers is not None:
            return f"local cluster, {self.workers} worker process{'es' if self.workers > 1 else ''}"
        return "in-process"

    def client(self) -> Client:
        """A client for this engine; closing it also closes the local cluster it started, if any."""
        if self.scheduler is not None:
            try:
                return Client(self.scheduler, timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                raise ParameterError(f"cannot reach the dask scheduler at {self.scheduler} ({exc})") from None
        processes = self.workers is not None
        # dashboard on any free port: never a clash; only errors of the cluster's own logs reach the terminal (a
        # worker slow to stop at the end is dask's housekeeping, not the user's business)
        return Client(processes=processes, n_workers=self.workers or 1, threads_per_worker=1,
                      dashboard_address=":0", silence_logs=logging.ERROR)


def sweep(function: Callable[[Job], Any], jobs: Sequence[Job], engine: Engine = Engine(), *,
          progress: str | None = None, run_bar: RunBar | None = None, names: Sequence[str] | None = None
          ) -> list[Any]:
    """`[function(job) for job in jobs]`, computed on `engine`. `function` must be importable by the workers (a
    module-level function). A job that raises re-raises here, as the same exception. `progress` labels a bar over
    finished jobs (`witness.progress.bar`); or `run_bar`, a whole run's bar, learns when each job (named by `names`)
    starts and finishes and is redrawn about once a second."""
    jobs = list(jobs)
    if not jobs:
        return []
    names = list(names or map(str, range(len(jobs))))
    job = _Job(function, own_process=engine.workers is not None or engine.scheduler is not None)
    client = engine.client()
    try:
        if run_bar is None:
            futures = client.map(job, list(zip(names, jobs)), pure=False)
            index = {future.key: position for position, future in enumerate(futures)}
            results: list[Any] = [None] * len(jobs)
            with bar(total=len(jobs), desc=progress or "jobs", unit="job") as finished:
                for future in as_completed(futures):
                    results[index[future.key]] = future.result()  # re-raises the job's exception
                    finished.update(1)
            return results
        return _tracked(client, job, jobs, run_bar, names)
    finally:
        client.close()


def close_local_clusters() -> None:
    """Close the local clusters a stopped sweep leaves behind, now. An interrupt can land while a cluster is still
    starting, before any client owns it; dask would then try to close it at exit and print a traceback for a
    cluster that never finished starting. Called by the command line after an interrupt, so that it ends in one
    line."""
    import atexit

    from distributed.deploy import spec

    for cluster in list(spec.SpecCluster._instances):
        try:
            cluster.close(timeout=10)
        except Exception:  # a cluster that never started has nothing to close; its processes end with ours
            pass
    atexit.unregister(spec.close_clusters)


#: The dask event topic on which a tracked job says that it started.
STARTED = "witness-sweep-started"


class _Job:
    """`function` as a worker runs it: it announces that job `name` started (a dask event a tracked sweep's client
    subscribes to) and, in a worker process of its own, draws no progress bars: the sweep's bar stands for its jobs,
    and the bars of several processes would interleave on one stderr (and ignore the caller's --quiet)."""

    def __init__(self, function: Callable[[Job], Any], own_process: bool):
        self.function = function
        self.own_process = own_process

    def __call__(self, named: tuple[str, Job]) -> Any:
        name, job = named
        if self.own_process:
            set_quiet(True)
        try:
            get_worker().log_event(STARTED, name)
        except ValueError:  # not on a worker (a plain call): nothing to announce to
            pass
        return self.function(job)


def _tracked(client: Client, job: _Job, jobs: list, run_bar: RunBar, names: list[str]) -> list[Any]:
    client.subscribe_topic(STARTED, lambda event: run_bar.started(event[1]))
    try:
        futures = client.map(job, list(zip(names, jobs)), pure=False)
        results: list[Any] = [None] * len(jobs)
        pending = dict(enumerate(futures))
        while pending:
            for position in [position for position, future in pending.items() if future.done()]:
                results[position] = pending.pop(position).result()  # re-raises the job's exception
                run_bar.finished(names[position])
            run_bar.refresh()
            if pending:
                time.sleep(POLL_SECONDS)
        return results
    finally:
        client.unsubscribe_topic(STARTED)
