"""`theory` and `mixed` on hand-computed cases; the `arithmetic` factory; the rounded-weights report; what a run
computes (the last layer only what the readout reads)."""

import numpy as np
import pytest

from witness.arith import FLOAT64, arithmetic, parse_format
from cli.main import main
from witness.errors import OverflowInFormat, ParameterError, StandInOverflow
from witness.execute import run
from witness.ir import MLP, Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention
from witness.budget import rounded_weights_report
from tests.oracles.mpfr_reference import reference_run


def readout_network(W_E, W_pos, W_U, b_U) -> Network:
    """No layers: logits = (W_E[t] + W_pos[i]) W_U + b_U at the last position."""
    W_E = np.array(W_E, dtype=float)
    return Network(Embedding(W_E, np.array(W_pos, dtype=float)), (),
                   Readout(np.array(W_U, dtype=float), np.array(b_U, dtype=float)),
                   Basis(tuple(f"x[{k}]" for k in range(W_E.shape[1]))), Meta())


# float:3,4 keeps 3 fraction bits: 1 + 1/16 is a tie between 1 and 1 + 1/8 and rounds to the even 1.
TIE_NETWORK = readout_network([[1.0]], [[0.0625]], [[1.0, 0.9375]], [0.0, 0.125])


def test_the_four_arithmetics_on_a_hand_computed_readout():
    # float64:  x = 1.0625; logits = [1.0625, 1.0625 * 0.9375 + 0.125 = 1.12109375] -> 1
    # strict:   x = round(1.0625) = 1; logit 1 = round(0.9375 + 0.125) = round(1.0625) = 1 -> a tie, -1
    # theory:   x = store(1.0625) = 1; the readout is exact inside: 0.9375 + 0.125 = 1.0625 -> 1
    # mixed:    x = store(fp32 1.0625) = 1; the readout in fp32: 1.0625 exactly -> 1
    expected = {"float64": ([1.0625, 1.12109375], 1), "strict": ([1.0, 1.0], -1), "theory": ([1.0, 1.0625], 1),
                "mixed": ([1.0, 1.0625], 1)}
    for semantics, (logits, prediction) in expected.items():
        arith = FLOAT64 if semantics == "float64" else arithmetic("float:3,4", semantics)
        outputs = run(TIE_NETWORK, [0], arith)
        assert outputs.logits[0, 0].tolist() == logits, semantics
        assert outputs.predictions[0, 0] == prediction, semantics


def uniform_attention_network(values) -> Network:
    """d_model 1, one causal head whose scores are all 0, so position i averages the first i + 1 values."""
    length = len(values)
    zero, one = np.zeros((1, 1, 1)), np.ones((1, 1, 1))
    attention = Attention.zeros_bias(zero, zero, one, one, causal=True)
    return Network(Embedding(np.array(values, dtype=float)[:, None], np.zeros((length, 1))), (Layer(attention),),
                   Readout(np.ones((1, 1)), np.zeros(1), read="all"), Basis(("x[0]",)), Meta())


def test_theory_rounds_what_leaves_a_block_and_is_exact_inside():
    network = uniform_attention_network([1.0, 1.125, 1.0])
    outputs = run(network, [0, 1, 2], arithmetic("float:3,4", "theory"), trace=True)
    # position 1: head output = (1 + 1.125) / 2 = 1.0625, stored as 1 (tie to even); x = 1.125 + 1 = 2.125,
    #   stored as 2 (a tie between 2 and 2.25; 2 is even). position 2: (1 + 1.125 + 1) / 3 = 1.041666..., in
    #   float64 inside the block, stored as 1; x = 1 + 1 = 2. position 0: 1 + 1 = 2.
    assert outputs.trace["blocks.0.attn.hook_result"][0, 0, :, 0].tolist() == [1.0, 1.0, 1.0]
    assert outputs.trace["blocks.0.hook_resid_mid"][0, :, 0].tolist() == [2.0, 2.0, 2.0]
    # inside the block the pattern is not rounded: 1/3 in float64
    assert outputs.trace["blocks.0.attn.hook_pattern"][0, 0, 2].tolist() == [1 / 3, 1 / 3, 1 / 3]


