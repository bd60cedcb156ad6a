"""What the checker tests share: the forger's tools (read a witness file, edit it, re-stamp its hash and ask the
checker for the proof) and a certificate of a compiled network."""

from __future__ import annotations

import json

import numpy as np
import witness
import witness.io
from verify import checker
from verify.certify import Construction, certify
from verify.result import Status
from witness.arith import arithmetic


def certificate_of(network, fmt, semantics):
    result = certify(network, arithmetic(fmt, semantics))
    assert result.status is Status.VERIFIED, result.detail
    return result.detail["certificate"]


def file_parts(path):
    """The arrays and the JSON header of a witness .npz file, as a forger edits them."""
    with np.load(path, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    return arrays, json.loads(arrays.pop(witness.io.HEADER_KEY).tobytes())


def write_file(path, arrays, head):
    head = {**head, "shapes": {name: list(a.shape) for name, a in arrays.items()},
            "dtypes": {name: a.dtype.name for name, a in arrays.items()}}
    np.savez(path, **arrays, **{witness.io.HEADER_KEY: np.frombuffer(json.dumps(head).encode(), np.uint8)})


def reproved(path, claim):
    """The forger's step: hash the edited file with the checker's own fingerprint and ask the checker for the proof."""
    weights = checker.load_weights(path)
    return checker.prove(dict(claim, network={"sha256": weights.fingerprint()}), weights)


def parametric_forgery(L, m, n, edit):
    """A parametric certificate whose description `edit` changed, re-hashed and re-proved as a forger would."""
    genuine = certify(Construction(L, m, n), arithmetic("fp16", "theory")).detail["certificate"]
    claim = json.loads(json.dumps(genuine["claim"]))
    description = claim["network"]["description"]
    edit(description)
    claim["network"]["sha256"] = checker.description_fingerprint(description)
    return {**genuine, "claim": claim}


def rules_of(description, kind, name):
    return next(entry["rules"] for entry in description[kind] if entry["class"] == name)
