"""The JSON certificate that `certify` writes, and an independent re-check of it.

A certificate names the format, the semantics and the network (a sha256 of its rounded state dict, or the
parameters of a parametric construction) and lists, per layer and case, the worst margins certify proved: the
attention target, the score gap, the bound on the off-target attention mass; and, per final state, the readout
margin. `check_certificate` re-reads the file and the network and recomputes, with its own exact integer
arithmetic (weights and states are dyadic, so scaling by a power of two makes them integers):

* that the network is the one certified (same hash), under the same format and semantics;
* that layer l's cases target every entry of the table z_l the task reads at step l (z0: the seed);
* for every listed case, that the listed target is the best key of the exact scores, that the exact gap to the
  runner-up is at least the listed gap less a rounding allowance, and that the listed off-target mass is at least
  the smallest mass the other keys' numerators can have;
* for every listed final state, that the task's answer is the unique best exact logit, by at least the listed
  margin less the allowance.

For a linear-attention layer (`verify.linear`) it recomputes from the exact keys which position owns each key
coordinate, and that every listed query reads the keys of its listed target only.

For a parametric certificate it recomputes the per-code-distance margins from the construction's description.

A 2-Sum certificate (`verify.certify_two_sum`) is re-checked the same way: the scores depend on the two tokens
only (the queries and keys read no direction the position table writes), every token's listed partner is
(t - a) mod M and the unique best key of the exact scores by the listed gap, the listed off-match numerator is at
least what the other keys' numerators can be; every position has an answer-0 case and, where a partner can
exist, an answer-1 case, whose listed verdict bound gives the right logit the listed margin. The verdict bounds
themselves (the linearised MLP and the rounding allowance) are certify's; this check does not re-derive them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from witness.arith.formats import parse_format
from witness.errors import WitnessError
from witness.ir import BlockSparseAttention, Network

KIND = "witness-certificate"
VERSION = 1


class CertificateError(WitnessError):
    """A certificate that is malformed or does not match the network it claims to certify."""


def network_identity(network: Network) -> dict[str, Any]:
    digest = hashlib.sha256()
    for name, array in sorted(network.state_dict().items()):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(array, dtype="<f8").tobytes())
    digest.update(json.dumps(network.structure(), sort_keys=True).encode())
    return {"kind": "network", "sha256": digest.hexdigest(), "task": network.meta.task,
            "params": network.meta.params}


def new_certificate(format_name: str, semantics: str, identity: dict[str, Any]) -> dict[str, Any]:
    return {"kind": KIND, "version": VERSION, "status": "verified", "format": format_name,
            "semantics": semantics, "network": identity, "layers": [], "readout": None}


def load_certificate(path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            certificate = json.load(handle)
    except OSError as exc:
        raise CertificateError(f"{path}: cannot read ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CertificateError(f"{path}: not a JSON certificate ({exc})") from None
    if not isinstance(certificate, dict) or certificate.get("kind") != KIND:
        raise CertificateError(f"{path}: not a {KIND}")
    if certificate.get("version") != VERSION:
        raise CertificateError(f"{path}: certificate version {certificate.get('version')!r}, expected {VERSION}")
    return certificate


def check_certificate(certificate: dict[str, Any], network: Network | None = None) -> dict[str, Any]:
    """Confirm `certificate` (for `network`, or for the parametric construction it names); raise
    CertificateError naming the first claim that fails. Returns a summary of what was checked."""
    try:
        fmt = parse_format(certificate["format"])
        identity = certificate["network"]
        semantics = certificate["semantics"]
        if certificate.get("status") != "verified":
            raise CertificateError(f"the certificate's status is {certificate.get('status')!r}, not verified")
        if identity.get("kind") == "parametric":
            from verify.parametric import check_parametric

            return check_parametric(certificate, fmt)
        if network is None:
            raise CertificateError("this certificate is about a network file; give the file to check it against")
        if network_identity(network)["sha256"] != identity["sha256"]:
            raise CertificateError("the network's weights do not match the certificate (sha256 differs)")
        if certificate.get("certifier") == "two_sum":
            return _check_two_sum(certificate, network, fmt, semantics)
        return _check_cases(certificate, network, fmt, semantics)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CertificateError(f"malformed certificate ({type(exc).__name__}: {exc})") from None


def _allowance(fmt, semantics: str, magnitude: float, depth: int) -> float:
    """How far a rounded dot product of `depth` terms of total magnitude `magnitude` may be from the exact one."""
    if semantics != "strict":
        return 0.0
    unit = 2.0 ** -(fmt.mantissa + 1) if hasattr(fmt, "mantissa") else 0.0
    eta = fmt.smallest_subnormal if hasattr(fmt, "mantissa") else 2.0 ** -fmt.fraction
    return 2 * (magnitude * (depth + 1) * unit * 1.01 + (depth + 1) * eta)


def _integers(*arrays: np.ndarray) -> tuple[list[np.ndarray], int]:
    """The arrays scaled by one power of two 2^s into int64 (exactly), and s."""
    joined = np.concatenate([np.ravel(a) for a in arrays])
    nonzero = np.abs(joined[joined != 0])
    shift = 0
    if nonzero.size:
        mantissa, exponent = np.frexp(nonzero)
        odd = np.ldexp(mantissa, 53).astype(np.int64)
        shift = max(0, int(-(exponent - 53 + np.log2((odd & -odd).astype(np.float64)).astype(np.int64)).min()))
    scaled = [np.ldexp(np.asarray(a, dtype=np.float64), shift) for a in arrays]
    if any(np.abs(a).max(initial=0) >= 2.0**31 for a in scaled):
        raise CertificateError("weights too finely spread for the integer re-check")
    return [a.astype(np.int64) for a in scaled], shift


def _check_cases(certificate: dict, network: Network, fmt, semantics: str) -> dict[str, Any]:
    rounded = {name: fmt.round(array) for name, array in network.state_dict().items()}
    labels = network.basis.labels
    task = network.task
    length = task.prompt_length
    W_pos = rounded["pos_embed.W_pos"][:length]
    cases_checked = 0
    layers = certificate["layers"]
    if len(layers) != len(network.layers):
        raise CertificateError(f"the certificate covers {len(layers)} layers, the network has {len(network.layers)}")
    for l, entry in enumerate(layers):
        p = f"blocks.{l}.attn"
        mixer = network.layers[l].mixer
        if entry.get("mixer", "attention") != mixer.kind:
            raise CertificateError(f"{p} is a {mixer.kind} layer, the certificate treats it as {entry.get('mixer')}")
        if mixer.kind == "linear":
            cases_checked += _check_linear(entry, mixer, rounded, W_pos, labels, task.segment(f"z{l}"), p)
            continue
        dirs = [labels.index(name) for name in entry["query_directions"]]
        states = np.array([case["query"] for case in entry["cases"]], dtype=np.float64).reshape(-1, len(dirs))
        W_Q, W_K = rounded[f"{p}.W_Q"][0], rounded[f"{p}.W_K"][0]
        (x, wq, pos, wk, bq, bk), shift = _integers(states, W_Q[dirs], W_pos, W_K, rounded[f"{p}.b_Q"][0],
                                                     rounded[f"{p}.b_K"][0])
        # q scaled by 2^(2s), k by 2^(2s); scores by 2^(4s): exact in int64 at these sizes, checked below.
        q = x @ wq + bq * (1 << shift)
        k = pos @ wk + bk * (1 << shift)
        if np.abs(q).max(initial=0) * np.abs(k).max(initial=0) * k.shape[1] >= 2**52:
            raise CertificateError(f"{p}: scores too large for the exact integer re-check")
        segment = task.segment(f"z{l}")
        targets = np.array([int(case["target"]) for case in entry["cases"]], dtype=np.int64)
        if sorted(set(targets.tolist())) != list(range(segment.start, segment.stop)):
            raise CertificateError(f"layer {l}: the cases' targets are not the entries of z{l}, which the task reads")
        gaps = np.array([float(case["score_gap"]) for case in entry["cases"]])
        masses = np.array([float(case["off_target_mass"]) for case in entry["cases"]])
        chunk = max(1, (1 << 22) // max(1, k.shape[0]))
        for start in range(0, len(targets), chunk):
            rows = np.arange(start, min(start + chunk, len(targets)))
            # Integers whose every partial sum stays below 2^52: the float64 product is exact, in any order.
            q_rows, keys = q[rows].astype(np.float64), k.T.astype(np.float64)
            scores = (q_rows @ keys) / 2.0 ** (4 * shift)
            magnitude = (np.abs(q_rows) @ np.abs(keys)).max(axis=1) / 2.0 ** (4 * shift)
            slack = np.array([_allowance(fmt, semantics, float(size), q.shape[1]) for size in magnitude])
            picked = np.arange(rows.size)
            best = scores[picked, targets[rows]]
            scores[picked, targets[rows]] = -np.inf
            runner_up = scores.max(axis=1)
            if scores.shape[1] > 1:
                if not np.all(best > runner_up - 2 * slack):
                    raise CertificateError(f"layer {l}: a listed target is not the best key of its case")
                if not np.all(best - runner_up >= gaps[rows] - 2 * slack):
                    raise CertificateError(f"layer {l}: a claimed score gap does not hold")
            # A lower bound on what the off-target numerators can be: exp of the exact differences, less the
            # rounding allowance, and under strict semantics rounded (monotonically) to the format.
            with np.errstate(under="ignore"):
                numerators = np.exp(np.minimum(scores - best[:, None] - 2 * slack[:, None], 700.0)) * (1 - 2.0**-40)
            if semantics == "strict":
                numerators = fmt.round(numerators)
            least = numerators.sum(axis=1) * (1 - numerators.shape[1] * 2.0**-52)  # float64 sum, rounded down
            if not np.all(masses[rows] >= least * (1 - 2.0**-30)):
                raise CertificateError(f"layer {l}: a claimed off-target mass is too small")
        cases_checked += len(targets)
    readout = certificate["readout"]
    dirs = [labels.index(name) for name in readout["directions"]]
    states = np.array([case["state"] for case in readout["cases"]], dtype=np.float64).reshape(-1, len(dirs))
    (x, wu, bu), shift = _integers(states, rounded["unembed.W_U"][dirs], rounded["unembed.b_U"])
    logits = (x @ wu + bu * (1 << shift)).astype(np.float64) / 2.0 ** (2 * shift)
    magnitude = float((np.abs(x) @ np.abs(wu)).max(initial=0)) / 2.0 ** (2 * shift)
    slack = _allowance(fmt, "strict", magnitude, len(dirs))
    for row, case in enumerate(readout["cases"]):
        answer = int(case["answer"])
        margin = logits[row, answer] - np.delete(logits[row], answer).max(initial=-np.inf)
        if not margin > 0 or margin < float(case["margin"]) - 2 * slack:
            raise CertificateError(f"readout: the margin claimed for answer {answer} does not hold")
    answers = sorted({int(case["answer"]) for case in readout["cases"]})
    if answers != list(range(task.value_vocab)):
        raise CertificateError("the readout cases do not cover every answer")
    return {"confirmed": True, "layers": len(layers), "cases": cases_checked, "final_states": len(readout["cases"])}


def _check_linear(entry: dict, mixer, rounded: dict, W_pos: np.ndarray, labels, segment, p: str) -> int:
    """Re-check a linear layer's entry (`verify.linear`): from the exact keys at every position, each key
    coordinate is nonzero at one position at most, as listed; each listed case's exact query reads the keys of
    its listed target and of no other position; the targets are the entries of the table the task reads."""
    if mixer.normalize:
        raise CertificateError(f"{p} has a normaliser, which the linear-layer argument does not cover")
    dirs = [labels.index(name) for name in entry["query_directions"]]
    states = np.array([case["query"] for case in entry["cases"]], dtype=np.float64).reshape(-1, len(dirs))
    (x, wq, pos, wk, bq, bk), shift = _integers(states, rounded[f"{p}.W_Q"][0][dirs], W_pos, rounded[f"{p}.W_K"][0],
                                                 rounded[f"{p}.b_Q"][0], rounded[f"{p}.b_K"][0])
    q = x @ wq + bq * (1 << shift)  # exact, scaled by 2^(2s); only the signs and zeros matter below
    k = pos @ wk + bk * (1 << shift)
    if mixer.feature_map == "relu":
        q, k = np.maximum(q, 0), np.maximum(k, 0)
    nonzero = k != 0
    if (nonzero.sum(axis=0) > 1).any():
        raise CertificateError(f"{p}: a key coordinate is nonzero at more than one position")
    owners = np.where(nonzero.any(axis=0), nonzero.argmax(axis=0), -1)
    if owners.tolist() != [int(owner) for owner in entry["key_owners"]]:
        raise CertificateError(f"{p}: the listed key owners do not match the keys")
    targets = [int(case["target"]) for case in entry["cases"]]
    for row, target in zip(q, targets):
        if set(owners[row != 0].tolist()) - {-1} != {target}:
            raise CertificateError(f"{p}: a listed query does not read exactly the keys of its target {target}")
    if sorted(set(targets)) != list(range(segment.start, segment.stop)):
        raise CertificateError(f"{p}: the cases' targets are not the entries of {segment.name}, which the task reads")
    return len(targets)


def _check_block_choice(certificate: dict, network: Network, fmt, semantics: str, integers, shift: int) -> None:
    """Re-check the block-choice lemma of `verify.certify_two_sum_sparse` in exact integers (x [M, d] the token
    rows, wq, wk, bq, bk scaled by 2^shift): k >= 1 and the task's causality; every query has one structurally
    non-zero coordinate e(a), whose products are all >= 0; every key product is >= 0; key coordinate e(a) is
    structurally zero off a's partner and not at it; and the least partner-block score lambda kappa / B is large
    enough that its rounded computation cannot underflow to 0 (each rounding of a y >= the smallest positive
    format value keeps at least y / 2)."""
    task, mixer = network.task, network.layers[0].mixer
    claim = certificate["block_choice"]
    if (int(claim["block"]), int(claim["k"])) != (mixer.block, mixer.k) or mixer.k < 1 or mixer.causal != task.causal:
        raise CertificateError("block choice: the certificate's (block, k) or causality do not match the network, "
                               "or k < 1")
    x, wq, wk, bq, bk = integers
    a = np.arange(task.M)
    partner = (task.t - a) % task.M

    def products(w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (token, coordinate): how many products are non-zero, whether any is negative, the exact value."""
        rows = np.flatnonzero(x.any(axis=0) & w.any(axis=1))  # the only directions with non-zero products
        terms = x[:, rows, None] * w[None, rows, :]  # [M, rows, d_head]
        count = (terms != 0).sum(axis=1) + (b != 0)[None, :]
        negative = (terms < 0).any(axis=1) | (b < 0)[None, :]
        return count, negative, terms.sum(axis=1) + b * (1 << shift)

    q_count, q_negative, q = products(wq, bq)
    k_count, k_negative, k = products(wk, bk)
    if not ((q_count > 0).sum(axis=1) == 1).all():
        raise CertificateError("block choice: a query has more or fewer than one non-zero coordinate")
    e = (q_count > 0).argmax(axis=1)
    if q_negative[a, e].any() or k_negative.any():
        raise CertificateError("block choice: a query or key coordinate may be negative")
    off = np.ones((task.M, task.M), bool)
    off[a, partner] = False
    at = k_count[:, e].T  # [a, u]
    if (at[off] != 0).any() or (at[a, partner] == 0).any():
        raise CertificateError("block choice: a key is non-zero where a non-partner's query looks, or zero at the "
                               "partner's")
    least = (q[a, e].astype(np.float64) * k[partner, e].astype(np.float64)).min() / 2.0 ** (4 * shift)
    kappa = k[partner, e].min() / 2.0 ** (2 * shift)
    tiny = fmt.smallest_subnormal if hasattr(fmt, "mantissa") else 2.0 ** -fmt.fraction
    bound = least / mixer.block
    if semantics == "strict" and not (kappa / mixer.block >= 2 * tiny and bound >= 4 * tiny):
        raise CertificateError("block choice: a partner block's score may underflow to 0")
    if not 0 < float(claim["least_partner_block_score"]) or not bound > 0:
        raise CertificateError("block choice: the least partner-block score is not positive")


