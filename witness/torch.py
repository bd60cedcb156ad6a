"""One-release alias: `witness.torch` moved to `lab.torch` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("witness.torch moved to lab.torch; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import lab.torch as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
