"""One-release alias: `witness.plots` moved to `lab.plots` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("witness.plots moved to lab.plots; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import lab.plots as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
