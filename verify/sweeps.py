"""One-release alias: `verify.sweeps.exhaustive` is now `verify.check.exhaustive(network, arith, engine=engine,
chunks=chunks)` (docs/layout.md). Call that instead; this module goes in the next release."""

import warnings

warnings.warn("verify.sweeps.exhaustive moved to verify.check.exhaustive(..., engine=, chunks=); the alias goes in the "
              "next release", DeprecationWarning, stacklevel=2)
import lab.sweep as _sweep  # noqa: E402
import verify.check as _moved  # noqa: E402


def exhaustive(network, arith, engine=None, chunks=_moved.DEFAULT_CHUNKS, limit=10**7):
    """`verify.check.exhaustive` on `engine` (default: in-process) in `chunks` jobs, as this function did."""
    return _moved.exhaustive(network, arith, limit, engine=_sweep.Engine() if engine is None else engine,
                             chunks=chunks)
