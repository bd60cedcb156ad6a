"""The training rules that `lab.train`, `witness train` and `witness capacity` share, kept free of torch so that a
curve's specification can be checked before anything trains: what a learning rate may be (`check_rate`), how long
each trial of a learning-rate sweep trains (`sweep_steps`) and which devices a run may name (`check_device_name`;
whether the machine has one is `lab.step.training_device`'s to say)."""

from __future__ import annotations

import math
from typing import Any

from witness.errors import ParameterError

#: A sweep's trial trains this fraction of the run it chooses the rate for: long enough to show which rate trains,
#: at a quarter of a run's cost per rate.
SWEEP_FRACTION = 4
#: Where a run's torch module trains: the CPU (the default), or torch's current CUDA device.
DEVICES = ("cpu", "cuda")


def check_rate(name: str, rate: Any) -> float:
    """`rate` as a float learning rate, else a ParameterError naming the field and the value. A bool is refused
    although Python counts it an int: `True` would silently train at rate 1."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (rate > 0 and math.isfinite(rate)):
        raise ParameterError(f"{name}: a learning rate must be a positive finite number, got {rate!r}")
    return float(rate)


def sweep_steps(steps: int) -> int:
    """The steps each rate of a learning-rate sweep trains before a run of `steps` steps (at least one)."""
    return max(1, steps // SWEEP_FRACTION)


def check_device_name(device: Any) -> str:
    """`device` if it is one of DEVICES, else a ParameterError naming them."""
    if device not in DEVICES:
        raise ParameterError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    return device


__all__ = ["check_rate", "sweep_steps", "check_device_name", "SWEEP_FRACTION", "DEVICES"]
