"""lab.sweep: jobs through dask.distributed give the plain loop's results, in job order, on any engine."""

from __future__ import annotations

import pytest
from distributed import LocalCluster

from experiments.hierarchy import run_job
from witness.arith import parse_format
from cli.main import main
from witness.errors import ParameterError
from lab.sweep import Engine, sweep


def precision_jobs() -> list[dict]:
    # Minimal precision of the construction at several sizes and both semantics: deterministic, real work, and of
    # uneven cost, so on two workers they finish out of order.
    return [{"kind": "precision", "L": L, "m": m, "family": "float", "semantics": semantics}
            for semantics in ("theory", "strict") for L, m in ((1, 64), (2, 2), (1, 4), (2, 4))]


def test_local_cluster_of_two_workers_equals_the_plain_loop():
    jobs = precision_jobs()
    serial = [run_job(job) for job in jobs]
    assert sweep(run_job, jobs, Engine(workers=2)) == serial
    assert sweep(run_job, jobs) == serial  # the in-process default
    assert {row.p for row in serial} != {None}  # the jobs computed something


def test_jobs_in_worker_processes_draw_no_bars_of_their_own(monkeypatch):
    """The sweep's bar stands for its jobs: in a worker process a job's own bars (a trainer's, say) are off, whatever
    the caller's --quiet; in-process the caller's setting holds."""
    from witness import progress

    monkeypatch.setattr(progress, "_quiet", False)  # bars on, as a command without --quiet has them
    assert sweep(lambda job: progress.quiet(), [0, 1], Engine(workers=1)) == [True, True]
    assert sweep(lambda job: progress.quiet(), [0]) == [False]


def test_an_existing_scheduler_runs_the_sweep():
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        jobs = precision_jobs()[:3]
        assert sweep(run_job, jobs, Engine(scheduler=cluster.scheduler_address)) == [run_job(job) for job in jobs]


def test_results_come_back_in_job_order():
    formats = ["fp64", "float:3,4", "fp16", "fixed:4,8", "bf16"]
    assert [fmt.name for fmt in sweep(parse_format, formats)] == [parse_format(f).name for f in formats]
    assert sweep(parse_format, []) == []


def test_a_failing_job_raises_its_own_error():
    with pytest.raises(ParameterError):
        sweep(parse_format, ["fp16", "not-a-format"])


@pytest.mark.parametrize("kwargs", [{"workers": 0}, {"workers": True}, {"scheduler": " "},
                                    {"workers": 2, "scheduler": "tcp://127.0.0.1:8786"}])
def test_engine_rejects_bad_settings(kwargs):
    with pytest.raises(ParameterError):
        Engine(**kwargs)


def test_engine_describes_itself():
    assert Engine().describe() == "in-process"
    assert Engine(workers=2).describe() == "local cluster, 2 worker processes"
    assert Engine(scheduler="tcp://h:1").describe() == "scheduler tcp://h:1"


def test_cli_refuses_workers_and_scheduler_together(capsys, tmp_path):
    code = main(["hierarchy", "--out", str(tmp_path), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("witness: error:")
