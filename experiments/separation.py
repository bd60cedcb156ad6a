"""The separation at the theorem's own scale: the (L+1)-layer construction, certified for every input, at a size
where Theorem 1.1 covers its budget.

Theorem 1.1 (Ye et al. 2026): a hybrid with L-1 full-attention layers and up to 2^(3L^2) linear-attention layers
per gap cannot solve L-sequential composition when H d p <= n^(2^-(4L+2)). The construction's own budget grows only
like log n (H = 1, d = d_model = O(L log n), p a few bits), so at some prompt length it falls under that threshold.
There a certificate for every input of the (L+1)-layer network (witness's, re-checked by `verify.checker`) and the
theorem for every hybrid of the same H, d and p (the paper's; witness does not prove it) are statements about
one budget.

The family: L = 1, m = 2^k - 2 (so n = 2^k); L >= 2, m = n_1 = ... = n_{L-1} = 2^k (n = 2 + m + m^2 + ... + m^L).
`separation(L)` walks k upward. At each k the largest p the theorem still covers is
p_max = floor(floor(n^(2^-(4L+2))) / (H d)); every float format of at most p_max bits is tried, fewest bits
first (then fewest exponent bits), by the parametric certifier under `theory` -- except formats `refusals` shows
the checker must refuse from the description and the format alone (the attention weight C = 2 beta overflows the
format, or rounds so far down that the seed's layer cannot single out its key), which are listed with that reason.
The first k at which one verifies is the answer, and its first verifying format is p*: every
split of fewer bits at that k was tried or ruled out, and at every smaller k no format of at most p_max bits
verifies. So the size is the smallest of the family covered at the construction's sound p*, with no assumption
that more bits help. Counts are Python ints throughout; n is written exactly as an expression in k.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import gmpy2

from constructions.composition import Description, describe
from verify import checker
from verify.certify import Construction, certify
from verify.certify.networks import unknown
from verify.checker.numbers import Format
from verify.precision import min_precision
from verify.result import Result, Status
from verify import theorems as theorem_bounds
from witness.arith import arithmetic, parse_format
from witness.arith.formats import Float
from witness.errors import FileFormatError, ParameterError
from witness.tasks.base import check_int

SEMANTICS = "theory"
#: The depths whose separation fits a 2-core, 24 GiB machine. L = 3 does since the pre-test (`refusals`) rules out
#: every format below its answer without a certify: one certify of the 3.3-million-direction network at
#: k = 136,336 took 240 CPU-s and 7.5 GiB (docs/separation.md). L = 4 starts near log2 n = 7.3e6, d_model 6.6e7.
FITS = (1, 2, 3)
#: The float formats the checker reasons about (verify/checker/numbers.py): exponent 2..9, mantissa 1..24.
EXPONENTS = range(2, 10)
MANTISSAS = range(1, 25)


def family(L: int, k: int) -> Construction:
    L, k = check_int("L", L, 1), check_int("k", k, 1)
    if L == 1:
        if k < 2:
            raise ParameterError("the L = 1 family has m = 2^k - 2, so k >= 2")
        return Construction(1, 2**k - 2)
    return Construction(L, 2**k, (2**k,) * (L - 1))


def prompt_length_text(L: int, k: int) -> str:
    """n exactly, as an expression in k (the decimal digits of n run to thousands)."""
    if L == 1:
        return f"2^{k}"
    return " + ".join([f"2^{k * l}" for l in range(L, 0, -1)] + ["2"])


def budget(target: Construction, bits: int) -> dict[str, int]:
    """H, d_head, d_model, d = max(d_head, ceil(d_model / H)), p, Hdp from the parametric description (no file)."""
    description = describe(target.L, target.m, target.n)
    H = 1
    d = max(description.d_head, -(-description.d_model // H))
    return {"H": H, "d_head": description.d_head, "d_model": description.d_model, "d": d, "p": bits,
            "Hdp": H * d * bits}


def covering(L: int, n: int, Hdp: int) -> dict[str, Any]:
    """Theorem 1.1's and CPW's conditions at this n and Hdp, exactly: Hdp <= n^(2^-k) iff Hdp <= floor(n^(2^-k))
    (Hdp is an integer), and the floor is k nested integer square roots."""
    out = {}
    for theorem, exponent in (("theorem_1_1", theorem_bounds.theorem_1_1_exponent(L)),
                              ("cpw", theorem_bounds.cpw_exponent(L))):
        largest = theorem_bounds.floor_root_power_of_two(n, exponent)
        out[theorem] = {"condition": f"Hdp <= n^(2^-{exponent})", "largest_Hdp": largest, "covered": Hdp <= largest}
    return out


#: The reason of a format the checker does not reason about; such trials are not listed.
OUTSIDE = "outside the formats the checker reasons about"


def refusals(description: Description) -> Callable[[Float], str | None]:
    """`refusal(fmt)`: why the parametric checker must refuse `fmt` for the construction `description` describes,
    decided from the two alone with no proof built; None when only certify can tell. A format refused here is one
    certify cannot verify, so skipping it leaves p* unchanged (tests/experiments/test_separation.py compares the two
    on small sizes). Two reasons, each a step of verify/checker/parametric.py:

    * The weight C = 2 beta (layer 0's query weight on the seed's indicator, the largest weight) rounds outside the
      format: the checker rounds every weight to the format and refuses an overflow (`Sparse`). Decided with the
      checker's own rounding, so it is that refusal exactly (a C just above the largest value rounds down to it).
    * C rounds to C' <= ln(n - 1). Layer 0's key reads the seed's indicator alone, so the seed scores C' and each
      of the n - 1 other keys 0, and the checker's off-target bound (step 3: each key's mass rounded up) is at
      least (n - 1) e^(-C') >= 1: its target weight pi = 1/(1 + R), rounded down, is at most 1/2. Step 4's fetched
      interval for a set bit, [pi v - (1 - pi) V, v] with V >= |v|, and for a clear bit, [-v, -pi v + (1 - pi) V],
      then both contain 0 (their rounded ends too), so whatever the MLP is, its output at 0 is the same for a set
      and a clear bit: either it varies over an interval (refused there) or it writes a constant, and the next
      layer's query, or the readout, then finds a constant where the checker requires the code of i_0. The
      checker's stricter demand, that the construction's sign MLP see a fetched value of at least 1/2, is left to
      certify: this test holds for any MLP.

    ln(n - 1) is bounded once per size (the prompt length of an L = 3 size costs as much as the test itself)."""
    C = Fraction(description.C)
    with gmpy2.context(precision=256, round=gmpy2.RoundDown):  # a lower bound: C' at or below it is decided
        ln_keys = Fraction(*gmpy2.log(gmpy2.mpz(description.task.prompt_length - 1)).as_integer_ratio())

    def refusal(fmt: Float) -> str | None:
        try:
            rounded = Format("float", mantissa=fmt.mantissa, exponent=fmt.exponent).round(C)
        except checker.Refused:
            return f"the weight C = 2 beta = {C} overflows {fmt.name}"
        if rounded <= ln_keys:
            return (f"the weight C = 2 beta = {C} rounds to {rounded} in {fmt.name}, at most ln(n - 1): layer 0's "
                    f"off-target mass is at least 1, so no MLP can tell the seed's bits")
        return None

    return refusal


def size_checker(k: int, target: Construction, progress: Callable[[str], None] | None, calls: list[int]):
    """The checker `verify.precision.min_precision` runs at size k: the parametric certifier under `theory`, except
    for formats outside EXPONENTS and MANTISSAS (not tried) and formats `refusals` rules out (listed with its reason,
    with no certify call). `calls` counts the certify calls."""
    refusal = refusals(describe(target.L, target.m, target.n))

    def check_format(fmt: Float, semantics: str) -> Result:
        arith = arithmetic(fmt, semantics)
        if fmt.exponent not in EXPONENTS or fmt.mantissa not in MANTISSAS:
            return unknown(arith, OUTSIDE)
        reason = refusal(fmt)
        if reason is not None:
            return unknown(arith, reason)
        result = certify(target, arith)
        calls[0] += 1
        if progress:
            progress(f"k = {k}: {fmt.name} {result.status.value}")
        return result

    return check_format


def separation(L: int, progress: Callable[[str], None] | None = None, k_max: int = 10**6) -> dict[str, Any]:
    """The smallest covered size of the family, certified there (module docstring). Returns the summary, with the
    certificate and the trials. At each size, p* within the theorem's p_max is `verify.precision.min_precision`'s
    every-split search (fewest bits first, then fewest exponent bits), which keeps the certificate it found."""
    L = check_int("L", L, 1)
    scanned, calls = 0, [0]
    for k in range(2 if L == 1 else 1, k_max + 1):
        target = family(L, k)
        n = target.task.prompt_length
        shape = budget(target, 1)
        p_max = theorem_bounds.floor_root_power_of_two(n, theorem_bounds.theorem_1_1_exponent(L)) // (
            shape["H"] * shape["d"])
        if p_max < 4:  # no float format has fewer than 4 bits
            continue
        scanned += 1
        found = min_precision(size_checker(k, target, progress, calls), "float", SEMANTICS, max_bits=p_max)
        trials = [{"format": trial.format, "p": trial.p, "status": trial.status, "reason": trial.note}
                  for trial in found.trials if trial.note != OUTSIDE]
        if found.status is Status.VERIFIED:
            return _summary(L, k, target, parse_format(found.format), found.certificate, trials, scanned, calls[0])
    raise ParameterError(f"no size of the L = {L} family up to k = {k_max} is covered and certified")


def recheck(folder: str | Path) -> dict[str, Any]:
    """A separation `write` stored in `folder`, checked again without its scan: the trusted checker confirms the
    certificate, which must claim the family's member at the stored k in the stored format, and both theorems'
    conditions are evaluated afresh at its n and budget, by the checker and by `verify.theorems`, which must agree
    (a ParameterError or `checker.Refused` says what failed).
    Not redone: the scan below k, which showed that no smaller size of the family is covered and certified; the
    summary keeps the stored scan's counts (`sizes_scanned`, `certify_calls`)."""
    folder = Path(folder)
    try:
        stored = json.loads((folder / "separation.json").read_text(encoding="utf-8"))
        certificate = checker.load_certificate(folder / "certificate.json")
        L, k, fmt = stored["params"]["L"], stored["k"], parse_format(stored["format"])
        scan = (stored["trials_at_k"], stored["sizes_scanned"], stored["certify_calls"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FileFormatError(f"{folder}: not a separation `witness separation` wrote ({exc})") from None
    target = family(L, k)
    claim = certificate.get("claim", {}) if isinstance(certificate, dict) else {}
    if (claim.get("format"), claim.get("semantics")) != (fmt.name, SEMANTICS):
        raise ParameterError(f"{folder}: the certificate claims {claim.get('format')} {claim.get('semantics')}, "
                             f"the separation {fmt.name} {SEMANTICS}")
    summary = _summary(L, k, target, fmt, certificate, *scan)
    if not summary["covered"]:
        raise ParameterError(f"{folder}: Theorem 1.1 does not cover Hdp = {summary['Hdp']} at this n")
    return summary


def _summary(L, k, target, fmt, certificate, trials, scanned, tried) -> dict[str, Any]:
    n = target.task.prompt_length
    found = budget(target, fmt.bits)
    cover = covering(L, n, found["Hdp"])
    confirmed = checker.check(certificate)  # the trusted checker, once more, on exactly what is written
    proven = confirmed["params"]
    if (proven["L"], proven["m"], tuple(proven["n"])) != (target.L, target.m, tuple(target.n)) \
            or confirmed["budget"] != found:
        raise ParameterError(f"the certificate proves L = {proven['L']} with another m, n or budget than the "
                             f"family's size at k = {k}")
    # The checker evaluates both conditions too, with its own code: the two must agree.
    for theorem, entry in cover.items():
        checked = confirmed["covering"][theorem]
        if (checked["covered"], _parse_int(checked["largest_Hdp"])) != (entry["covered"], entry["largest_Hdp"]):
            raise ParameterError(f"the checker and verify.theorems evaluate {theorem}'s condition differently")
    return {
        "params": {"L": L, "m": _int(target.m), "n": [_int(v) for v in target.n]},
        "k": k, "family": "m = 2^k - 2 (n = 2^k)" if L == 1 else "m = n_1 = ... = n_{L-1} = 2^k",
        "prompt_length": prompt_length_text(L, k), "prompt_length_log2": confirmed_log2(n),
        **{key: found[key] for key in ("H", "d_head", "d_model", "d", "p", "Hdp")},
        "format": fmt.name, "semantics": SEMANTICS, "beta": describe(target.L, target.m, target.n).beta,
        "theorem": {"name": "Theorem 1.1", "source": f"{theorem_bounds.YE_ET_AL}, Theorem 1.1",
                    "statement": f"a hybrid with {L - 1} full-attention layers and up to 2^{3 * L * L} linear-"
                                 f"attention layers per gap cannot solve {L}-sequential composition when H d p <= "
                                 f"n^(2^-{4 * L + 2})", **_json_ints(cover["theorem_1_1"])},
        "cpw": {"name": "CPW", "source": theorem_bounds.CPW,
                "statement": f"a {L}-layer full-attention decoder cannot solve {L}-sequential composition when "
                             f"H d p <= n^(2^-{4 * L})", **_json_ints(cover["cpw"])},
        "covered": confirmed["covered"],
        "trials_at_k": trials, "sizes_scanned": scanned, "certify_calls": tried,
        "certificate": certificate, "inputs_log2": confirmed["inputs_log2"],
    }


def confirmed_log2(n: int) -> str:
    with gmpy2.context(precision=128):
        text = format(gmpy2.log2(gmpy2.mpz(n)), ".10g")
    return text[:-2] if text.endswith(".0") else text


def _int(x: int) -> int | str:
    """An int for JSON, or its hexadecimal text beyond 4,000 decimal digits (Python's limit for str(int))."""
    return x if x.bit_length() <= 13_000 else hex(x)


def _parse_int(x: int | str) -> int:
    """An int the checker wrote: itself, or its hexadecimal text."""
    return x if isinstance(x, int) else int(x, 16)


def _json_ints(entry: dict) -> dict:
    return {**entry, "largest_Hdp": str(entry["largest_Hdp"])}


def write(summary: dict[str, Any], out: Path) -> None:
    """DIR/certificate.json, DIR/separation.json (everything but the certificate) and DIR/separation.md."""
    out.mkdir(parents=True, exist_ok=True)
    checker.write_certificate(summary["certificate"], out / "certificate.json")
    brief = {key: value for key, value in summary.items() if key != "certificate"}
    brief["certificate"] = "certificate.json"
    (out / "separation.json").write_text(json.dumps(brief, indent=1), encoding="utf-8")
    (out / "separation.md").write_text(markdown(summary), encoding="utf-8")


def markdown(s: dict[str, Any]) -> str:
    L, k = s["params"]["L"], s["k"]
    theorem, cpw = s["theorem"], s["cpw"]
    below = [t for t in s["trials_at_k"] if t["p"] < s["p"]]
    lines = [
        f"# The separation at L = {L}, at the theorem's own scale",
        "",
        f"Written by `witness separation --L {L} --out DIR`. The family is {s['family']}; k = {k} is the smallest k "
        f"at which the (L+1)-layer construction, certified at its p*, has a budget Theorem 1.1 covers "
        f"({s['sizes_scanned']} sizes scanned, {s['certify_calls']} certify runs).",
        "",
        "## The network",
        "",
        f"`constructions/composition.py` for composition L = {L}, m = {'2^' + str(k) + ' - 2' if L == 1 else '2^' + str(k)}"
        + (f", n_1 = ... = n_{L - 1} = 2^{k}" if L > 1 else "") + f": {L + 1} layers of causal softmax attention "
        f"with one head each, an MLP after each; attention scale beta = {s['beta']}. Prompt length "
        f"n = {s['prompt_length']} (log2 n = {s['prompt_length_log2']}).",
        "",
        "| H | d_head | d_model | d | p | Hdp | format | semantics |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
        f"| {s['H']} | {s['d_head']} | {s['d_model']} | {s['d']} | {s['p']} | {s['Hdp']} | {s['format']} | "
        f"{s['semantics']} |",
        "",
        f"p* = {s['p']}: {s['format']} is the first float format, fewest bits first, that certify verifies at this "
        f"size; of fewer bits, {len(below)} splits were tried or overflow (none verifies):",
        "",
        *[f"* {t['format']}: {t['status']} ({t['reason']})" for t in below],
        "",
        "## The covering inequality, evaluated exactly",
        "",
        f"Hdp <= n^(2^-{4 * L + 2}) holds for an integer Hdp exactly when Hdp <= floor(n^(2^-{4 * L + 2})), "
        f"{4 * L + 2} nested integer square roots of n:",
        "",
        f"    floor(n^(2^-{4 * L + 2})) = {theorem['largest_Hdp']}    Hdp = {s['Hdp']}    covered: "
        f"{'yes' if theorem['covered'] else 'no'}",
        "",
        f"**{theorem['name']}** ({theorem['source']}): {theorem['statement']}. At this n and this budget it "
        f"{'applies' if theorem['covered'] else 'does not apply'}.",
        "",
        f"**CPW** ({cpw['source']}): {cpw['statement']}. Threshold floor(n^(2^-{4 * L})) = {cpw['largest_Hdp']}: "
        f"at the same budget it {'applies' if cpw['covered'] else 'does not apply'}.",
        "",
        "## Who proves what",
        "",
        f"* **witness proves** that this (L+1)-layer network answers every one of the 2^{s['inputs_log2']} inputs of "
        f"the family at {s['format']} under `{s['semantics']}` semantics (exact arithmetic inside a block, every "
        "stored vector rounded): `witness check-certificate certificate.json` re-derives the proof with the "
        "trusted checker (docs/certificates.md) and reports the budget above.",
        f"* **The paper proves**, not witness, that no hybrid with {L - 1} full-attention layers (and up to "
        f"2^{3 * L * L} linear-attention layers per gap) of the same H, d and p solves the task at this n.",
        "* Together: at this budget, L+1 full-attention layers suffice and L - 1 full plus linear layers do not; the "
        "separation, at the theorem's own scale.",
        "",
    ]
    return "\n".join(lines)
