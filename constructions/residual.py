"""Named spaces for hand-written constructions (in the spirit of tracr's craft): every direction of the residual
stream, of a head and of an MLP's hidden layer is declared once by name, and weights are written between named
groups of directions, never at integer offsets.

* `Space.of("one", ("val", 3), ...)` declares a space: a string is one direction labelled by that string, a pair
  (name, width) the directions name[0] .. name[width-1]; they are laid out in declaration order, and the labels are
  the network's basis (`Space.basis`). `space["val"]` is a `Group`; `Space.extend` appends directions, so a space
  built on another keeps every index of the first.
* A `Head` holds the two spaces of one attention head: `qk`, where queries meet keys, and `ov`, where values travel.
  Its weights are written as a bilinear form and a linear map over named groups: `Score(query, key, via, weight)`
  adds weight * <query, key> to every score (W_Q W_K^T), carried by the head directions `via`; `Route(source, via,
  target)` sends source[k] to target[k] through the value direction via[k] (W_V W_O).
* Everything is written as diagonal runs from one group to another (`run`, `fill`): the composition construction
  keeps them as its parametric description, the others `write` them into dense arrays.

Codes: entry k of code(v) is +1 if bit k of v is set, else -1 (`pm1_codes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from witness.ir import Basis

#: <code(u), code(v)> = width - 2 hamming(u, v): equal codes score `width`, distinct ones at least CODE_GAP less.
CODE_GAP = 2

_INDEXED = re.compile(r"(.*)\[(0|[1-9][0-9]*)\]")  # a label name[k], as a group writes it


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Group:
    """Directions `start` .. `start + width - 1` of a space, labelled name[0] .. name[width-1]; a scalar is one
    direction labelled `name` itself."""

    name: str
    start: int
    width: int
    scalar: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a group needs a non-empty name, got {self.name!r}")
        object.__setattr__(self, "start", _count(f"{self.name}: start", self.start))
        object.__setattr__(self, "width", _count(f"{self.name}: width", self.width))
        if self.scalar and self.width != 1:
            raise ValueError(f"scalar {self.name!r} must have width 1, got {self.width}")

    @property
    def labels(self) -> tuple[str, ...]:
        return (self.name,) if self.scalar else tuple(f"{self.name}[{k}]" for k in range(self.width))

    @property
    def indices(self) -> np.ndarray:
        return np.arange(self.start, self.start + self.width, dtype=np.int64)

    @property
    def index(self) -> int:
        """The one direction of a scalar."""
        if not self.scalar:
            raise ValueError(f"{self.name!r} is a group of {self.width} directions, not a scalar")
        return self.start

    def prefix(self, width: int) -> Group:
        """name[0] .. name[width-1]: the part of a group that a narrower group is paired with."""
        if not 0 <= _count(f"{self.name}: prefix width", width) <= self.width:
            raise ValueError(f"{self.name!r} has {self.width} directions, no prefix of {width}")
        return Group(self.name, self.start, width)

    def at(self, k: int) -> Group:
        """Direction name[k] alone, as a scalar labelled name[k]."""
        if self.scalar or not 0 <= _count(f"{self.name}: direction", k) < self.width:
            raise ValueError(f"{self.name!r} has no direction {k}")
        return Group(f"{self.name}[{k}]", self.start + k, 1, scalar=True)


@dataclass(frozen=True)
class Space:
    """Named directions laid out in declaration order, refusing a name or a label given twice; build one with `of`
    or `extend`. `_by_name` is the lookup `groups` implies."""

    groups: tuple[Group, ...] = ()
    _by_name: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name, width = {}, 0
        for group in self.groups:
            if not isinstance(group, Group) or group.start != width:
                raise ValueError(f"{group!r} does not continue the space at direction {width}")
            if group.name in by_name:
                raise ValueError(f"{group.name!r} is allocated twice")
            by_name[group.name] = group
            width += group.width
        for group in self.groups:  # a scalar labelled name[k] may not repeat a label of group `name`
            match = _INDEXED.fullmatch(group.name) if group.scalar else None
            owner = by_name.get(match.group(1)) if match else None
            if owner is not None and not owner.scalar and int(match.group(2)) < owner.width:
                raise ValueError(f"label {group.name!r} is allocated twice (scalar and group {owner.name!r})")
        object.__setattr__(self, "_by_name", by_name)

    @classmethod
    def of(cls, *entries: str | tuple[str, int]) -> Space:
        return cls().extend(*entries)

    def extend(self, *entries: str | tuple[str, int]) -> Space:
        """This space with `entries` appended: a string is a scalar, (name, width) a group."""
        groups, width = list(self.groups), self.width
        for entry in entries:
            if isinstance(entry, str):
                groups.append(Group(entry, width, 1, scalar=True))
            elif isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str):
                groups.append(Group(entry[0], width, entry[1]))
            else:
                raise ValueError(f"a space entry is a name or a (name, width) pair, got {entry!r}")
            width += groups[-1].width
        return Space(tuple(groups))

    def __getitem__(self, name: str) -> Group:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no group named {name!r} in this space") from None

    @property
    def width(self) -> int:
        return sum(group.width for group in self.groups)

    def basis(self) -> Basis:
        return Basis(tuple(label for group in self.groups for label in group.labels))

    def spans(self) -> dict[str, tuple[int, int]]:
        """Each group's (first direction, width)."""
        return {group.name: (group.start, group.width) for group in self.groups}

    def owns(self, part: Group) -> bool:
        """Whether `part` is one of this space's groups, a prefix of one, or one of its directions (`Group.at`)."""
        for group in self.groups:
            offset = part.start - group.start
            if 0 <= offset and offset + part.width <= group.width and (
                    part.name == group.name and offset == 0
                    or part.scalar and not group.scalar and part.name == f"{group.name}[{offset}]"):
                return True
        return False


