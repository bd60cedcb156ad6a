"""The comparison every strict-semantics test makes: the vectorised executor against the scalar MPFR reference,
bit for bit."""

import numpy as np

from tests.oracles.mpfr_reference import reference_run
from witness.arith import arithmetic
from witness.errors import OverflowInFormat
from witness.execute import run


def assert_strict_matches_reference(network, tokens, fmt) -> str:
    """Both raise OverflowInFormat (the batch raises iff some sequence does), or logits and predictions are
    identical: np.array_equal, NaN equal to NaN, no tolerance. Returns which case it was, for statistics."""
    try:
        outputs = run(network, tokens, arithmetic(fmt, "strict"))
    except OverflowInFormat:
        outputs = None
    references = []
    for row in tokens:
        try:
            references.append(reference_run(network, row, fmt))
        except OverflowInFormat:
            references.append(None)
    if outputs is None:
        assert any(reference is None for reference in references)
        return "overflow"
    assert all(reference is not None for reference in references)
    for row, reference in enumerate(references):
        assert np.array_equal(outputs.logits[row], reference.logits, equal_nan=True)
        assert np.array_equal(outputs.predictions[row], reference.predictions)
        assert outputs.read_positions == reference.read_positions
    if np.isnan(outputs.logits).any():
        return "NaN logits"
    return "finite logits" if np.isfinite(outputs.logits).all() else "infinite logits"
