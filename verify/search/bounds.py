"""One-release alias: `verify.search.bounds` moved to `verify.theorems` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("verify.search.bounds moved to verify.theorems; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import verify.theorems as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
