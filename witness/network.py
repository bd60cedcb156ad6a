"""What is done with a whole network, above the IR and the core that runs it: its task, a float64 run, its budget,
saving it, and which of its weights a format rounds.

`witness.ir.Network` is data only (it imports nothing above it); the four conveniences below are its methods
`net.task`, `net.run(tokens)`, `net.budget(bits)` and `net.save(path)`, attached to the class here. `witness`
imports this module before anything else of it, so every Network has them, however it was built (a
construction, `witness.load`, `witness.torch.from_module`, `with_arrays`, the trainer, by hand).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from witness.arith import Format, parse_format
from witness.budget import Budget, budget
from witness.execute import run
from witness.io import save
from witness.ir import Network
from witness.tasks import task_from_params


def network_task(network: Network):
    """The task object named in the metadata, or None for a network that claims no task."""
    meta = network.meta
    return None if meta.task is None else task_from_params(meta.task, meta.params)


def run_tokens(network: Network, tokens: Any):
    """Float64 forward pass of one token sequence (or a batch): the predicted token id(s); -1 marks a tie.

    For a network that reads the last position this is one int per sequence; for one that reads every position,
    a list per sequence."""
    batch = np.asarray(tokens)
    predictions = run(network, batch).predictions
    single = batch.ndim == 1
    if network.readout.read == "last":
        values = [int(row[0]) for row in predictions]
    else:
        values = [[int(v) for v in row] for row in predictions]
    return values[0] if single else values


def network_budget(network: Network, bits: int = 64) -> Budget:
    """The budget (docs/conventions.md §2) of `network` run at a `bits`-bit number format."""
    return budget(network, bits)


def save_network(network: Network, path: str | Path) -> None:
    """Write `network` to a weights file (`witness.io.save`)."""
    save(network, path)


def rounded_weights_report(network: Network, fmt: Format | str) -> dict[str, int]:
    """For each array that rounding to `fmt` changes: how many of its entries change (±inf counts as a change).

    An empty dict means every weight is exact in the format. A fixed-format overflow raises, naming the array.
    """
    fmt = parse_format(fmt) if isinstance(fmt, str) else fmt
    changed = {}
    for name, array in network.state_dict().items():
        count = int(np.count_nonzero(fmt.round(array, f"weights {name}") != array))
        if count:
            changed[name] = count
    return changed


Network.task = property(network_task)
Network.run = run_tokens
Network.budget = network_budget
Network.save = save_network

__all__ = ["network_task", "run_tokens", "network_budget", "save_network", "rounded_weights_report"]
