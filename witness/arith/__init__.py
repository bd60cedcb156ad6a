"""Number formats and rounding semantics: what "precision p" means during a run.

The executor performs every arithmetic step through an `Arithmetic` object, so a format and a semantics plug in
here without touching the executor. An `Arithmetic` decides, for each elementary step the executor names, how the
result is rounded:

* `weights(a)` -- a weight array, widened to float64 (a network may store it narrower, `witness.storage`) and
  rounded once before a run;
* `matmul`, `add`, `sub`, `mul`, `div`, `exp`, `relu`, `sum` -- the operations inside a block (`matmul` contracts the
  last axis of `a` with the second-to-last of `b`, in index order; `sum` adds along an axis in index order);
* `store(a)` -- a vector leaving a block: the embedding, each head's output, each MLP output, the residual stream.

`Float64` is plain IEEE double arithmetic with numpy's own summation order: the reference for the foundation's
exhaustive tests, not a p-bit claim.
"""

from __future__ import annotations

from witness.arith.base import FLOAT64, Arithmetic
from witness.arith.formats import BF16, EXACT, FP16, FP32, FP64, Exact, Fixed, Float, Format, parse_format
from witness.arith.semantics import SEMANTICS, arithmetic

__all__ = ["Arithmetic", "FLOAT64", "Float", "Fixed", "Exact", "Format", "FP16", "BF16", "FP32", "FP64", "EXACT",
           "parse_format", "arithmetic", "SEMANTICS"]
