"""One-release alias: `verify.capacity` moved to `experiments.capacity` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("verify.capacity moved to experiments.capacity; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import experiments.capacity as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
