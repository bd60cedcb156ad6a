"""L-sequential function composition (docs/conventions.md §1.1).

Domain sizes N_0 = m, N_l = n_l * N_{l-1}. Tables z_1 : [N_0] -> [N_0] and z_l : [N_{l-1}] -> [N_{l-1}]
(l = 2..L), seed z_0 in [m], query w = (w_1, ..., w_{L-1}) with w_l in [n_l]. The chain is i_0 = z_0,
i_1 = z_1(i_0), i_{l+1} = z_{l+1}(w_l * N_{l-1} + i_l); the answer is i_L in [N_{L-1}].

Token ids (the project's convention): a table or seed token's id is its value; the query token's id is
V + enc(w), with V = N_{L-1} and enc(w) = w_1 + n_1 * (w_2 + n_2 * (...)).

Layouts: `paper` = [z_L table] ... [z_1 table] [z_0] [w]; `forward` = [w] [z_0] [z_1 table] ... [z_L table].
The answer is read at the last position in both.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
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

LAYOUTS = ("paper", "forward")


@dataclass(frozen=True)
class Segment:
    """A contiguous run of positions: `name` is `z{l}` for table z_l (z0 is the seed, one position) or `w`."""

    name: str
    start: int
    length: int

    @property
    def stop(self) -> int:
        return self.start + self.length


@dataclass(frozen=True)
class CompositionInstance:
    """One input: the seed, the tables z_1..z_L (tables[l-1] is z_l) and the query w_1..w_{L-1}."""

    z0: int
    tables: tuple[tuple[int, ...], ...]
    w: tuple[int, ...] = ()


@dataclass(frozen=True)
class Composition:
    """Parameters of the task; validated on construction, immutable afterwards."""

    L: int
    m: int
    n: tuple[int, ...] = ()
    layout: str = "paper"
    name: ClassVar[str] = "composition"
    segments: tuple[Segment, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_int("L", self.L, 1)
        check_int("m", self.m, 1)
        try:
            n = tuple(self.n)
        except TypeError:
            raise ParameterError(f"n must be a list of L-1 integers, got {self.n!r}") from None
        if len(n) != self.L - 1:
            raise ParameterError(f"n must have L-1 = {self.L - 1} entries (n_1..n_{{L-1}}), got {len(n)}")
        n = tuple(check_int(f"n_{l + 1}", value, 1) for l, value in enumerate(n))
        if self.layout not in LAYOUTS:
            raise ParameterError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        object.__setattr__(self, "L", int(self.L))
        object.__setattr__(self, "m", int(self.m))
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "segments", self._layout_segments())

    # -- sizes -------------------------------------------------------------------------------------------
    @property
    def domain_sizes(self) -> tuple[int, ...]:
        """(N_0, ..., N_{L-1}); table z_l has N_{l-1} entries with values in [N_{l-1}]."""
        sizes = [self.m]
        for n_l in self.n:
            sizes.append(sizes[-1] * n_l)
        return tuple(sizes)

    @property
    def value_vocab(self) -> int:
        """V = N_{L-1}: ids below V are values; the answer is one of them."""
        return self.domain_sizes[-1]

    @property
    def query_count(self) -> int:
        return math.prod(self.n)

    @property
    def vocab_size(self) -> int:
        return self.value_vocab + self.query_count

    @property
    def prompt_length(self) -> int:
        return 2 + sum(self.domain_sizes)

    @property
    def read_positions(self) -> tuple[int, ...]:
        return (self.prompt_length - 1,)

    def params(self) -> dict[str, Any]:
        return {"L": self.L, "m": self.m, "n": list(self.n), "layout": self.layout}

    def segment(self, name: str) -> Segment:
        for seg in self.segments:
            if seg.name == name:
                return seg
        raise ParameterError(f"no segment {name!r} in {self}")

    def _layout_segments(self) -> tuple[Segment, ...]:
        sizes = self.domain_sizes
        names = [(f"z{l}", sizes[l - 1]) for l in range(self.L, 0, -1)] + [("z0", 1), ("w", 1)]
        if self.layout == "forward":
            names = names[::-1]
        segments, start = [], 0
        for name, length in names:
            segments.append(Segment(name, start, length))
            start += length
        return tuple(segments)

    # -- query encoding ----------------------------------------------------------------------------------
    def encode_query(self, w: tuple[int, ...]) -> int:
        """enc(w) = w_1 + n_1 * (w_2 + n_2 * (...)), a number in [prod n_l]."""
        code = 0
        for w_l, n_l in zip(reversed(w), reversed(self.n)):
            code = code * n_l + w_l
        return code

    def decode_query(self, code: np.ndarray | int) -> list:
        """Inverse of encode_query, elementwise on arrays: [w_1, ..., w_{L-1}]."""
        digits = []
        for n_l in self.n:
            digits.append(code % n_l)
            code = code // n_l
        return digits

    # -- single instances --------------------------------------------------------------------------------
    def _check_instance(self, inst: CompositionInstance) -> None:
        sizes = self.domain_sizes
        if len(inst.tables) != self.L or len(inst.w) != self.L - 1:
            raise InputError(f"instance has {len(inst.tables)} tables and {len(inst.w)} query parts; {self} needs "
                             f"{self.L} and {self.L - 1}")
        entries = (inst.z0, *inst.w, *(value for table in inst.tables for value in table))
        if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in entries):
            raise InputError("instance entries (seed, table values, query parts) must be integers")
        if not 0 <= inst.z0 < self.m:
            raise InputError(f"seed z_0 = {inst.z0} is outside [0, {self.m})")
        for l, table in enumerate(inst.tables, start=1):
            size = sizes[l - 1]
            if len(table) != size or any(not 0 <= v < size for v in table):
                raise InputError(f"table z_{l} must have {size} entries in [0, {size})")
        for l, (w_l, n_l) in enumerate(zip(inst.w, self.n), start=1):
            if not 0 <= w_l < n_l:
                raise InputError(f"query part w_{l} = {w_l} is outside [0, {n_l})")

    def answer(self, inst: CompositionInstance) -> int:
        self._check_instance(inst)
        sizes = self.domain_sizes
        i = inst.tables[0][inst.z0]
        for l in range(1, self.L):
            i = inst.tables[l][inst.w[l - 1] * sizes[l - 1] + i]
        return i

    def tokens(self, inst: CompositionInstance) -> np.ndarray:
        self._check_instance(inst)
        out = np.empty(self.prompt_length, dtype=np.int64)
        for l, table in enumerate(inst.tables, start=1):
            seg = self.segment(f"z{l}")
            out[seg.start:seg.stop] = table
        out[self.segment("z0").start] = inst.z0
        out[self.segment("w").start] = self.value_vocab + self.encode_query(inst.w)
        return out

    def instance(self, tokens: Any) -> CompositionInstance:
        batch = self.check_tokens(tokens)
        if batch.shape[0] != 1:
            raise InputError("instance() takes one token sequence")
        row = batch[0]
        tables = tuple(tuple(int(v) for v in row[self.segment(f"z{l}").start:self.segment(f"z{l}").stop])
                       for l in range(1, self.L + 1))
        w = tuple(int(d) for d in self.decode_query(int(row[self.segment("w").start]) - self.value_vocab))
        return CompositionInstance(int(row[self.segment("z0").start]), tables, w)

    # -- batches of token sequences ----------------------------------------------------------------------
    def position_alphabets(self) -> tuple[np.ndarray, np.ndarray]:
        """Per position: the number of allowed token ids and the smallest one."""
        radices = np.empty(self.prompt_length, dtype=np.int64)
        offsets = np.zeros(self.prompt_length, dtype=np.int64)
        sizes = self.domain_sizes
        for seg in self.segments:
            if seg.name == "w":
                radices[seg.start] = self.query_count
                offsets[seg.start] = self.value_vocab
            elif seg.name == "z0":
                radices[seg.start] = self.m
            else:
                radices[seg.start:seg.stop] = sizes[int(seg.name[1:]) - 1]
        return radices, offsets

    def check_tokens(self, tokens: Any) -> np.ndarray:
        """Validate tokens (one sequence or a batch); returns an int64 batch."""
        batch = as_token_batch(tokens, self.prompt_length, f"composition(L={self.L}, m={self.m}, n={list(self.n)})")
        radices, offsets = self.position_alphabets()
        check_token_ranges(batch, offsets, offsets + radices, "composition")
        return batch

    def answers(self, tokens: Any) -> np.ndarray:
        """The answer i_L of every sequence in a batch, computed by following the chain through the tokens."""
        return self.hop_answers(tokens)[:, -1]

    def hop_answers(self, tokens: Any) -> np.ndarray:
        """Every hop of the chain, [batch, L]: column l - 1 is i_l = z_l(w_{l-1} N_{l-2} + i_{l-1}) (i_0 = z_0)."""
        batch = self.check_tokens(tokens)
        return np.take_along_axis(batch, self._hop_positions(batch), axis=1)

    def hop_positions(self, tokens: Any) -> np.ndarray:
        """[batch, L]: column l - 1 is the prompt position hop l reads, the entry of table z_l that is i_l."""
        return self._hop_positions(self.check_tokens(tokens))

    def _hop_positions(self, batch: np.ndarray) -> np.ndarray:
        rows = np.arange(batch.shape[0])
        sizes = self.domain_sizes
        w = self.decode_query(batch[:, self.segment("w").start] - self.value_vocab)
        position = self.segment("z1").start + batch[:, self.segment("z0").start]
        positions = [position]
        for l in range(1, self.L):
            position = self.segment(f"z{l + 1}").start + w[l - 1] * sizes[l - 1] + batch[rows, position]
            positions.append(position)
        return np.stack(positions, axis=1)

    def random_tokens(self, seed: int | np.random.Generator, count: int) -> np.ndarray:
        """`count` uniformly random inputs as a token batch (count, prompt_length), reproducible from `seed`."""
        rng = rng_from_seed(seed)
        count = check_int("count", count, 0)
        radices, offsets = self.position_alphabets()
        return rng.integers(0, radices, size=(count, self.prompt_length)) + offsets

    def random_instances(self, seed: int | np.random.Generator, count: int) -> list[CompositionInstance]:
        return [self.instance(row) for row in self.random_tokens(seed, count)]

    def count(self) -> int:
        """The exact number of inputs: m * prod_l N_{l-1}^{N_{l-1}} * prod_l n_l."""
        return self.m * math.prod(size**size for size in self.domain_sizes) * self.query_count

    def enumerate_tokens(self, batch_size: int = 65536, limit: int = DEFAULT_ENUMERATION_LIMIT) -> Iterator[np.ndarray]:
        """Every input, in batches of token sequences (refuses families larger than `limit`, judged from the log2
        of the count before the count itself or any table is built)."""
        log2 = math.log2(self.m) + sum(size * math.log2(size) for size in self.domain_sizes) + math.log2(
            self.query_count)
        if log2 > math.log2(max(limit, 1)) + 1:
            raise ParameterError(f"composition{self.params()}: about 2^{log2:.6g} inputs is more than the "
                                 f"enumeration limit {limit}")
        radices, offsets = self.position_alphabets()
        return enumerate_mixed_radix(radices, offsets, self.count(), batch_size, limit, f"composition{self.params()}")


def composition_tasks(max_L: int = 3, max_m: int = 4, max_n: int = 3, layout: str | None = "paper"):
    """Hypothesis: a `Composition` with 1 <= L <= max_L, 1 <= m <= max_m and every n_l in [1, max_n];
    `layout=None` draws the layout too."""
    from hypothesis import strategies as st

    @st.composite
    def draw_task(draw):
        L = draw(st.integers(1, max_L))
        m = draw(st.integers(1, max_m))
        n = tuple(draw(st.integers(1, max_n)) for _ in range(L - 1))
        chosen = draw(st.sampled_from(LAYOUTS)) if layout is None else layout
        return Composition(L, m, n, chosen)

    return draw_task()


RECORD = TaskRecord(
    name=Composition.name,
    task=Composition,
    summary="L-step function composition: read z_L(...z_1(z_0)...) at the query (docs/conventions.md §1.1)",
    parameters=(
        Parameter("L", "int", "composition depth (the number of hops)"),
        Parameter("m", "int", "seed range: z_0 is one of m values"),
        Parameter("n", "ints", "n_1 .. n_{L-1}: how many tables each hop chooses from", default=()),
        Parameter("layout", "choice", "where the tables sit in the prompt", default="paper", choices=LAYOUTS),
    ),
    tasks_strategy=composition_tasks,
    probes=("boundary_pairs", "targeted_pairs"),
)