def _check_two_sum(certificate: dict, network: Network, fmt, semantics: str) -> dict[str, Any]:
    """Re-check a 2-Sum certificate (module docstring)."""
    task = network.task
    if task is None or task.name != "two_sum" or len(network.layers) != 1:
        raise CertificateError("a 2-Sum certificate needs a one-layer network whose task is two_sum")
    rounded = {name: fmt.round(array) for name, array in network.state_dict().items()}
    p = "blocks.0.attn"
    W_E, W_pos = rounded["embed.W_E"][: task.M], rounded["pos_embed.W_pos"][: task.n]
    W_Q, W_K = rounded[f"{p}.W_Q"][0], rounded[f"{p}.W_K"][0]
    position_rows = np.flatnonzero(W_pos.any(axis=0))
    if W_Q[position_rows].any() or W_K[position_rows].any():
        raise CertificateError(f"{p}: queries or keys read a direction the position table writes")
    (x, wq, wk, bq, bk), shift = _integers(W_E, W_Q, W_K, rounded[f"{p}.b_Q"][0], rounded[f"{p}.b_K"][0])
    q = x @ wq + bq * (1 << shift)
    k = x @ wk + bk * (1 << shift)
    if isinstance(network.layers[0].mixer, BlockSparseAttention):
        _check_block_choice(certificate, network, fmt, semantics, (x, wq, wk, bq, bk), shift)
    if np.abs(q).max(initial=0) * np.abs(k).max(initial=0) * k.shape[1] >= 2**52:
        raise CertificateError(f"{p}: scores too large for the exact integer re-check")
    scores = (q.astype(np.float64) @ k.T.astype(np.float64)) / 2.0 ** (4 * shift)  # exact: integers below 2^52
    magnitude = (np.abs(q).astype(np.float64) @ np.abs(k).T.astype(np.float64)).max() / 2.0 ** (4 * shift)
    slack = _allowance(fmt, semantics, float(magnitude), q.shape[1])
    entries = certificate["layers"][0]["tokens"]
    if sorted(int(entry["token"]) for entry in entries) != list(range(task.M)):
        raise CertificateError("layer 0: the cases do not list every token exactly once")
    for entry in entries:
        a, partner = int(entry["token"]), int(entry["partner"])
        if partner != (task.t - a) % task.M:
            raise CertificateError(f"layer 0: token {a}'s partner is {(task.t - a) % task.M}, not {partner}")
        row = scores[a].copy()
        best = row[partner]
        row[partner] = -np.inf
        if not best - row.max() >= float(entry["score_gap"]) - 2 * slack or not best > row.max() - 2 * slack:
            raise CertificateError(f"layer 0: the claimed score gap of token {a} does not hold")
        with np.errstate(under="ignore"):
            least = np.exp(np.minimum(row.max() - best - 2 * slack, 700.0)) * (1 - 2.0**-40)
        if semantics == "strict":
            least = float(fmt.round(np.array([least]))[0])
        if not float(entry["off_match_numerator"]) >= least * (1 - 2.0**-30):
            raise CertificateError(f"layer 0: the claimed off-match numerator of token {a} is too small")
    readout = certificate["readout"]
    (verdict,) = [network.basis.labels.index(name) for name in readout["directions"]]
    W_U, b_U = rounded["unembed.W_U"], rounded["unembed.b_U"]
    if np.delete(W_U, verdict, axis=0).any():
        raise CertificateError("the readout reads more than the verdict direction")
    expected = {(i, answer) for i in range(task.n) for answer in (0, 1)
                if answer == 0 or (i > 0 if task.causal else task.n > 1)}
    listed = {(int(case["position"]), int(case["answer"])) for case in readout["cases"]}
    if listed != expected or len(readout["cases"]) != len(expected):
        raise CertificateError("the readout cases do not cover every position and answer once")
    for case in readout["cases"]:
        answer, bound = int(case["answer"]), float(case["verdict_bound"])
        if not 0 <= int(case["token"]) < task.M:
            raise CertificateError(f"readout: token {case['token']} is out of range")
        stored = float(fmt.round(np.array([bound]))[0])  # the verdict is stored, and rounding is monotone
        logits = stored * W_U[verdict] + b_U
        margin = logits[answer] - logits[1 - answer]
        allowance = _allowance(fmt, "strict", float(np.abs(logits).max()), 1)
        if not margin > 0 or margin < float(case["margin"]) - 2 * allowance:
            raise CertificateError(f"readout: the margin claimed at position {case['position']} for answer "
                                   f"{answer} does not hold")
    return {"confirmed": True, "layers": 1, "cases": len(entries), "final_states": len(readout["cases"])}
