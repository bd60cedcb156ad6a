"""certify_composition: the proof for the composition construction at sizes no table could be built for.

Under `theory` semantics the argument reads the construction's description (`constructions.composition.describe`):
the small per-layer weights, and the embedding as rules per class of positions and tokens. Nothing of size n is
ever built; counts such as the size of a table are Python ints.

At the read position the residual stream holds constants and ±1 codes (the query digits w_l, and after layer l
the code of i_l). Per layer the score bilinear form M = W_Q W_K^T must pair each query code bit with exactly one
key address bit, all with one weight beta > 0, and give constants otherwise. Then a key of class P whose address
code differs from the query's in h of its b_P paired bits scores top_P - 2 beta h, and at most C(b_P, h) keys of P
do so; the off-target mass is bounded per code distance,

    R <= sum_P min(count_P, (1 + e^{-2 beta})^{b_P}) e^{top_P - s*}   (minus the target itself in its block),

with every exponential enclosed by MPFR with directed rounding. The target must be the table entry the task reads.
The fetched coordinates lie in p* v* +- (1 - p*) max|v| with p* >= 1/(1 + R); the MLP is then evaluated exactly on
every format value of that interval (`verify.certify._mlp_exact_output`) and must write the fetched code bit exactly.
The readout decodes the last slot: logit_v = <code(v), code(i_L)>, margin 2.

`strict` semantics rounds every one of the n terms of the softmax sums in order, which has no closed form; it is
certified on the materialised network (`verify.certify.certify`) up to `STRICT_PROMPT_LIMIT` tokens and is
`unknown` beyond.
"""

from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import numpy as np

from constructions.composition import Description, build, describe
from verify.enclosure import Rounding, Unknown
from verify.certificate import CertificateError, new_certificate
from verify.certify import _residual_bounds, _mlp_exact_output, certify, verified_result
from verify.result import Result, Status
from witness.arith.formats import parse_format
from witness.errors import ParameterError
from witness.tasks import Composition

#: Strict semantics is certified on the materialised network up to this many prompt tokens.
STRICT_PROMPT_LIMIT = 20_000
_PRECISION = 256


def _context(rounding) -> gmpy2.context:
    return gmpy2.context(precision=_PRECISION, round=rounding)


def certify_composition(L: int, m: int, n, fmt, semantics: str) -> Result:
    """Certify the composition construction for every input of composition(L, m, n) at `fmt` / `semantics`."""
    fmt = parse_format(fmt) if isinstance(fmt, str) else fmt
    task = Composition(L, m, tuple(n))
    described = {"format": fmt.name, "semantics": semantics, "p": fmt.bits}
    if semantics == "strict":
        if task.prompt_length > STRICT_PROMPT_LIMIT:
            return Result(Status.UNKNOWN, "certify", described, 0, 0, None,
                          {"reason": f"strict semantics is certified on the built network up to "
                                     f"{STRICT_PROMPT_LIMIT} tokens; this prompt has {task.prompt_length}"})
        from witness.arith import arithmetic

        try:
            arith = arithmetic(fmt, semantics)
        except ParameterError as exc:
            return Result(Status.UNKNOWN, "certify", described, 0, 0, None, {"reason": str(exc)})
        return certify(build(L, m, tuple(n)), arith)
    try:
        rounding = Rounding(fmt, semantics)
        certificate = new_certificate(fmt.name, semantics, {"kind": "parametric", "construction": "composition",
                                                            "params": task.params()})
        _Parametric(describe(L, m, tuple(n)), rounding, certificate).run()
    except Unknown as reason:
        return Result(Status.UNKNOWN, "certify", described, 0, 0, None, {"reason": str(reason)})
    return verified_result(task, described, certificate)


class _LayersOnly:
    """What `_residual_bounds` needs of a network: its layers."""

    def __init__(self, layers):
        self.layers = layers


