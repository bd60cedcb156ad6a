"""Named residual directions for hand-written constructions (tracr-style): allocate, then address by name."""

from __future__ import annotations

import numpy as np

from witness.ir import Basis


class ResidualLayout:
    """Hands out residual directions in allocation order; `basis()` freezes the labels."""

    def __init__(self) -> None:
        self._labels: list[str] = []

    def scalar(self, label: str) -> int:
        self._labels.append(label)
        return len(self._labels) - 1

    def group(self, name: str, width: int) -> np.ndarray:
        """Directions name[0] .. name[width-1]; returns their indices (empty for width 0)."""
        return np.array([self.scalar(f"{name}[{k}]") for k in range(width)], dtype=np.int64)

    @property
    def width(self) -> int:
        return len(self._labels)

    def basis(self) -> Basis:
        return Basis(tuple(self._labels))


def code_width(count: int) -> int:
    """Bits needed to give each of `count` values its own code (0 when there is only one value)."""
    return (count - 1).bit_length()


#: The ±1 codes of the bytes: row b, entry k is +1 where bit k of b is 1, else -1.
BYTE_CODES = (2 * ((np.arange(256)[:, None] >> np.arange(8)) & 1) - 1).astype(np.int8)


def pm1_codes(values: np.ndarray, width: int, dtype=np.float64) -> np.ndarray:
    """±1 binary codes, shape values.shape + (width,), in `dtype`: entry k is +1 where bit k of the value is 1, else
    -1 (looked up a byte of the value at a time).

    Two different values below 2**width differ in at least one bit, so their codes' inner product is at most
    width - 2; a code's inner product with itself is width.
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
