"""Whether the lower bounds cover a proven budget, evaluated exactly at the task's prompt length n (Python ints).

* Theorem 1.1 (Ye, He, Liao, Wu, Lu 2026, arXiv 2602.01763): a hybrid with L - 1 full-attention layers and up to
  2^(3L^2) linear-attention layers per gap cannot solve L-step composition when H d p <= n^(2^-(4L+2)).
* CPW (Chen, Peng, Wu 2024, arXiv 2412.02975): an L-layer full-attention decoder cannot, when H d p <= n^(2^-4L).

Hdp is an integer, so Hdp <= n^(2^-e) exactly when Hdp <= floor(n^(2^-e)), which `floor_root` computes. The
checker proves the network's side (every input answered); these conditions are the papers' theorems, evaluated
here, not proven.
"""

from __future__ import annotations

import math

import gmpy2

from verify.checker.tasks import EXACT_COUNT_BITS, Composition, log2_text


def floor_root(n: int, e: int) -> int:
    """floor(n^(2^-e)) for n >= 0: e nested integer square roots. Exact, because floor(sqrt(floor(x))) = floor(sqrt(x))
    for real x >= 0: r = floor(sqrt(x)) has r^2 <= x, so r^2 <= floor(x) (an integer below x), and floor(x) <= x <
    (r + 1)^2; so r = floor(sqrt(floor(x))). Applied to x = n^(2^-j) for j = 0 .. e - 1 it carries floor(n^(2^-j)) to
    floor(n^(2^-(j+1))). 0 and 1 are fixed points, where the loop stops."""
    while e > 0 and n > 1:
        n, e = math.isqrt(n), e - 1
    return n


def covering(task: Composition, budget: dict[str, int]) -> dict:
    """The prompt length, the budget, and per theorem its exponent e, floor(n^(2^-e)) and whether Hdp is at most
    that. Integers of more than EXACT_COUNT_BITS bits are written as hexadecimal text (Python refuses decimal text
    past 4,300 digits)."""
    n, Hdp = task.prompt_length, budget["Hdp"]
    out = {"prompt_length": _exact(n), "prompt_length_log2": log2_text(gmpy2.log2(n)),
           **{key: budget[key] for key in ("H", "d", "p", "Hdp")}}
    for theorem, e in (("theorem_1_1", 4 * task.L + 2), ("cpw", 4 * task.L)):
        largest = floor_root(n, e)
        out[theorem] = {"exponent": e, "condition": f"Hdp <= n^(2^-{e})", "largest_Hdp": _exact(largest),
                        "covered": Hdp <= largest}
    return out


def _exact(x: int) -> int | str:
    return x if x.bit_length() <= EXACT_COUNT_BITS else hex(x)