class _Parametric:
    def __init__(self, description: Description, rounding: Rounding, certificate: dict):
        self.d = description
        self.r = rounding
        self.task = description.task
        self.labels = description.basis.labels
        self.certificate = certificate
        self.weights = {}
        for l, layer in enumerate(description.layers):
            for name, array in layer.mixer.arrays().items():
                self.weights[f"blocks.{l}.attn.{name}"] = rounding.round(array, f"weight blocks.{l}.attn.{name}")
            for name, array in layer.mlp.arrays().items():
                self.weights[f"blocks.{l}.mlp.{name}"] = rounding.round(array, f"weight blocks.{l}.mlp.{name}")
        if not np.array_equal(rounding.round(np.array([1.0, -1.0]), "a code"), [1.0, -1.0]):
            raise Unknown(f"{rounding.format.name} does not hold the codes ±1")

    # -- the embedding rules --------------------------------------------------------------------------------
    def _group(self, name: str) -> list[int]:
        return [self.labels.index(name)] if name in self.labels else self.d.basis.group(name)

    def _rule_dirs(self, rules) -> dict[int, tuple]:
        """direction -> ("const", value) or ("code", source, bit) for one embedding class."""
        entries = {}
        for rule in rules:
            if rule.source == "constant":
                entries[self.labels.index(rule.group)] = ("const", Fraction(rule.constant))
            else:
                for bit, d in enumerate(self.d.basis.group(rule.group)[: rule.width]):
                    entries[d] = ("code", rule.source, bit)
        return entries

    def _magnitudes(self, classes) -> np.ndarray:
        row = np.zeros((1, len(self.labels)))
        for embedding_class in classes:
            for d, entry in self._rule_dirs(embedding_class.rules).items():
                row[0, d] = max(row[0, d], abs(float(entry[1])) if entry[0] == "const" else 1.0)
        return np.concatenate([row, -row])  # codes are symmetric; constants are bounded either way

    def run(self) -> None:
        weights = dict(self.weights)
        weights["embed.W_E"] = self.r.round(self._magnitudes(self.d.tokens), "the token embedding")
        weights["pos_embed.W_pos"] = self.r.round(self._magnitudes(self.d.positions), "the position embedding")
        slot = self._group(self.d.readout_group)
        W_U = np.zeros((len(self.labels), 2))
        W_U[slot, :] = 1.0
        weights["unembed.W_U"], weights["unembed.b_U"] = W_U, np.zeros(2)
        self.certificate["bounds"] = _residual_bounds(_LayersOnly(self.d.layers), weights, self.r,
                                                       self.task.prompt_length)
        # The read position (segment w) holds a query token.
        state = {d: entry for d, entry in self._rule_dirs(self._position_class("w").rules).items()}
        for d, (_, _, bit) in self._rule_dirs(self._token_class("query").rules).items():
            state[d] = ("code", f"w{self._digit_of(d)}", bit)
        for l in range(self.task.L + 1):
            state = self._layer(l, state)
        self._readout(state)

    def _position_class(self, name: str):
        return next(c for c in self.d.positions if c.name == name)

    def _token_class(self, name: str):
        return next(c for c in self.d.tokens if c.name == name)

    def _digit_of(self, d: int) -> int:
        for rule in self._token_class("query").rules:
            if d in self.d.basis.group(rule.group)[: rule.width]:
                return rule.digit
        raise Unknown(f"direction {self.labels[d]} is not a query digit")

    # -- one layer --------------------------------------------------------------------------------------------
    def _layer(self, l: int, state: dict) -> dict:
        w = self.weights
        p = f"blocks.{l}.attn"
        for bias in ("b_Q", "b_K", "b_V", "b_O"):
            if np.any(w[f"{p}.{bias}"]):
                raise Unknown(f"{p}.{bias} is not zero")
        W_Q, W_K, W_V, W_O = (w[f"{p}.{k}"][0] for k in ("W_Q", "W_K", "W_V", "W_O"))
        M_lo, M_hi = self.r.point_dot(W_Q, W_K.T, rounded=False)
        if not np.array_equal(M_lo, M_hi):
            raise Unknown(f"{p}: the score form W_Q W_K^T is not exact")
        M = M_lo
        query_rows = [int(i) for i in np.flatnonzero(M.any(axis=1))]
        for i in query_rows:
            if i not in state:
                raise Unknown(f"{p}'s query reads {self.labels[i]}, which is empty at the read position")
        const_rows = [i for i in query_rows if state[i][0] == "const"]
        code_rows = [i for i in query_rows if state[i][0] == "code"]

        classes = []
        for position_class in self.d.positions:
            entries = self._rule_dirs(position_class.rules)
            const = sum((Fraction(float(M[i, k])) * state[i][1] * entries[k][1]
                         for i in const_rows for k in entries if entries[k][0] == "const"), Fraction(0))
            if any(M[i, k] for i in const_rows for k in entries if entries[k][0] == "code"):
                raise Unknown(f"{p}: a key's address code enters its score without the query's code")
            if any(M[i, k] for i in code_rows for k in entries if entries[k][0] == "const"):
                raise Unknown(f"{p}: the query's code meets a constant key direction")
            pairs = []
            for i in code_rows:
                partners = [k for k in entries if entries[k][0] == "code" and M[i, k]]
                if len(partners) > 1:
                    raise Unknown(f"{p}: {self.labels[i]} meets several address bits")
                pairs += [(i, k) for k in partners]
            if len({k for _, k in pairs}) != len(pairs):
                raise Unknown(f"{p}: an address bit meets several query bits")
            weights_seen = {float(M[i, k]) for i, k in pairs}
            segment = self.task.segment(position_class.name)
            classes.append({"name": position_class.name, "count": segment.length, "const": const,
                            "pairs": pairs, "entries": entries, "weights": weights_seen})
        betas = set().union(*(c["weights"] for c in classes))
        if len(betas) > 1 or any(b <= 0 for b in betas):
            raise Unknown(f"{p}: the address bits are not all weighted by one beta > 0")
        beta = Fraction(betas.pop()) if betas else Fraction(0)
        for c in classes:
            c["top"] = c["const"] + beta * len(c["pairs"])
        target = max(classes, key=lambda c: c["top"])
        expected = "z0" if l == 0 else f"z{l}"
        if target["name"] != expected or sum(c["top"] == target["top"] for c in classes) > 1:
            raise Unknown(f"{p}'s best keys are in {target['name']}, but the task reads {expected} at this step")
        self._check_target_address(l, target, state)

        mass, per_class = self._off_target_mass(target, classes, beta)
        with _context(gmpy2.RoundDown):
            p_low = float(gmpy2.mpfr(1) / (1 + mass))
        mixed_lo, mixed_hi = self._fetched(W_V, p_low)
        head_lo, head_hi = self.r.store(*self.r.matmul(mixed_lo, mixed_hi, W_O, "a head output"), "a head output")
        next_state = self._after_mlp(l, state, head_lo, head_hi, W_V, W_O)
        fetched = np.flatnonzero(W_O.any(axis=0))
        self.certificate["layers"].append({
            "layer": l, "beta": float(beta), "target_class": target["name"], "target_score": float(target["top"]),
            "classes": per_class, "off_target_mass": float(mass), "target_weight_at_least": p_low,
            "fetched_if_bit_set": [float(head_lo[0, fetched].min()), float(head_hi[0, fetched].max())],
            "fetched_if_bit_clear": [float(head_lo[1, fetched].min()), float(head_hi[1, fetched].max())],
        })
        return next_state

    def _check_target_address(self, l: int, target: dict, state: dict) -> None:
        """The target block's address bits must meet, bit for bit, the query's codes of (w_{l-1}, i_{l-1})."""
        if l == 0:
            if target["pairs"]:
                raise Unknown("blocks.0.attn: the seed's key has address bits")
            return
        address_bits = {k for k, entry in target["entries"].items() if entry[0] == "code"}
        if {k for _, k in target["pairs"]} != address_bits:
            raise Unknown(f"blocks.{l}.attn: some address bit of z{l} is not matched by the query")
        for i, k in target["pairs"]:
            _, source, key_bit = target["entries"][k]
            _, holds, query_bit = state[i]
            wanted = f"i{l - 1}" if source == "address_low" else f"w{l - 1}"
            if holds != wanted or query_bit != key_bit:
                raise Unknown(f"blocks.{l}.attn: address bit {self.labels[k]} meets {self.labels[i]}, which holds "
                              f"bit {query_bit} of {holds}, not bit {key_bit} of {wanted}")

    def _off_target_mass(self, target: dict, classes: list[dict], beta: Fraction):
        """Upper bound on sum over non-target keys of exp(score - target score), per code distance."""
        per_class = []
        with _context(gmpy2.RoundUp):
            total = gmpy2.mpfr(0)
            near = gmpy2.exp(gmpy2.mpfr(-2 * beta.numerator) / beta.denominator)  # e^{-2 beta}, rounded up
            for c in classes:
                drop = target["top"] - c["top"]
                scale = gmpy2.exp(-(gmpy2.mpfr(drop.numerator) / drop.denominator)) if drop else gmpy2.mpfr(1)
                bits = len(c["pairs"])
                by_distance = (1 + near) ** bits
                if c is target:
                    mass = scale * min(by_distance - 1, gmpy2.mpfr(c["count"] - 1) * near)
                else:
                    mass = scale * min(by_distance, gmpy2.mpfr(c["count"]))
                total += mass
                per_class.append({"class": c["name"], "keys": str(c["count"]), "score_below_target": float(drop),
                                  "paired_bits": bits, "mass_at_most": float(mass)})
        return total, per_class

    def _fetched(self, W_V: np.ndarray, p_low: float):
        """The mixed vector for the target's value bit set (row 0) and clear (row 1) in every coordinate:
        p* v* + (1 - p*) [-max|v|, max|v|] with p* in [p_low, 1]."""
        value_rows = [int(i) for i in np.flatnonzero(W_V.any(axis=1))]
        token_dirs = {}
        for token_class in self.d.tokens:
            token_dirs.update(self._rule_dirs(token_class.rules))
        for i in value_rows:
            if i not in token_dirs:
                raise Unknown(f"the values read {self.labels[i]}, which no token writes")
        if (np.count_nonzero(W_V, axis=0) > 1).any():
            raise Unknown("a value coordinate mixes several token directions")
        largest = np.zeros(W_V.shape[1])
        for token_class in self.d.tokens:
            entries = self._rule_dirs(token_class.rules)
            size = np.zeros(W_V.shape[1])
            for d, entry in entries.items():
                size += np.abs(W_V[d]) * (abs(float(entry[1])) if entry[0] == "const" else 1.0)
            largest = np.maximum(largest, size)
        target_class = self._rule_dirs(self._token_class("value").rules)
        signed = np.zeros(W_V.shape[1])
        for d, entry in target_class.items():
            if entry[0] != "code":
                raise Unknown("a value token carries a constant in its value directions")
            signed += W_V[d]
        rows = np.stack([signed, -signed])
        other = 1 - p_low
        lo = np.minimum(rows * p_low, rows) - other * largest
        hi = np.maximum(rows * p_low, rows) + other * largest
        return np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)

    def _after_mlp(self, l: int, state: dict, head_lo, head_hi, W_V, W_O) -> dict:
        """The read position's state after layer l: the MLP must write the fetched code exactly."""
        p = f"blocks.{l}.mlp"
        W_in, W_out = self.weights[f"{p}.W_in"], self.weights[f"{p}.W_out"]
        attn_writes = set(np.flatnonzero(W_O.any(axis=0)).tolist())
        mlp_writes = set(np.flatnonzero(W_out.any(axis=0)).tolist()) | set(
            np.flatnonzero(self.weights[f"{p}.b_out"]).tolist())
        if not set(np.flatnonzero(W_in.any(axis=1)).tolist()) <= attn_writes:
            raise Unknown(f"{p} reads directions its attention layer does not write")
        if (np.count_nonzero(W_O, axis=0) > 1).any():
            raise Unknown(f"blocks.{l}.attn: an output direction mixes several head coordinates")
        for d in attn_writes | mlp_writes:
            if d in state and not (state[d] == ("const", Fraction(0))):
                raise Unknown(f"layer {l} writes {self.labels[d]}, which is not empty at the read position")
        new_state = {d: entry for d, entry in state.items() if d not in attn_writes | mlp_writes}
        value_bit = {}  # head coordinate -> bit of the value code it carries
        for bit, d in enumerate(self.d.basis.group("val")):
            for i in np.flatnonzero(W_V[d]):
                value_bit[int(i)] = bit
        for d in sorted(attn_writes | mlp_writes):
            outcome = [_mlp_exact_output(self.r, self.weights, l, d, head_lo[row], head_hi[row], None, self.labels,
                                         {}) for row in (0, 1)]
            if outcome[0] == outcome[1]:
                new_state[d] = ("const", outcome[0])
                continue
            if outcome != [Fraction(1), Fraction(-1)]:
                raise Unknown(f"{p} writes {self.labels[d]} = {outcome} for a set / clear bit, not the code ±1")
            sources = {value_bit.get(int(i)) for f in np.flatnonzero(W_in[:, np.flatnonzero(W_out[:, d])].any(axis=1))
                       for i in np.flatnonzero(W_O[:, f])}
            if len(sources) != 1 or None in sources:
                raise Unknown(f"{p}: {self.labels[d]} does not carry a single bit of the fetched value")
            new_state[d] = ("code", f"i{l}", sources.pop())
        return new_state

    def _readout(self, state: dict) -> None:
        slot = self._group(self.d.readout_group)
        held = [state.get(d) for d in slot]
        L = self.task.L
        if any(entry is None or entry[0] != "code" or entry[1] != f"i{L}" or entry[2] != bit
               for bit, entry in enumerate(held)):
            raise Unknown(f"{self.d.readout_group} does not hold the code of the answer i_{L}")
        # logit_v = <code(v), code(i_L)> = b - 2 hamming(v, i_L): the answer's logit is the unique best, by 2.
        self.certificate["readout"] = {"rule": f"logit_v = <code(v), {self.d.readout_group}>", "code_bits": len(slot),
                                       "worst_margin": 2.0}


