"""certify: a proof that a network -- or a construction, at any size -- answers every input of its task family.

    certify(target, arithmetic) -> Result

`target` is a `Network` (its task says which proof applies: `composition` or `two_sum`, full or block-sparse
attention) or a `Construction` (the composition construction named by its parameters, proven from its parametric
description without building a table). `arithmetic` is a rounded `witness.arith.arithmetic(format, semantics)`;
the proofs know the `strict` and `theory` semantics.

The per-target certifiers (`networks`, `composition`) state the claim and ask the trusted checker
(`verify.checker`) for the proof; the checker derives it from the weights alone and refuses where an assumption
fails. `verified` comes with the certificate -- claim plus proof -- that `verify.checker.check` confirms; any
refusal is `unknown` with the checker's reason. Nothing here computes a bound of its own.
"""

from __future__ import annotations

from verify.certify.composition import STRICT_PROMPT_LIMIT, Construction, certify_construction
from verify.certify.networks import certify_network
from verify.result import Result
from witness.ir import Network

__all__ = ["certify", "Construction", "STRICT_PROMPT_LIMIT"]


def certify(target: Network | Construction, arithmetic) -> Result:
    if isinstance(target, Construction):
        return certify_construction(target, arithmetic)
    return certify_network(target, arithmetic)
