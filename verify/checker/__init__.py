"""The trusted checker: confirms or refuses a certificate, re-deriving every step of its proof.

A leaf package: it imports the standard library, numpy, gmpy2 and safetensors, and nothing of `witness`,
`constructions` or the rest of `verify` (tests/verify/checker/test_numbers.py reads its imports). It has its own file
loader (`files`), its own exact rounding and exponentials (`numbers`), its own task definitions (`tasks`) and its own
model of the two semantics (written out in docs/certificates.md and above each proof).

A certificate is a JSON object

    {"kind": "witness-certificate", "version": 2,
     "claim": {"task": ..., "params": {...}, "format": "fp16", "semantics": "strict" | "theory",
               "network": {"sha256": ...}  (a weights file), or {"description": {...}, "sha256": ...}  (a parametric
                          construction, named by the sha256 of its sorted-key JSON)},
     "proof": {...}}

The claim is what is proven: under that format and semantics the network answers every input of the task family.
The proof lists what the argument derives -- range bounds, per layer the cases, targets, weights and fetched
intervals, the values the MLPs write, the readout's worst margin (`composition`, `parametric`, `two_sum` say what
each kind holds). `check` re-derives the proof from the claim and the weights alone and confirms the certificate
only if the argument goes through and every entry of the listed proof equals the derived one: a certificate whose
claim is false, or whose proof was edited, is refused with the first step that fails.

Certifiers (verify.certify) write certificates by calling `prove`, and answer `verified` only once `check`
confirms what they wrote.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from verify.checker import composition, covering, parametric, two_sum
from verify.checker.files import (CERTIFICATE_KIND, CERTIFICATE_VERSION, Weights, load_certificate, load_weights,
                                  weights_from_parts, write_certificate)
from verify.checker.numbers import parse_format
from verify.checker.refusal import Refused, require
from verify.checker.tasks import Composition, TwoSum, log2_text, shown

__all__ = ["Refused", "Weights", "SEMANTICS", "check", "check_files", "prove", "summary", "certificate",
           "description_fingerprint", "load_certificate", "write_certificate", "load_weights",
           "weights_from_parts"]

SEMANTICS = ("strict", "theory")


def _claim_parts(claim: dict):
    require(isinstance(claim, dict), "the certificate has no claim")
    fmt = parse_format(claim.get("format"))
    semantics = claim.get("semantics")
    require(semantics in SEMANTICS, f"the checker knows the semantics {SEMANTICS}, not {semantics!r}")
    require(fmt.supported, f"the checker reasons about float formats with at most 24 fraction and 9 exponent bits, "
                           f"fp64, and fixed formats of at most 25 bits; {fmt.name} is outside them")
    tasks = {"composition": Composition, "two_sum": TwoSum}
    require(claim.get("task") in tasks, f"the checker knows the tasks {sorted(tasks)}, not {claim.get('task')!r}")
    task = tasks[claim["task"]].from_params(claim.get("params"))
    network = claim.get("network")
    require(isinstance(network, dict) and set(network) in ({"sha256"}, {"description", "sha256"}),
            "the claim names its network by a sha256, and a parametric one carries its description too")
    if "description" in network:
        require(network["sha256"] == description_fingerprint(network["description"]),
                "the description does not match its sha256")
    return task, fmt, semantics == "strict", network


def description_fingerprint(description) -> str:
    """A parametric network's identity: the sha256 of its description as sorted-key JSON."""
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()


def prove(claim: dict, weights: Weights | None = None) -> dict:
    """The proof of `claim` (the record a certificate lists), derived from the weights (or the description the
    claim carries); Refused when the argument does not go through."""
    task, fmt, strict, network = _claim_parts(claim)
    if "description" in network:
        require(isinstance(task, Composition), "parametric descriptions are of the composition construction")
        require(not strict, "the parametric proof is under theory semantics")
        require(weights is None, "a parametric certificate carries its network; no weights file belongs with it")
        return parametric.prove(network["description"], task, fmt)
    require(weights is not None, "this certificate is about a weights file; give the file to check it against")
    require(weights.fingerprint() == network["sha256"], "the network's weights do not match the certificate "
                                                         "(sha256 differs)")
    if not (weights.task == claim["task"] and type(task).from_params(weights.params) == task):
        raise Refused(f"the network file is about {weights.task} {shown(weights.params)}, the claim about "
                      f"{claim['task']} {shown(task.params())}")
    if isinstance(task, TwoSum):
        return two_sum.prove(weights, task, fmt, strict)
    return composition.prove(weights, task, fmt, strict)