def test_mixed_computes_inside_blocks_in_fp32_and_stores_in_the_format():
    network = uniform_attention_network([1.0, 1.125, 1.0])
    outputs = run(network, [0, 1, 2], arithmetic("float:3,4", "mixed"), trace=True)
    third = float(np.float32(1 / 3))
    assert outputs.trace["blocks.0.attn.hook_pattern"][0, 0, 2].tolist() == [third] * 3
    assert outputs.trace["blocks.0.hook_resid_mid"][0, :, 0].tolist() == [2.0, 2.0, 2.0]
    # fp32 accumulation: 1 + 2^-24 is a tie in fp32 and rounds to 1; float64 would keep it
    mixed = arithmetic("fp16", "mixed")
    assert mixed.matmul(np.array([[1.0, 2.0 ** -24]]), np.array([[1.0], [1.0]])).tolist() == [[1.0]]
    assert mixed.sum(np.array([[1.0, 2.0 ** -23]]), axis=-1).tolist() == [[1.0 + 2.0 ** -23]]
    assert mixed.store(np.array([1.0 + 2.0 ** -23])).tolist() == [1.0]  # fp16 keeps 10 fraction bits


def test_theory_and_mixed_fixed_overflow_at_store():
    with pytest.raises(OverflowInFormat, match="fixed:2,2 overflow in store"):
        run(readout_network([[3.0]], [[2.0]], [[1.0]], [0.0]), [0], arithmetic("fixed:2,2", "theory"))


def test_theory_refuses_a_run_whose_float64_stand_in_leaves_the_finite_numbers(tmp_path, capsys):
    """Inside a block the exact model holds 2^600 * 2^600 = 2^1200, where float64 holds inf, which a zero weight then
    turns into NaN. A theory run must say it cannot stand in there, not answer from the NaN. Non-finite operands
    (masked scores' -inf, values the format's own rounding sent to inf) pass through as under strict."""
    theory = arithmetic("fp64", "theory")
    big = np.array([2.0 ** 600])
    for step in (lambda: theory.mul(big, big), lambda: theory.add(np.array([1.7e308]), np.array([1.7e308])),
                 lambda: theory.matmul(np.array([[2.0 ** 600, 1.0]]), np.array([[2.0 ** 600], [0.0]])),
                 lambda: theory.sum(np.array([1.7e308, 1.7e308]), axis=-1), lambda: theory.exp(np.array([800.0]))):
        with pytest.raises(StandInOverflow, match="float64 stand-in"):
            step()
    assert np.isnan(theory.mul(np.array([np.inf]), np.array([0.0]))).all()  # the format's inf, as under strict
    assert theory.sub(np.array([-np.inf, 1.0]), 2.0).tolist() == [-np.inf, -1.0]
    assert theory.add(np.array([np.inf]), np.array([1.0])).tolist() == [np.inf]
    # through the executor: the query weight 2^600 meets the embedding 2^600 inside layer 0
    network = uniform_attention_network([2.0 ** 600, 1.0])
    arrays = network.state_dict()
    arrays["blocks.0.attn.W_Q"] = np.full((1, 1, 1), 2.0 ** 600)
    forged = network.with_arrays(arrays)
    with pytest.raises(StandInOverflow):
        run(forged, [0, 1], theory)
    # strict is op by op in fp64, where inf is the format's own value: position 0's score inf * 0 is NaN, no answer
    assert run(forged, [0, 1], arithmetic("fp64", "strict")).predictions.tolist() == [[-1, 0]]
    forged.save(tmp_path / "forged.npz")  # the command line says unknown (status 3), in one line
    assert main(["run", str(tmp_path / "forged.npz"), "--tokens", "0,1", "--format", "fp64", "--semantics",
                 "theory"]) == 3
    assert capsys.readouterr().err.startswith("witness: unknown: theory: the float64 stand-in")


def test_describe_names_format_semantics_and_bits():
    assert arithmetic("fp16").describe() == {"format": "fp16", "semantics": "strict", "p": 16}
    assert arithmetic("fixed:4,4", "theory").describe() == {"format": "fixed:4,4", "semantics": "theory", "p": 9}
    assert arithmetic("bf16", "mixed").describe() == {"format": "bf16", "semantics": "mixed", "p": 16}