def run(rows: Group, columns: Group, value: float) -> tuple[int, int, int, float]:
    """value * (identity from `rows` to `columns`), as the diagonal run (row, column, length, value)."""
    if rows.width != columns.width:
        raise ValueError(f"{rows.name!r} ({rows.width}) and {columns.name!r} ({columns.width}) differ in width")
    return rows.start, columns.start, rows.width, float(value)


def fill(group: Group, value: float) -> tuple[int, int, float]:
    """`value` on every direction of `group`, as the vector run (index, length, value)."""
    return group.start, group.width, float(value)


def write(array: np.ndarray, runs) -> np.ndarray:
    """Set each run of `runs` (`run` for a matrix, `fill` for a vector) in `array`; returns `array`."""
    for entry in runs:
        if array.ndim == 2:
            row, column, length, value = entry
            array[np.arange(row, row + length), np.arange(column, column + length)] = value
        else:
            index, length, value = entry
            array[index:index + length] = value
    return array


@dataclass(frozen=True)
class Score:
    """weight * <query, key> added to every attention score, carried by the head directions `via`.

    The weight sits on the query side and the key side is 1, so a key is its residual directions as they are."""

    query: Group
    key: Group
    via: Group
    weight: float

    def __post_init__(self) -> None:
        if not self.query.width == self.key.width == self.via.width:
            raise ValueError(f"score {self.query.name!r} x {self.key.name!r} via {self.via.name!r}: widths "
                             f"{self.query.width}, {self.key.width}, {self.via.width} differ")
        object.__setattr__(self, "weight", float(self.weight))


@dataclass(frozen=True)
class Route:
    """source[k] -> target[k] through the value direction via[k] (W_V W_O is the identity between them)."""

    source: Group
    via: Group
    target: Group

    def __post_init__(self) -> None:
        if not self.source.width == self.via.width == self.target.width:
            raise ValueError(f"route {self.source.name!r} -> {self.target.name!r} via {self.via.name!r}: widths "
                             f"{self.source.width}, {self.via.width}, {self.target.width} differ")


@dataclass(frozen=True)
class Head:
    """One attention head: `qk` holds the directions queries and keys meet in, `ov` those values travel in.

    A softmax head of witness has one width d_head for both (`shared`), the larger; linear attention sizes them
    apart (d_k, d_v)."""

    qk: Space
    ov: Space
    shared: bool = True

    @property
    def d_k(self) -> int:
        return max(self.qk.width, self.ov.width) if self.shared else self.qk.width

    @property
    def d_v(self) -> int:
        return max(self.qk.width, self.ov.width) if self.shared else self.ov.width

    def runs(self, residual: Space, scores, routes) -> dict[str, tuple[tuple, ...]]:
        """W_Q, W_K [d_model, d_k], W_V [d_model, d_v] and W_O [d_v, d_model] as runs, in the order given."""
        for score in scores:
            self._check(residual, "qk", score.via, score.query, score.key)
        for route in routes:
            self._check(residual, "ov", route.via, route.source, route.target)
        return {"W_Q": tuple(run(s.query, s.via, s.weight) for s in scores),
                "W_K": tuple(run(s.key, s.via, 1.0) for s in scores),
                "W_V": tuple(run(r.source, r.via, 1.0) for r in routes),
                "W_O": tuple(run(r.via, r.target, 1.0) for r in routes)}

    def shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        return {"W_Q": (d_model, self.d_k), "W_K": (d_model, self.d_k), "W_V": (d_model, self.d_v),
                "W_O": (self.d_v, d_model)}

    def dense(self, residual: Space, scores, routes) -> dict[str, np.ndarray]:
        """The same as float64 arrays with a leading head axis of 1 (W_Q [1, d_model, d_k], ...)."""
        runs = self.runs(residual, scores, routes)
        return {name: write(np.zeros(shape), runs[name])[None] for name, shape in self.shapes(residual.width).items()}

    def _check(self, residual: Space, side: str, via: Group, *ends: Group) -> None:
        if not getattr(self, side).owns(via):
            raise ValueError(f"{via.name!r} is no direction of the head's {side} space")
        for end in ends:
            if not residual.owns(end):
                raise ValueError(f"{end.name!r} is no direction of the residual space")


def code_width(count: int) -> int:
    """Bits needed to give each of `count` values its own code (0 when there is only one value)."""
    return (count - 1).bit_length()


#: The ±1 codes of the bytes: row b, entry k is +1 where bit k of b is 1, else -1.
BYTE_CODES = (2 * ((np.arange(256)[:, None] >> np.arange(8)) & 1) - 1).astype(np.int8)


def pm1_codes(values: np.ndarray, width: int, dtype=np.float64) -> np.ndarray:
    """±1 binary codes, shape values.shape + (width,), in `dtype`: entry k is +1 where bit k of the value is 1, else
    -1 (looked up a byte of the value at a time).

    Two different values below 2**width differ in at least one bit, so their codes' inner product is at most
    width - CODE_GAP; a code's inner product with itself is width.
    """
    values = np.asarray(values, dtype=np.int64)
    codes = np.empty(values.shape + (width,), dtype)
    for low in range(0, width, 8):
        high = min(low + 8, width)
        codes[..., low:high] = BYTE_CODES[(values >> low) & 255, :high - low]
    return codes


def table_bytes(rows: int, d_model: int) -> int:
    """Bytes of float64 tables with `rows` rows of width d_model, twice over (what building and freezing them
    holds at once): the estimate a builder's `memory_bytes` gives `witness.registry.compile` before it allocates."""
    return 2 * 8 * rows * d_model
