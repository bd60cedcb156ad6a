"""The tasks a certificate can claim, as the checker defines them (the project's conventions, docs/conventions.md).

Composition(L, m, n_1..n_{L-1}), `paper` layout. Domain sizes N_0 = m, N_l = n_l N_{l-1}; tables z_1: [N_0] -> [N_0]
and z_l: [N_{l-1}] -> [N_{l-1}]; seed z_0 in [m]; query w = (w_1..w_{L-1}), w_l in [n_l]. The chain i_0 = z_0,
i_1 = z_1(i_0), i_{l+1} = z_{l+1}(w_l N_{l-1} + i_l); the answer is i_L. Prompt: [z_L table] ... [z_1 table] [z_0] [w],
so n = 2 + N_0 + ... + N_{L-1}; a table or seed token's id is its value, the query token's id is
V + w_1 + n_1 (w_2 + n_2 (...)) with V = N_{L-1}; the answer is read at the last position.

TwoSum(n, M, t, causal): tokens x_0..x_{n-1} in [M]; at every position y_i = 1 iff some j != i (causal: j < i) has
x_i + x_j = t (mod M).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gmpy2
import numpy as np

from verify.checker.refusal import Refused, require


#: Input counts with more bits than this are reported by their base-2 logarithm only (a decimal string of 3,000
#: digits is as long as one is worth printing).
EXACT_COUNT_BITS = 10_000
#: Integers in a message with more bits than this are named by their bit length: the parameters at the theorems'
#: scale run to 4*10^5 bits, past the 4,300 digits Python converts to text at all, and no reader wants the digits.
MESSAGE_INT_BITS = 64


def shown(value) -> str:
    """`value` for a message: its repr, with every integer of more than MESSAGE_INT_BITS bits (inside lists, tuples
    and dicts too) named by its bit length."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MESSAGE_INT_BITS:
        return f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{shown(key)}: {shown(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    return repr(value)


def _positive(name: str, value) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):  # the message only on failure
        raise Refused(f"task parameter {name} must be an integer >= 1, got {shown(value)}")
    return value


def log2_text(log2) -> str:
    """A base-2 logarithm (an mpfr) printed to 6 significant digits."""
    text = format(gmpy2.mpfr(log2), ".6g")
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class Segment:
    name: str
    start: int
    length: int

    @property
    def stop(self) -> int:
        return self.start + self.length


@dataclass(frozen=True)
class Composition:
    L: int
    m: int
    n: tuple[int, ...]

    @staticmethod
    def from_params(params: dict) -> Composition:
        if not (isinstance(params, dict) and set(params) <= {"L", "m", "n", "layout"}):
            raise Refused(f"composition parameters are L, m, n (and layout); got {shown(params)}")
        require(params.get("layout", "paper") == "paper", "the checker knows the composition task's `paper` layout")
        L, m = _positive("L", params.get("L")), _positive("m", params.get("m"))
        n = params.get("n", [])
        require(isinstance(n, (list, tuple)) and len(n) == L - 1, f"composition with L = {L} takes {L - 1} values n")
        return Composition(L, m, tuple(_positive("n_l", v) for v in n))

    def params(self) -> dict:
        return {"L": self.L, "m": self.m, "n": list(self.n), "layout": "paper"}

    @property
    def sizes(self) -> list[int]:
        """N_0 .. N_{L-1}."""
        sizes = [self.m]
        for n_l in self.n:
            sizes.append(sizes[-1] * n_l)
        return sizes

    @property
    def value_vocab(self) -> int:
        return self.sizes[-1]

    @property
    def query_count(self) -> int:
        return math.prod(self.n)

    @property
    def vocab(self) -> int:
        return self.value_vocab + self.query_count

    @property
    def segments(self) -> list[Segment]:
        out, start = [], 0
        for l in range(self.L, 0, -1):
            out.append(Segment(f"z{l}", start, self.sizes[l - 1]))
            start += self.sizes[l - 1]
        out += [Segment("z0", start, 1), Segment("w", start + 1, 1)]
        return out

    def segment(self, name: str) -> Segment:
        return next(s for s in self.segments if s.name == name)

    @property
    def prompt_length(self) -> int:
        return 2 + sum(self.sizes)

    def alphabet(self, name: str) -> tuple[int, int]:
        """The token ids allowed on a segment, as (first, count)."""
        if name == "w":
            return self.value_vocab, self.query_count
        if name == "z0":
            return 0, self.m
        return 0, self.sizes[int(name[1:]) - 1]

    def read_position(self, step: int, rest: np.ndarray, index: np.ndarray) -> np.ndarray:
        """The position step `step` reads (0: the seed; l >= 1: entry (w_{l-1}, i_{l-1}) of z_l), given the query's
        remaining digits `rest` (w_{step-1} lowest) and the current index i_{step-1}."""
        if step == 0:
            return np.full_like(rest, self.segment("z0").start)
        start = self.segment(f"z{step}").start
        if step == 1:
            return start + index
        return start + (rest % self.n[step - 2]) * self.sizes[step - 2] + index

    def advance(self, step: int, rest: np.ndarray) -> np.ndarray:
        return rest // self.n[step - 2] if step >= 2 else rest

    def log2_inputs(self):
        """log2 of the number of inputs, m * N_0^N_0 * ... * N_{L-1}^N_{L-1} * n_1 ... n_{L-1}, from the integers."""
        with gmpy2.context(precision=128):
            total = gmpy2.log2(gmpy2.mpz(self.m)) + sum(gmpy2.log2(gmpy2.mpz(v)) for v in self.n)
            return total + sum(gmpy2.mpz(size) * gmpy2.log2(gmpy2.mpz(size)) for size in self.sizes)

    def inputs(self) -> int | None:
        """The exact number of inputs when it has at most EXACT_COUNT_BITS bits, else None."""
        if self.log2_inputs() > EXACT_COUNT_BITS:
            return None
        return self.m * math.prod(size ** size for size in self.sizes) * self.query_count


@dataclass(frozen=True)
class TwoSum:
    n: int
    M: int
    t: int
    causal: bool

    @staticmethod
    def from_params(params: dict) -> TwoSum:
        if not (isinstance(params, dict) and set(params) == {"n", "M", "t", "causal"}):
            raise Refused(f"two_sum parameters are n, M, t, causal; got {shown(params)}")
        n, M, t = _positive("n", params["n"]), _positive("M", params["M"]), params["t"]
        require(n >= 2 and M >= 2, "two_sum needs n >= 2 and M >= 2")
        require(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < M, "two_sum's t must lie in [0, M)")
        require(isinstance(params["causal"], bool), "two_sum's causal must be true or false")
        return TwoSum(n, M, t, params["causal"])

    def params(self) -> dict:
        return {"n": self.n, "M": self.M, "t": self.t, "causal": self.causal}

    def partner_mask(self) -> np.ndarray:
        """[n, n]: a match at j counts for y_i."""
        if self.causal:
            return np.tril(np.ones((self.n, self.n), bool), k=-1)
        return ~np.eye(self.n, dtype=bool)

    def log2_inputs(self):
        with gmpy2.context(precision=128):
            return self.n * gmpy2.log2(gmpy2.mpz(self.M))

    def inputs(self) -> int | None:
        return self.M ** self.n if self.log2_inputs() <= EXACT_COUNT_BITS else None
