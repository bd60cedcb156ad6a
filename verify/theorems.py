"""The theorems' thresholds and budgets, evaluated exactly (docs/conventions.md §6 "Bounds").

Every quantity is a Python int or a sympy expression; floats appear only in fields named `approx*`. Each `Bound`
names the paper its formula comes from.

The lower bounds are conditions of the form Hdp <= n^(2^-k). Both sides are positive, so raising to the power
2^k gives the equivalent Hdp^(2^k) <= n: the smallest prompt length a theorem covers is the integer Hdp^(2^k), and
its exact log2 is 2^k * log2(Hdp). Conversely, at a given n the largest integer Hdp covered is
floor(n^(2^-k)), which is k nested integer square roots (floor(sqrt(floor(x))) = floor(sqrt(x)) for x >= 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gmpy2
import sympy

from witness.errors import ParameterError
from witness.tasks.base import check_int

YE_ET_AL = "Ye, He, Liao, Wu, Lu 2026, arXiv 2602.01763"
CPW = "Chen, Peng, Wu 2024, arXiv 2412.02975"
PROMPT_LAYOUT = "witness docs/conventions.md §1.1 (prompt length of the composition task)"

#: Exact integers are written out up to this many decimal digits: Python refuses to convert ints of more than
#: 4300 digits to and from text by default, so anything larger is reported through its exact log2 only.
MAX_EXACT_DIGITS = 4000
_MAX_EXACT_VALUE = 10**MAX_EXACT_DIGITS
_MAX_EXACT_BITS = _MAX_EXACT_VALUE.bit_length()


@dataclass(frozen=True)
class Bound:
    """One quantity from a theorem: `exact` is the value itself, `log2` its exact base-2 logarithm.

    `exact` is None when the value has more than MAX_EXACT_DIGITS digits; `log2` is None only where the value is
    known to lie in a bracket, which `note` then states. `approx_log2` is always present.
    """

    name: str
    source: str
    statement: str
    formula: str
    exact: sympy.Expr | None
    log2: sympy.Expr | None
    approx_log2: float
    note: str = ""

    def __post_init__(self) -> None:
        if self.exact is None and self.log2 is None and not self.note:
            raise ValueError(f"bound {self.name}: without an exact value or log2, the note must give the bracket")

    @property
    def value(self) -> int | None:
        """The exact value as a Python int, when it is an integer that was written out."""
        return int(self.exact) if self.exact is not None and self.exact.is_Integer else None

    @property
    def approx(self) -> float | None:
        """The value as a float, or None when it is beyond the float range."""
        if self.exact is None:  # more than MAX_EXACT_DIGITS digits
            return None
        result = float(sympy.N(self.exact, 20))
        return result if math.isfinite(result) else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready; exact values are strings (integers in decimal, `sympy.sympify` reads every one back)."""
        return {"name": self.name, "source": self.source, "statement": self.statement, "formula": self.formula,
                "exact": None if self.exact is None else str(self.exact),
                "log2": None if self.log2 is None else str(self.log2),
                "approx": self.approx, "approx_log2": self.approx_log2, "note": self.note}

    def display(self) -> str:
        """The exact value when it is short, else a power of two."""
        if self.value is not None and self.value < 10**24:
            return str(self.value)
        if self.exact is not None and not self.exact.is_Integer:
            return f"≈ {self.approx:.6g}"
        return f"≈ 2^{self.approx_log2:.6g}"


@dataclass(frozen=True)
class HeadShape:
    """H heads of dimension d at p bits (docs/conventions.md §2 budget convention)."""

    H: int
    d: int
    p: int

    def __post_init__(self) -> None:
        for name in ("H", "d", "p"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), 1))

    @property
    def Hdp(self) -> int:
        return self.H * self.d * self.p


@dataclass(frozen=True)
class Applies:
    """Whether a theorem's condition holds at the given (L, Hdp, n)."""

    name: str
    source: str
    condition: str
    holds: bool

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "condition": self.condition, "holds": self.holds}


