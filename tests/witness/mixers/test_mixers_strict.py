"""Recurrent mixers under `strict`: the vectorised executor agrees bit for bit with the scalar MPFR reference."""

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.oracles.strict_agreement import assert_strict_matches_reference
from lab import strategies as ws
from witness.arith import parse_format

RECURRENT_NETWORKS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FORMATS = ["float:3,4", "float:5,5", "fp16", "bf16", "fp32", "fixed:4,4", "fixed:6,8"]


@pytest.mark.parametrize("spec", FORMATS)
@pytest.mark.parametrize("kind", sorted(ws.RECURRENT_OPTIONS))
@RECURRENT_NETWORKS
@given(data=st.data())
def test_recurrent_strict_matches_mpfr_reference(kind, spec, data):
    network, tokens = data.draw(ws.hybrid_networks(kinds=(kind,), max_d_model=4, max_d_head=3, max_ctx=5))
    event(assert_strict_matches_reference(network, tokens, parse_format(spec)))


def test_comparison_catches_a_kernel_that_skips_a_rounding(monkeypatch):
    """A linear-attention kernel that adds unrounded products k_i v_j to the state (a fused multiply-add) is caught
    on an ordinary network at float:3,4, so the agreement above is not vacuous."""
    import numpy as np

    from witness.ir import Basis, Embedding, Layer, Meta, Network, Readout
    from witness.mixers import LinearAttention, linear

    rng = np.random.default_rng(0)
    arrays = {name: rng.normal(size=shape) for name, shape in LinearAttention.array_shapes(1, 3, 2).items()}
    network = Network(Embedding(rng.normal(size=(4, 3)), rng.normal(size=(6, 3))), (Layer(LinearAttention(**arrays)),),
                      Readout(rng.normal(size=(3, 4)), np.zeros(4), read="all"), Basis(("a", "b", "c")), Meta())
    tokens = rng.integers(0, 4, size=(3, 6))
    fmt = parse_format("float:3,4")
    assert assert_strict_matches_reference(network, tokens, fmt) == "finite logits"
    monkeypatch.setattr(linear, "outer", lambda a, b, arith: a[..., :, None] * b[..., None, :])
    with pytest.raises(AssertionError):
        assert_strict_matches_reference(network, tokens, fmt)
