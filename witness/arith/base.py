"""`Arithmetic`, the steps every run goes through (the package docstring, `witness.arith`, says what each step is),
and `FLOAT64`, plain IEEE double arithmetic with numpy's own summation order."""

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
        return np.asarray(a, dtype=np.float64)

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


__all__ = ["Arithmetic", "FLOAT64"]
