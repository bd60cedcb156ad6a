"""The few exceptions witness raises on bad input.

Every error a user can provoke is a `WitnessError`; the CLI prints its message as one line and exits with
status 2. Anything else escaping is a bug in witness, not in the input.
"""


class WitnessError(Exception):
    """Base class: a problem with what the user asked for, reported in one line."""


class ParameterError(WitnessError, ValueError):
    """Task or construction parameters outside their documented range."""


class InputError(WitnessError, ValueError):
    """Tokens or instances that do not fit the task or the network."""


class FileFormatError(WitnessError, ValueError):
    """A weights file that is truncated, malformed or inconsistent with its own header."""


class OverflowInFormat(WitnessError, ArithmeticError):
    """A fixed-point value left the representable range; the message names the operation and position."""


class StandInOverflow(WitnessError, ArithmeticError):
    """Under `theory` a float64 step inside a block left the finite numbers from finite operands: the exact model's
    value there is finite, so the run cannot stand in for it (the CLI reports such a run as unknown, status 3)."""


class TrainingDiverged(ParameterError):
    """Training left the finite numbers (a loss or weight became inf or NaN); the message names the layers' mixers,
    the step, the seed and the learning rate, so the run can be retried with a smaller `lr`."""