@pytest.mark.parametrize("fmt,semantics,message", [
    ("exact", "strict", "exact format cannot be executed"),
    ("fp16", "fast", "unknown semantics"),
    ("float:30,8", "strict", "strict semantics is implemented"),
    ("fixed:20,20", "strict", "strict semantics is implemented"),
    ("fp64", "mixed", "mixed semantics accumulates in fp32"),
    ("float:3,9", "mixed", "mixed semantics accumulates in fp32"),
    ("fp9", "strict", "unknown format"),
])
def test_arithmetic_refuses_what_it_cannot_run(fmt, semantics, message):
    with pytest.raises(ParameterError, match=message):
        arithmetic(fmt, semantics)


def test_rounded_weights_report():
    network = readout_network([[0.1, 1.0]], [[0.5, 2.0 ** -30]], [[1.0], [70000.0]], [0.0])
    assert rounded_weights_report(network, "fp16") == {"embed.W_E": 1, "pos_embed.W_pos": 1, "unembed.W_U": 1}
    assert rounded_weights_report(network, "fp64") == {}
    with pytest.raises(OverflowInFormat, match="weights unembed.W_U"):
        rounded_weights_report(network, "fixed:8,8")


def test_the_last_layer_computes_only_what_the_readout_reads():
    # d_model 1, one attention layer that adds 0, an MLP doubling x. Position 0 holds 4: its MLP value 8 leaves
    # fixed:3,2 ([-8, 7.75]); position 1 holds 0. The readout reads position 1 only, so the untraced run (and the
    # MPFR reference) never computes position 0's MLP: no overflow; the traced run records every position.
    zero = np.zeros((1, 1, 1))
    network = Network(Embedding(np.zeros((1, 1)), np.array([[4.0], [0.0]])),
                      (Layer(Attention.zeros_bias(zero, zero, zero, zero), MLP(np.array([[2.0]]), np.zeros(1),
                                                                               np.array([[1.0]]), np.zeros(1))),),
                      Readout(np.array([[1.0, -1.0]]), np.array([0.0, 0.25])), Basis(("x[0]",)), Meta())
    fmt = "fixed:3,2"
    outputs = run(network, [0, 0], arithmetic(fmt, "strict"))
    assert outputs.logits.tolist() == [[[0.0, 0.25]]] and outputs.predictions.tolist() == [[1]]
    reference = reference_run(network, [0, 0], parse_format(fmt))
    assert reference.logits.tolist() == [[0.0, 0.25]] and reference.predictions.tolist() == [1]
    with pytest.raises(OverflowInFormat, match="fixed:3,2 overflow"):
        run(network, [0, 0], arithmetic(fmt, "strict"), trace=True)
    # every position is computed where the readout reads every one
    every = Network(network.embedding, network.layers, Readout(network.readout.W_U, network.readout.b_U, read="all"),
                    network.basis, network.meta)
    with pytest.raises(OverflowInFormat):
        run(every, [0, 0], arithmetic(fmt, "strict"))


def test_a_run_too_large_for_the_machine_is_refused_before_it_allocates(monkeypatch):
    import witness
    from witness import resources
    from witness.execute import run_bytes

    network = witness.compile("composition", L=1, m=4)
    tokens = network.task.random_tokens(np.random.default_rng(0), 200_000)
    estimate = run_bytes(network, *tokens.shape)
    assert estimate > 8 * 8 * tokens.size * network.d_model  # at least the live residual streams
    monkeypatch.setattr(resources, "available_bytes", lambda: estimate)  # 75% of it is usable: too little
    with pytest.raises(resources.TooLarge, match="running 200000 inputs of"):
        run(network, tokens)
    monkeypatch.setattr(resources, "available_bytes", lambda: 2 * estimate)
    assert run(network, tokens[:10]).predictions.shape == (10, 1)


def test_a_precision_search_counts_a_run_that_cannot_stand_in_as_unknown_not_failed():
    """A format whose theory run leaves float64's finite numbers decides nothing about the exact model: the search
    records it as unknown with the reason and goes on to the next format."""
    from verify.precision import min_precision
    from verify.result import Result, Status

    def checker(fmt, semantics):
        if fmt.bits < 6:
            raise StandInOverflow("theory: the float64 stand-in for exact arithmetic gave inf")
        return Result(Status.VERIFIED, "exhaustive", {"format": fmt.name, "semantics": semantics}, 1, 0)

    found = min_precision(checker, "float", "theory", max_bits=8)
    assert found.p == 6
    assert {trial.status for trial in found.below} == {"unknown"}
    assert all("stand-in" in trial.note for trial in found.below)
