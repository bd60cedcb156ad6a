"""One-release alias: `verify.search.architectures` moved to `lab.architectures` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("verify.search.architectures moved to lab.architectures; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import lab.architectures as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
