"""One-release alias: `verify.search.margin` moved to `verify.check` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("verify.search.margin moved to verify.check; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import verify.check as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
