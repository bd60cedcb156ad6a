"""What the two tasks share: integer validation, seeded generators and mixed-radix enumeration.

An input of either task is a fixed-length token sequence in which every position ranges over its own finite
alphabet (`radices[p]` values starting at `offsets[p]`). Enumerating all inputs is then counting in a mixed radix,
and the instance count is the product of the radices -- an exact Python int at any size, which each task
computes in closed form.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from witness.errors import InputError, ParameterError
from witness.resources import count_text

#: Exhaustive enumeration refuses families larger than this unless the caller raises the limit.
DEFAULT_ENUMERATION_LIMIT = 10**7


def check_int(name: str, value: Any, minimum: int) -> int:
    """`value` as an int >= minimum, or a ParameterError naming the parameter (bools are not ints here)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ParameterError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def as_token_batch(tokens: Any, length: int, what: str) -> np.ndarray:
    """Tokens as an int64 array of shape (batch, length); a single sequence becomes a batch of one."""
    try:
        array = np.asarray(tokens)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise InputError(f"{what}: tokens are not a rectangular integer array ({exc})") from None
    if array.dtype == object or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
        raise InputError(f"{what}: tokens must be integers, got dtype {array.dtype}")
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != length:
        raise InputError(f"{what}: expected {length} tokens per input, got shape {tuple(np.shape(tokens))}")
    return array.astype(np.int64)


def check_token_ranges(batch: np.ndarray, low: np.ndarray, high: np.ndarray, what: str) -> None:
    """Every token at position p must lie in [low[p], high[p]); the error names the first offending position."""
    bad = (batch < low) | (batch >= high)
    if bad.any():
        row, pos = map(int, np.argwhere(bad)[0])
        raise InputError(
            f"{what}: token {int(batch[row, pos])} at position {pos} is outside [{int(low[pos])}, {int(high[pos])})"
        )


def rng_from_seed(seed: int | np.random.Generator) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(check_int("seed", seed, 0))


def enumerate_mixed_radix(
    radices: np.ndarray, offsets: np.ndarray, count: int, batch_size: int, limit: int, what: str
) -> Iterator[np.ndarray]:
    """Yield every sequence (position p in offsets[p] + [radices[p]]) in batches; the last position varies fastest.

    `count` is the task's exact instance count (the product of the radices), passed in so it is computed once.
    """
    if count > limit:
        raise ParameterError(f"{what}: {count_text(count)} inputs is more than the enumeration limit {limit}")
    batch_size = check_int("batch_size", batch_size, 1)
    return _mixed_radix_batches(np.asarray(radices, dtype=np.int64), offsets, count, batch_size)


def _mixed_radix_batches(radices: np.ndarray, offsets: np.ndarray, count: int, batch_size: int) -> Iterator[np.ndarray]:
    for start in range(0, count, batch_size):
        index = np.arange(start, min(start + batch_size, count), dtype=np.int64)
        digits = np.empty((index.size, radices.size), dtype=np.int64)
        for p in range(radices.size - 1, -1, -1):
            digits[:, p] = index % radices[p]
            index //= radices[p]
        yield digits + offsets


def alphabet_tokens(task, max_batch: int = 4):
    """Hypothesis: a batch [1..max_batch, prompt_length] of valid inputs of a task whose every position ranges over
    its own alphabet (`task.position_alphabets()`), drawn position by position so that each token shrinks towards
    the smallest id its position allows. The default token strategy of a task record."""
    from hypothesis import strategies as st

    radices, offsets = task.position_alphabets()
    row = st.tuples(*(st.integers(int(low), int(low + size - 1)) for low, size in zip(offsets, radices)))
    return st.lists(row, min_size=1, max_size=max_batch).map(lambda rows: np.array(rows, dtype=np.int64))