@dataclass(frozen=True)
class BoundsReport:
    L: int
    Hdp: int
    n: int | None
    B: int | None
    shape: HeadShape | None
    bounds: tuple[Bound, ...]
    applies: tuple[Applies, ...]

    def bound(self, name: str) -> Bound:
        for item in self.bounds:
            if item.name == name:
                return item
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        shape = None if self.shape is None else {"H": self.shape.H, "d": self.shape.d, "p": self.shape.p}
        return {"L": self.L, "Hdp": self.Hdp, "n": self.n, "B": self.B, "shape": shape,
                "bounds": [item.as_dict() for item in self.bounds],
                "applies": [item.as_dict() for item in self.applies]}

    def text(self) -> str:
        given = f"L = {self.L}, Hdp = {self.Hdp}" + ("" if self.n is None else f", n = {self.n}")
        lines = [f"bounds for {given}"]
        for item in self.bounds:
            lines.append(f"  {item.name:<34} {item.display():<24} {item.formula}")
            lines += [f"  {'':<34} {detail}" for detail in (item.note, f"source: {item.source}") if detail]
        for item in self.applies:
            lines.append(f"  {item.name:<34} {'yes' if item.holds else 'no':<24} {item.condition}")
        return "\n".join(lines)


# -- exact arithmetic ----------------------------------------------------------------------------------------
def _approx(expr: sympy.Expr, what: str) -> float:
    result = float(sympy.N(expr, 30))
    if not math.isfinite(result):
        raise ParameterError(f"{what}: its log2, about {sympy.N(expr, 5)}, is beyond the float range; "
                             "choose a smaller L")
    return result


def _log2(x: int | sympy.Expr) -> sympy.Expr:
    """Exact log2 of a positive number: an Integer for powers of two, else log(x)/log(2) (sympy.log(x, 2) would
    split x into a power of two and a remainder, which reads worse)."""
    x = sympy.sympify(x)
    if x.is_Integer and int(x) & (int(x) - 1) == 0:
        return sympy.Integer(int(x).bit_length() - 1)
    return sympy.log(x) / sympy.log(2)


def _power(base: int, exponent: int) -> tuple[sympy.Integer | None, sympy.Expr]:
    """base^exponent written out when it has at most MAX_EXACT_DIGITS digits, and its exact log2."""
    log2 = sympy.Integer(exponent) * _log2(base)
    if base == 1:
        return sympy.Integer(1), log2
    if exponent * (base.bit_length() - 1) >= _MAX_EXACT_BITS:  # base^exponent >= 2^that > the limit
        return None, log2
    value = base**exponent
    return (sympy.Integer(value) if value < _MAX_EXACT_VALUE else None), log2


def floor_root_power_of_two(n: int, k: int) -> int:
    """floor(n^(2^-k)) exactly, as k nested integer square roots (GMP's, the same floor as math.isqrt's and some
    twenty times faster on the 4*10^5-bit prompt lengths the L = 3 separation walks through, one per size)."""
    n, k = check_int("n", n, 0), check_int("k", k, 0)
    root = gmpy2.mpz(n)
    for _ in range(k):
        if root <= 1:  # fixed point of isqrt; k may be astronomically large
            break
        root = gmpy2.isqrt(root)
    return int(root)


def balanced_prompt_length(L: int, m: int) -> int:
    """Prompt length of composition with seed range m and every n_l = m: N_l = m^(l+1), n = 2 + m + ... + m^L."""
    L, m = check_int("L", L, 1), check_int("m", m, 1)
    return 2 + sum(m**l for l in range(1, L + 1))


