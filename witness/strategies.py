"""One-release alias: `witness.strategies` moved to `lab.strategies` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("witness.strategies moved to lab.strategies; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import lab.strategies as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
