"""Checking a network against its task by running it: on every input (exhaustive) or on seeded samples.

Only `exhaustive` can return VERIFIED; a sample that finds no failure is UNKNOWN, with the count checked.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from tqdm import tqdm

from verify.result import Counterexample, Result, Status
from witness.arith import FLOAT64, Arithmetic
from witness.errors import ParameterError
from witness.execute import run
from witness.ir import Network

#: Inputs per executor call: keeps (batch x prompt x d_model) floats near this many.
BATCH_ELEMENTS = 1 << 22


def _task(network: Network):
    task = network.task
    if task is None:
        raise ParameterError("the network names no task, so there is nothing to check it against")
    return task


def batch_size(network: Network) -> int:
    return max(1, BATCH_ELEMENTS // (network.n_ctx * network.d_model))


def check_batches(network: Network, batches: Iterable[np.ndarray], arith: Arithmetic, method: str,
                  complete: bool, total: int | None = None, detail: dict | None = None) -> Result:
    """Run every batch; the first wrong input becomes the counterexample. `complete`: the batches are all inputs."""
    task = _task(network)
    checked = failures = 0
    counterexample = None
    with tqdm(total=total, desc=method, unit="input", disable=None, leave=False) as progress:
        for batch in batches:
            expected = task.answers(batch).reshape(batch.shape[0], -1)
            predicted = run(network, batch, arith).predictions
            wrong = ~(predicted == expected).all(axis=1)
            if wrong.any() and counterexample is None:
                row = int(np.argmax(wrong))
                counterexample = counterexample_for(network, batch[row], arith)
            checked += batch.shape[0]
            failures += int(wrong.sum())
            progress.update(batch.shape[0])
    if failures:
        status = Status.FALSIFIED
    else:
        status = Status.VERIFIED if complete else Status.UNKNOWN
    return Result(status, method, arith.describe(), checked, failures, counterexample, detail or {})


def counterexample_for(network: Network, tokens: np.ndarray, arith: Arithmetic) -> Counterexample:
    """Re-run one input with a trace; the trace keeps each layer's residual stream at the read positions."""
    task = _task(network)
    outputs = run(network, tokens, arith, trace=True)
    read = list(outputs.read_positions)
    trace = {name: value[0][read].tolist() for name, value in outputs.trace.items() if "resid" in name}
    expected = task.answers(tokens)[0].tolist()
    output = outputs.predictions[0].tolist()
    if network.readout.read == "last":
        expected, output = expected[0], output[0]
    return Counterexample([int(t) for t in tokens], expected, output, trace)


def sampled(network: Network, count: int, seed: int, arith: Arithmetic = FLOAT64) -> Result:
    """`count` seeded random inputs. UNKNOWN when none fails: a sample is not a proof."""
    task = _task(network)
    size = batch_size(network)
    rng = np.random.default_rng(seed)
    batches = (task.random_tokens(rng, min(size, count - start)) for start in range(0, count, size))
    return check_batches(network, batches, arith, "sampled", complete=False, total=count, detail={"seed": seed})


def exhaustive(network: Network, arith: Arithmetic = FLOAT64, limit: int = 10**7) -> Result:
    """Every input of the network's task family (refused above `limit` inputs)."""
    task = _task(network)
    batches = task.enumerate_tokens(batch_size(network), limit)
    return check_batches(network, batches, arith, "exhaustive", complete=True, total=task.count())