def _smallest_balanced_m(L: int, n: int) -> int:
    """The smallest m >= 1 whose balanced prompt length reaches n (binary search; the length grows with m)."""
    high = 1
    while balanced_prompt_length(L, high) < n:
        high *= 2
    low = max(1, high // 2)
    while low < high:
        middle = (low + high) // 2
        if balanced_prompt_length(L, middle) >= n:
            high = middle
        else:
            low = middle + 1
    return low


# -- the statements ------------------------------------------------------------------------------------------
def theorem_1_1_exponent(L: int) -> int:
    """k with Theorem 1.1's condition Hdp <= n^(2^-k): k = 4L + 2."""
    return 4 * check_int("L", L, 1) + 2


def cpw_exponent(L: int) -> int:
    """k with CPW's condition Hdp <= n^(2^-k) for L full-attention layers: k = 4L."""
    return 4 * check_int("L", L, 1)


_THEOREMS = {
    # name: (exponent, source, what it rules out)
    "theorem_1_1": (theorem_1_1_exponent, f"{YE_ET_AL}, Theorem 1.1",
                    "a hybrid with L-1 full-attention layers and up to 2^(3L^2) linear-attention layers per gap"),
    "cpw": (cpw_exponent, CPW, "an L-layer full-attention decoder"),
}


# n = Hdp^(2^k) has log2 n = 2^k log2 Hdp, a float only while 2^k is: k <= 1023, i.e. L <= 255 for both theorems.
# Beyond it no threshold can be stated (and 2^k itself would not fit in memory at the L a typo gives).
_MAX_EXPONENT = 1023


def _theorem(name: str, L: int) -> tuple[int, str, str]:
    """The theorem's exponent k at depth L, its source and the model it rules out."""
    if name not in _THEOREMS:
        raise ParameterError(f"unknown theorem {name!r}; known: {', '.join(_THEOREMS)}")
    exponent_of, source, model = _THEOREMS[name]
    k = exponent_of(L)
    if k > _MAX_EXPONENT:
        raise ParameterError(f"L = {L}: {name}'s threshold n^(2^-{k}) is beyond the float range (its exponent "
                             f"must be at most {_MAX_EXPONENT}); choose a smaller L")
    return k, source, model


def min_prompt_length(theorem: str, L: int, Hdp: int) -> Bound:
    """The smallest prompt length n with Hdp <= n^(2^-k): n = Hdp^(2^k)."""
    k, source, model = _theorem(theorem, L)
    Hdp = check_int("Hdp", Hdp, 1)
    exact, log2 = _power(Hdp, 2**k)
    return Bound(f"{theorem}.min_n", source,
                 f"smallest prompt length n at which {model} cannot solve L-sequential composition with this Hdp",
                 f"n = Hdp^(2^{k})", exact, log2, _approx(log2, f"{theorem}.min_n"),
                 "" if exact is not None else f"more than {MAX_EXACT_DIGITS} digits: given by its exact log2")


def max_Hdp_at(theorem: str, L: int, n: int) -> Bound:
    """The largest integer Hdp with Hdp <= n^(2^-k) at prompt length n."""
    k, source, model = _theorem(theorem, L)
    n = check_int("n", n, 2)
    largest = floor_root_power_of_two(n, k)
    log2 = _log2(largest)
    return Bound(f"{theorem}.max_Hdp", source,
                 f"largest Hdp at this n for which {model} cannot solve L-sequential composition",
                 f"Hdp = floor(n^(2^-{k}))", sympy.Integer(largest), log2, _approx(log2, f"{theorem}.max_Hdp"),
                 f"real threshold n^(2^-{k}) has log2 = {_log2(n) / sympy.Integer(2)**k}")


def balanced_seed_range(theorem: str, L: int, Hdp: int) -> Bound:
    """The smallest m such that composition with m and n_1 = ... = n_{L-1} = m has the theorem's min_n."""
    target = min_prompt_length(theorem, L, Hdp)
    name, statement = f"{theorem}.balanced_m", (f"smallest m with n_1 = ... = n_{{L-1}} = m whose prompt length "
                                                 f"reaches {theorem}.min_n")
    formula = "n = 2 + N_0 + ... + N_{L-1} = 2 + m + m^2 + ... + m^L"
    if target.exact is not None:
        m = _smallest_balanced_m(L, int(target.exact))
        log2 = _log2(m)
        return Bound(name, PROMPT_LAYOUT, statement, formula, sympy.Integer(m), log2, _approx(log2, name))
    # min_n is huge, so m >= 3 and m^L < 2 + m + ... + m^L <= 2 m^L; with (m-1)^L < min_n this brackets log2 m.
    return Bound(name, PROMPT_LAYOUT, statement, formula, None, None, target.approx_log2 / L,
                 "log2 m lies in [(log2 min_n - 1)/L, log2 min_n / L + 2^(-log2 min_n / L)/ln 2); "
                 "approx_log2 = log2 min_n / L")


def linear_layers_per_gap(L: int) -> Bound:
    exact, log2 = _power(2, 3 * check_int("L", L, 1) ** 2)
    return Bound("theorem_1_1.linear_layers_per_gap", f"{YE_ET_AL}, Theorem 1.1",
                 "linear-attention layers allowed in each gap between the L-1 full-attention layers",
                 "2^(3L^2)", exact, log2, _approx(log2, "theorem_1_1.linear_layers_per_gap"))


def linear_state_bits(shape: HeadShape) -> Bound:
    bits = shape.H * (shape.d**2 + shape.d) * shape.p
    log2 = _log2(bits)
    return Bound("linear_state.bits", YE_ET_AL,
                 "bits of recurrent state of one linear-attention layer (an RNN with H(d^2+d) numbers of p bits)",
                 "H * (d^2 + d) * p", sympy.Integer(bits), log2, _approx(log2, "linear_state.bits"))


def max_linear_state_bits(Hdp: int) -> Bound:
    """H(d^2+d)p = Hdp * (d + 1) is largest over H*d*p = Hdp at H = p = 1, d = Hdp."""
    Hdp = check_int("Hdp", Hdp, 1)
    bits = Hdp * (Hdp + 1)
    log2 = _log2(bits)
    return Bound("linear_state.max_bits", YE_ET_AL,
                 "most bits of recurrent state of one linear-attention layer with this Hdp (H = p = 1, d = Hdp)",
                 "Hdp * (Hdp + 1)", sympy.Integer(bits), log2, _approx(log2, "linear_state.max_bits"))


_HIDDEN_CONSTANT = "the paper gives no constant: this is the quantity inside the O/Omega, not a threshold"


def sparse_two_sum_scale(n: int, B: int) -> Bound:
    n, B = check_int("n", n, 2), check_int("B", B, 1)
    scale = B * _log2(n)
    return Bound("theorem_1_2.sparse_scale", f"{YE_ET_AL}, Theorem 1.2",
                 "one layer of (B,k)-sparse attention solving 2-Sum needs Hdp = Omega(this)", "B * log2 n",
                 scale, _log2(scale), _approx(_log2(scale), "theorem_1_2.sparse_scale"),
                 _HIDDEN_CONSTANT)


def full_two_sum_scale(n: int) -> Bound:
    scale = _log2(check_int("n", n, 2))
    return Bound("theorem_1_2.full_scale", f"{YE_ET_AL}, Theorem 1.2",
                 "one layer of full attention solves 2-Sum with Hdp = O(this)", "log2 n",
                 scale, _log2(scale), _approx(_log2(scale), "theorem_1_2.full_scale"),
                 _HIDDEN_CONSTANT)


def network_budget(Hdp: int, n: int) -> Bound:
    """A solving network's Hdp, to set next to the largest Hdp the lower bounds cover at its prompt length."""
    Hdp = check_int("network Hdp", Hdp, 1)
    log2 = _log2(Hdp)
    return Bound("network.Hdp", "the network given (e.g. witness's (L+1)-layer construction, docs/conventions.md §4)",
                 f"Hdp of the given network, which answers prompts of length n = {n}", "H * d * p",
                 sympy.Integer(Hdp), log2, _approx(log2, "network.Hdp"),
                 "upper bound (Ye et al.): L+1 full-attention layers need only polylog(n) Hdp; "
                 "the polylog's degree and constant are not given")


def bounds(L: int, Hdp: int, n: int | None = None, *, B: int | None = None, shape: HeadShape | None = None,
           network_Hdp: int | None = None) -> BoundsReport:
    """Every bound for depth L and budget Hdp; those at a prompt length need n, the sparse 2-Sum one needs B.

    `shape` (H, d, p) refines the linear-attention state bits and must multiply to Hdp. `network_Hdp` is the
    budget of a network that solves the task at prompt length n (witness's construction, say), reported next to
    the thresholds at n; bounds never compiles one itself.
    """
    L, Hdp = check_int("L", L, 1), check_int("Hdp", Hdp, 1)
    if shape is not None and shape.Hdp != Hdp:
        raise ParameterError(f"H*d*p = {shape.H}*{shape.d}*{shape.p} = {shape.Hdp} differs from Hdp = {Hdp}")
    if B is not None and n is None:
        raise ParameterError("B (the sparse block size) needs n, the 2-Sum length")
    if network_Hdp is not None and n is None:
        raise ParameterError("network_Hdp needs n, the prompt length that network answers")
    items: list[Bound] = []
    applies: list[Applies] = []
    for theorem in _THEOREMS:
        items += [min_prompt_length(theorem, L, Hdp), balanced_seed_range(theorem, L, Hdp)]
        if theorem == "theorem_1_1":
            items.append(linear_layers_per_gap(L))
    items.append(max_linear_state_bits(Hdp) if shape is None else linear_state_bits(shape))
    if n is not None:
        n = check_int("n", n, 2)
        for theorem in _THEOREMS:
            k, source, _ = _theorem(theorem, L)
            largest = max_Hdp_at(theorem, L, n)
            items.append(largest)
            # Hdp is an integer, so Hdp <= n^(2^-k) exactly when Hdp <= floor(n^(2^-k)).
            applies.append(Applies(f"{theorem}.applies", source, f"Hdp <= n^(2^-{k})",
                                   Hdp <= largest.value))
        if network_Hdp is not None:
            items.append(network_budget(network_Hdp, n))
        items.append(full_two_sum_scale(n))
        if B is not None:
            items.append(sparse_two_sum_scale(n, B))
    return BoundsReport(L, Hdp, n, B, shape, tuple(items), tuple(applies))
