"""Number formats and rounding semantics: what "precision p" means during a run.

The executor performs every arithmetic step through an `Arithmetic` object, so a format and a semantics plug in
here without touching the executor. An `Arithmetic` decides, for each elementary step the executor names, how the
result is rounded:

* `weights(a)` -- a weight array, rounded once before a run;
* `matmul`, `add`, `sub`, `mul`, `div`, `exp`, `relu`, `sum` -- the operations inside a block (`matmul` contracts the
  last axis of `a` with the second-to-last of `b`, in index order; `sum` adds along an axis in index order);
* `store(a)` -- a vector leaving a block: the embedding, each head's output, each MLP output, the residual stream.

`Float64` is plain IEEE double arithmetic with numpy's own summation order: the reference for the foundation's
exhaustive tests, not a p-bit claim.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Arithmetic:
    """Float64 by default; subclasses override the steps their semantics rounds."""

    format_name: str = "fp64"
    semantics: str = "float64"
    bits: int = 64

    def describe(self) -> dict[str, Any]:
        return {"format": self.format_name, "semantics": self.semantics, "p": self.bits}

    def weights(self, a: np.ndarray) -> np.ndarray:
        return a

    def store(self, a: np.ndarray) -> np.ndarray:
        return a

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.matmul(a, b)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a - b

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a * b

    def div(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a / b

    def exp(self, a: np.ndarray) -> np.ndarray:
        return np.exp(a)

    def relu(self, a: np.ndarray) -> np.ndarray:
        return np.maximum(a, 0.0)

    def sum(self, a: np.ndarray, axis: int) -> np.ndarray:
        return a.sum(axis=axis, keepdims=True)


FLOAT64 = Arithmetic()

# After Arithmetic: the semantics subclass it.
from witness.arith.formats import (BF16, EXACT, FP16, FP32, FP64, Exact, Fixed, Float,  # noqa: E402
                                   Format, parse_format)
from witness.arith.semantics import SEMANTICS, arithmetic, rounded_weights_report  # noqa: E402

__all__ = ["Arithmetic", "FLOAT64", "Float", "Fixed", "Exact", "Format", "FP16", "BF16", "FP32", "FP64", "EXACT",
           "parse_format", "arithmetic", "rounded_weights_report", "SEMANTICS"]
