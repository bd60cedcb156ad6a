"""witness: compile expressiveness proofs into explicit transformer weights, and check them exactly.

    >>> import witness
    >>> net = witness.compile("composition", L=2, m=2, n=[2])
    >>> task = net.task
    >>> tokens = task.random_tokens(seed=0, count=1)[0]
    >>> net.run(tokens) == task.answers(tokens)[0]
    True
"""

from witness.errors import (FileFormatError, InputError, OverflowInFormat, ParameterError, StandInOverflow,
                            WitnessError)
from witness.io import load
from witness.ir import Network
from witness.budget import rounded_weights_report
from witness.registry import compile, construction_names
from witness.tasks import Composition, TwoSum

__all__ = ["compile", "construction_names", "load", "Network", "rounded_weights_report", "Composition", "TwoSum",
           "WitnessError", "ParameterError", "InputError", "FileFormatError", "OverflowInFormat",
           "StandInOverflow"]