def certificate(claim: dict, proof: dict) -> dict:
    return {"kind": CERTIFICATE_KIND, "version": CERTIFICATE_VERSION, "claim": claim,
            "proof": json.loads(json.dumps(proof))}


def check(cert: dict, weights: Weights | None = None) -> dict[str, Any]:
    """Confirm `cert` against `weights` (None for a parametric certificate): re-derive its proof and compare.
    Returns what was proven, with the network's budget; raises Refused naming the first failing step."""
    require(isinstance(cert, dict) and cert.get("kind") == CERTIFICATE_KIND, f"not a {CERTIFICATE_KIND}")
    require(cert.get("version") == CERTIFICATE_VERSION,
            f"certificate version {cert.get('version')!r}; this checker reads {CERTIFICATE_VERSION}")
    require(set(cert) == {"kind", "version", "claim", "proof"}, "a certificate holds kind, version, claim and proof, "
                                                                 "nothing else")
    claim = cert["claim"]
    try:
        derived = json.loads(json.dumps(prove(claim, weights)))
    except Refused:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
        raise Refused(f"malformed certificate or network ({type(exc).__name__}: {exc})") from None
    difference = _first_difference(cert["proof"], derived, "proof")
    require(difference is None, f"{difference}: the listed proof differs from what the checker derives")
    return {"confirmed": True, **summary(claim, weights)}


def summary(claim: dict, weights: Weights | None = None) -> dict[str, Any]:
    """What a proven claim covers: the task, the format and semantics, the number of inputs (exactly when it has
    at most 10^4 bits, as a string; always its log2) and the budget of the network; for composition, whether
    Theorem 1.1 and CPW cover that budget at the task's prompt length (`covering`), and Theorem 1.1's verdict as
    `covered`."""
    task, fmt, _, network = _claim_parts(claim)
    inputs, budget = task.inputs(), _budget(network, weights, fmt)
    out = {"task": claim["task"], "params": task.params(), "format": fmt.name, "semantics": claim["semantics"],
           "inputs_log2": log2_text(task.log2_inputs()), "inputs": None if inputs is None else str(inputs),
           "budget": budget}
    if isinstance(task, Composition):
        out["covering"] = covering.covering(task, budget)
        out["covered"] = out["covering"]["theorem_1_1"]["covered"]
    return out


def check_files(certificate_path, weights_path=None) -> dict[str, Any]:
    cert = load_certificate(certificate_path)
    return check(cert, None if weights_path is None else load_weights(weights_path))


def _budget(network: dict, weights: Weights | None, fmt) -> dict[str, int]:
    """H, d_head, d_model, d = max(d_head, ceil(d_model / H)), p and Hdp of the network the proof was about."""
    if weights is None:
        H, d_head, d_model = parametric.shape(network["description"])
    else:
        layers = range(len(weights.structure["layers"]))
        H = max(weights.array(f"blocks.{l}.attn.W_Q").shape[0] for l in layers)
        d_head = max(max(weights.array(f"blocks.{l}.attn.W_Q").shape[2], weights.array(f"blocks.{l}.attn.W_V").shape[2])
                     for l in layers)
        d_model = weights.array("embed.W_E").shape[1]
    d = max(d_head, -(-d_model // H))
    return {"H": H, "d_head": d_head, "d_model": d_model, "d": d, "p": fmt.bits, "Hdp": H * d * fmt.bits}


def _first_difference(listed, derived, path: str) -> str | None:
    if isinstance(derived, dict):
        if not isinstance(listed, dict) or set(listed) != set(derived):
            return path
        for key in derived:
            found = _first_difference(listed[key], derived[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(derived, list):
        if not isinstance(listed, list) or len(listed) != len(derived):
            return path
        for i, (a, b) in enumerate(zip(listed, derived)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    same = listed == derived if number(listed) and number(derived) else (type(listed) is type(derived)
                                                                          and listed == derived)
    return None if same else path
