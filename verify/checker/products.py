"""Dot products of point values, as a semantics computes them: `strict` in index order with a rounding after every
multiply and add; `theory` exactly. Entries are float64 values of the format (weights already rounded).

`exact_matmul` computes in float64 only where that is provably exact: when every entry of A is a multiple of 2^a,
every entry of B a multiple of 2^b, and sum_k |A_ik| |B_kj| < 2^(a + b + 52), every product and every partial sum,
in whatever order, is an integer multiple of 2^(a + b) below 2^53 times it, hence a float64. Otherwise it refuses.

`strict_matmul` follows `witness.execute`: acc = x_0 w_0, then acc = round(acc + round(x_k w_k)) for k in index
order. Rows of W that are zero are skipped: with finite x their products are exact zeros and adding an exact zero
to a format value changes nothing (but the sign of a zero sum, which no comparison the checker makes can see).
"""

from __future__ import annotations

import numpy as np

from verify.checker.numbers import Format
from verify.checker.refusal import require


def two_adic(values: np.ndarray) -> int | None:
    """The largest g with every entry a multiple of 2^g (None when every entry is zero)."""
    nonzero = np.abs(np.asarray(values, dtype=np.float64))
    nonzero = nonzero[nonzero != 0]
    if nonzero.size == 0:
        return None
    mantissa, exponent = np.frexp(nonzero)
    integer = np.ldexp(mantissa, 53).astype(np.int64)
    trailing = np.log2((integer & -integer).astype(np.float64)).astype(np.int64)
    return int((exponent - 53 + trailing).min())


def exact_matmul(A: np.ndarray, B: np.ndarray, what: str) -> np.ndarray:
    """A @ B exactly (module docstring), as float64."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    ga, gb = two_adic(A), two_adic(B)
    if ga is None or gb is None:
        return np.zeros(A.shape[:-1] + B.shape[1:])
    largest = float((np.abs(A) @ np.abs(B)).max(initial=0.0))  # rounded, but compared with a whole ulp to spare
    require(largest < 2.0 ** (ga + gb + 52) and ga + gb >= -1022, f"{what}: the exact products do not fit float64")
    return A @ B


def strict_matmul(X: np.ndarray, W: np.ndarray, fmt: Format, what: str) -> np.ndarray:
    """X [..., d] @ W [d, c] in index order, every multiply and add rounded to `fmt`."""
    X, W = np.asarray(X, dtype=np.float64), np.asarray(W, dtype=np.float64)
    acc = None
    for i in np.flatnonzero(W.any(axis=1)):
        product = fmt.mul(X[..., i:i + 1], W[i], what)
        acc = product if acc is None else fmt.add(acc, product, what)
    return np.zeros(X.shape[:-1] + W.shape[1:]) if acc is None else acc


def affine(X: np.ndarray, W: np.ndarray, b: np.ndarray, fmt: Format, strict: bool, what: str) -> np.ndarray:
    """X W + b for point rows X: strict rounds every step (the bias add too); theory is exact."""
    if strict:
        product = strict_matmul(X, W, fmt, what)
        return fmt.add(product, b, what) if np.any(b) else product
    ones = np.ones(np.shape(X)[:-1] + (1,))
    return exact_matmul(np.concatenate([X, ones], axis=-1), np.vstack([W, np.asarray(b)[None, :]]), what)
