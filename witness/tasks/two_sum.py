"""2-Sum (docs/conventions.md §1.2).

Input x_0 .. x_{n-1} in [M] (token id = value). Output at every position i: y_i = 1 if some j != i has
x_i + x_j = t (mod M), else 0. In the `causal` variant only j < i counts. (The project's convention, after
Sanford et al.'s Match2 with a target.)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from witness.errors import InputError, ParameterError
from witness.tasks.record import Parameter, TaskRecord
from witness.tasks.base import (
    DEFAULT_ENUMERATION_LIMIT,
    as_token_batch,
    check_int,
    check_token_ranges,
    enumerate_mixed_radix,
    rng_from_seed,
)


@dataclass(frozen=True)
class TwoSum:
    n: int
    M: int
    t: int
    causal: bool = False
    name: ClassVar[str] = "two_sum"

    def __post_init__(self) -> None:
        check_int("n", self.n, 2)
        check_int("M", self.M, 2)
        check_int("t", self.t, 0)
        if self.t >= self.M:
            raise ParameterError(f"t must be in [0, M) = [0, {self.M}), got {self.t}")
        if not isinstance(self.causal, (bool, np.bool_)):
            raise ParameterError(f"causal must be a bool, got {self.causal!r}")
        for name in ("n", "M", "t"):
            object.__setattr__(self, name, int(getattr(self, name)))
        object.__setattr__(self, "causal", bool(self.causal))

    @property
    def vocab_size(self) -> int:
        return self.M

    @property
    def prompt_length(self) -> int:
        return self.n

    @property
    def read_positions(self) -> tuple[int, ...]:
        return tuple(range(self.n))

    def params(self) -> dict[str, Any]:
        return {"n": self.n, "M": self.M, "t": self.t, "causal": self.causal}

    def check_tokens(self, tokens: Any) -> np.ndarray:
        batch = as_token_batch(tokens, self.n, f"two_sum(n={self.n}, M={self.M})")
        check_token_ranges(batch, np.zeros(self.n, np.int64), np.full(self.n, self.M, np.int64), "two_sum")
        return batch

    def answer(self, x: Any) -> tuple[int, ...]:
        batch = self.check_tokens(x)
        if batch.shape[0] != 1:
            raise InputError("answer() takes one input; use answers() for a batch")
        return tuple(int(v) for v in self.answers(batch)[0])

    def tokens(self, x: Any) -> np.ndarray:
        return self.check_tokens(x)[0]

    def answers(self, tokens: Any) -> np.ndarray:
        """y for every sequence of a batch: shape (batch, n), entries 0/1."""
        batch = self.check_tokens(tokens)
        match = (batch[:, :, None] + batch[:, None, :]) % self.M == self.t  # [b, i, j]
        allowed = np.tril(np.ones((self.n, self.n), bool), k=-1) if self.causal else ~np.eye(self.n, dtype=bool)
        return (match & allowed).any(axis=2).astype(np.int64)

    def random_tokens(self, seed: int | np.random.Generator, count: int) -> np.ndarray:
        rng = rng_from_seed(seed)
        return rng.integers(0, self.M, size=(check_int("count", count, 0), self.n))

    def count(self) -> int:
        return self.M**self.n

    def position_alphabets(self) -> tuple[np.ndarray, np.ndarray]:
        """Per position: the number of allowed token ids (M) and the smallest one (0)."""
        return np.full(self.n, self.M, dtype=np.int64), np.zeros(self.n, dtype=np.int64)

    def enumerate_tokens(self, batch_size: int = 65536, limit: int = DEFAULT_ENUMERATION_LIMIT) -> Iterator[np.ndarray]:
        radices = np.full(self.n, self.M, dtype=np.int64)
        return enumerate_mixed_radix(radices, np.zeros(self.n, np.int64), self.count(), batch_size, limit,
                                     f"two_sum{self.params()}")


def two_sum_tasks(max_n: int = 6, max_M: int = 6, causal: bool | None = None):
    """Hypothesis: a `TwoSum` with 2 <= n <= max_n, 2 <= M <= max_M, any target t in [M]; `causal=None` draws
    the variant."""
    from hypothesis import strategies as st

    @st.composite
    def draw_task(draw):
        M = draw(st.integers(2, max_M))
        chosen = draw(st.booleans()) if causal is None else causal
        return TwoSum(draw(st.integers(2, max_n)), M, draw(st.integers(0, M - 1)), chosen)

    return draw_task()


RECORD = TaskRecord(
    name=TwoSum.name,
    task=TwoSum,
    summary="2-Sum: at every position, does some other token complete it to t mod M (docs/conventions.md §1.2)",
    parameters=(
        Parameter("n", "int", "sequence length"),
        Parameter("M", "int", "the modulus: tokens are 0 .. M-1"),
        Parameter("t", "int", "the target sum mod M", default=0),
        Parameter("causal", "flag", "only earlier positions j < i count", default=False),
    ),
    tasks_strategy=two_sum_tasks,
    probes=("summary_collisions",),
)
