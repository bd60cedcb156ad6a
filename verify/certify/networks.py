"""certify for a network: the claim that it answers every input of the task it names, proven by the checker."""

from __future__ import annotations

from verify import checker
from verify.result import Result, Status
from witness.io import header
from witness.ir import Network
from witness.resources import require_memory

#: Peak bytes of the checker's strict proof per (query, key) pair of the prompt: it holds every query case's
#: scores against every key (in chunks) and, per case, the intervals of what it mixes. Measured with tracemalloc
#: on composition networks at L = 1: 36.9 and 37.1 bytes per pair at n = 2,048 and 4,096 (153 and 594 MiB);
#: 48 leaves a margin.
STRICT_BYTES_PER_PAIR = 48


def unknown(arithmetic, reason: str) -> Result:
    return Result(Status.UNKNOWN, "certify", arithmetic.describe(), 0, 0, None, {"reason": reason})


def weights_of(network: Network) -> checker.Weights:
    """The network as the checker reads it from a file (the same arrays and header `witness.io.save` writes)."""
    return checker.weights_from_parts(network.state_dict(), header(network))


def verified(certificate: dict, summary: dict, arithmetic) -> Result:
    inputs = summary["inputs"]
    return Result(Status.VERIFIED, "certify", arithmetic.describe(), 0 if inputs is None else int(inputs), 0, None,
                  {"certificate": certificate, "inputs_log2": summary["inputs_log2"], "budget": summary["budget"]})


def prove(claim: dict, weights: checker.Weights | None, arithmetic) -> Result:
    """`verified` with the certificate when the checker proves `claim`, else `unknown` with its reason."""
    try:
        certificate = checker.certificate(claim, checker.prove(claim, weights))
        return verified(certificate, checker.summary(claim, weights), arithmetic)
    except checker.Refused as reason:
        return unknown(arithmetic, str(reason))


def certify_network(network: Network, arithmetic) -> Result:
    fmt = getattr(arithmetic, "format", None)
    if fmt is None or arithmetic.semantics not in checker.SEMANTICS:
        return unknown(arithmetic, f"certify proves under a rounded strict or theory arithmetic, not "
                                   f"{arithmetic.describe()}")
    if network.meta.task not in ("composition", "two_sum"):
        return unknown(arithmetic, f"certify proves composition and two_sum networks; this one claims task "
                                   f"{network.meta.task!r}")
    if arithmetic.semantics == "strict":
        require_memory(STRICT_BYTES_PER_PAIR * network.n_ctx ** 2,
                       f"certifying a {network.n_ctx}-token prompt under strict (the proof holds about "
                       f"{STRICT_BYTES_PER_PAIR} bytes per pair of positions)")
    weights = weights_of(network)
    claim = {"task": network.meta.task, "params": network.meta.params, "format": fmt.name,
             "semantics": arithmetic.semantics, "network": {"sha256": weights.fingerprint()}}
    return prove(claim, weights, arithmetic)
