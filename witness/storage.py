"""How a network's arrays are stored: the dtypes they may have, the narrowest one that holds an array exactly, and
read-only arrays the IR can keep without copying (docs/conventions.md §2, "Files").

Storage is not arithmetic: every run widens the arrays to float64 where they enter it (`Arithmetic.weights`), so a
network computes the same whatever dtype holds its arrays. An array's narrowest dtype is the first of
`STORAGE_DTYPES` (fewest bytes first) from which each entry converts back to the same float64 bit for bit, so -0.0
needs a float dtype and an integer dtype holds only integers in its range.
"""

from __future__ import annotations

import numpy as np

STORAGE_DTYPES = tuple(np.dtype(name) for name in ("int8", "uint8", "int16", "float16", "float32", "float64"))

def narrowest_dtype(array: np.ndarray) -> np.dtype:
    """The first of STORAGE_DTYPES that holds every entry of `array` exactly (float64 for anything else)."""
    array = np.asarray(array)
    for dtype in STORAGE_DTYPES:
        if dtype == array.dtype or _holds(array, dtype):
            return dtype
    return STORAGE_DTYPES[-1]


def _holds(array: np.ndarray, dtype: np.dtype) -> bool:
    with np.errstate(all="ignore"):  # an entry out of an integer dtype's range casts to garbage, and fails below
        back = array.astype(dtype).astype(array.dtype)
    return back.tobytes() == array.tobytes()


def seal(array: np.ndarray) -> np.ndarray:
    """Mark `array` and every array it is a view of read-only, and return it: for an owner of a freshly built or
    read array that hands it to the IR, which then keeps it without a copy (`is_sealed`)."""
    base = array
    while isinstance(base, np.ndarray):
        base.setflags(write=False)
        base = base.base
    return array


def is_sealed(array: np.ndarray) -> bool:
    """Whether nothing can write to `array`: it and every array under it are read-only, and the memory at the bottom
    is the array's own, immutable bytes or a read-only buffer."""
    base = array
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return base is None or isinstance(base, bytes) or (isinstance(base, memoryview) and base.readonly)