def check_parametric(certificate: dict, fmt) -> dict:
    """Recompute the parametric certificate's per-layer claims from the construction's description."""
    params = certificate["network"]["params"]
    if certificate["network"].get("construction") != "composition":
        raise CertificateError("the certificate names a construction this checker does not know")
    description = describe(params["L"], params["m"], tuple(params["n"]))
    task = description.task
    layers = certificate["layers"]
    if len(layers) != task.L + 1:
        raise CertificateError(f"the certificate covers {len(layers)} layers, the construction has {task.L + 1}")
    for l, entry in enumerate(layers):
        beta = Fraction(entry["beta"])
        paired = any(int(cls["paired_bits"]) for cls in entry["classes"])
        if paired and beta != Fraction(float(fmt.round(np.array([description.beta]))[0])):
            raise CertificateError(f"layer {l}: beta {entry['beta']} is not the construction's (rounded) beta")
        recomputed = 0.0
        for cls in entry["classes"]:
            count = int(cls["keys"])
            if count != task.segment(cls["class"]).length:
                raise CertificateError(f"layer {l}: class {cls['class']} has {task.segment(cls['class']).length} keys")
            drop, bits = float(cls["score_below_target"]), int(cls["paired_bits"])
            near = math.exp(-2 * float(beta))
            if cls["class"] == entry["target_class"]:
                bound = min((1 + near) ** bits - 1, (count - 1) * near)
            else:
                bound = math.exp(-drop) * min((1 + near) ** bits, count)
            if float(cls["mass_at_most"]) < bound * (1 - 1e-12):
                raise CertificateError(f"layer {l}: the mass claimed for class {cls['class']} is too small")
            recomputed += float(cls["mass_at_most"])
        if float(entry["off_target_mass"]) < recomputed * (1 - 1e-12):
            raise CertificateError(f"layer {l}: the off-target mass is less than the sum over classes")
        if entry["target_weight_at_least"] > 1 / (1 + float(entry["off_target_mass"])) * (1 + 1e-12):
            raise CertificateError(f"layer {l}: the target weight claimed exceeds 1 / (1 + R)")
        # The fetch is p* v* plus at most (1 - p*) of other values of magnitude <= 1: at least 2 p* - 1 > 0.
        set_lo, clear_hi = entry["fetched_if_bit_set"][0], entry["fetched_if_bit_clear"][1]
        floor = float(fmt.round(np.array([2 * entry["target_weight_at_least"] - 1 + 1e-12]))[0])  # stored
        if not (0 < set_lo <= floor and 0 > clear_hi >= -floor):
            raise CertificateError(f"layer {l}: the fetched interval does not follow from the target weight")
    if certificate["readout"]["worst_margin"] <= 0:
        raise CertificateError("the readout margin is not positive")
    return {"confirmed": True, "layers": len(layers), "parametric": True}
