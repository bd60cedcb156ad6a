"""One-release alias: `verify.hierarchy` moved to `experiments.hierarchy` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("verify.hierarchy moved to experiments.hierarchy; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import experiments.hierarchy as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
