"""One-release alias: `witness.sweep` moved to `lab.sweep` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("witness.sweep moved to lab.sweep; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import lab.sweep as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
