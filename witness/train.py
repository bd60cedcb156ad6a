"""One-release alias: `witness.train` moved to `lab.train` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("witness.train moved to lab.train; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import lab.train as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
