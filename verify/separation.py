"""One-release alias: `verify.separation` moved to `experiments.separation` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("verify.separation moved to experiments.separation; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import experiments.separation as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
