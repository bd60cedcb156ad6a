"""One-release alias: `witness.cli` moved to `cli.main` (docs/layout.md). Import that instead; this module goes in
the next release."""

import warnings

warnings.warn("witness.cli moved to cli.main; the alias goes in the next release", DeprecationWarning, stacklevel=2)
import cli.main as _moved  # noqa: E402


def __getattr__(name):
    return getattr(_moved, name)
