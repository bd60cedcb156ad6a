"""The defaults and choices the command line shows before any work runs, each defined once, here.

`witness --help` and the argument parser read them without importing what uses them (hypothesis, sympy, numba,
numpy: tests/cli/test_startup.py), so this module imports nothing; the modules that use them import them from here
(`verify.check.DEFAULT_MAX_EXAMPLES`, `verify.precision.FAMILIES` and `METHODS`, `verify.search.probes.SAMPLES`
and `PAIR_PREFIXES` are these values).
"""

from __future__ import annotations

#: Inputs a Hypothesis search generates unless told otherwise (`verify.check.hypothesis_search`).
DEFAULT_MAX_EXAMPLES = 200

#: min-precision's format families: how each splits its bits, (range field, precision field, range widths); a
#: Float has exponent 2..11, a Fixed 0..52 integer bits (`verify.precision.Family`).
FAMILY_SPLITS = {
    "float": ("exponent", "mantissa", range(2, 12)),
    "fixed": ("integer", "fraction", range(0, 53)),
}
#: min-precision's checkers (`verify.precision`).
METHODS = ("certify", "exhaustive")

#: `search hybrid|full`: random inputs when the family is too large to run whole, and random prefixes per fixed
#: suffix in the pair search (`verify.search.probes.Effort`).
SEARCH_SAMPLES = 2000
PAIR_PREFIXES = 256

__all__ = ["DEFAULT_MAX_EXAMPLES", "FAMILY_SPLITS", "METHODS", "SEARCH_SAMPLES", "PAIR_PREFIXES"]
