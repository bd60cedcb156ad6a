"""The encoder for composition (constructions/composition_encoder.py): ceil(log2 L) + 2 layers of bidirectional
attention answer every input they are checked on, at fp16 under strict rounding.

Expected answers come from the literal reference (tests/oracles/reference_tasks.py), never from the task code under
test; a second forward pass, written here from the saved file's arrays alone (float64, bidirectional softmax, ReLU
MLPs, the readout at the last position), must agree with it -- and must not once the causal mask is forced on.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import witness
from constructions.composition import OFF_TARGET_MASS_BOUND, SIGN_GAIN
from constructions.composition_encoder import KEEP_WEIGHT, doubling_count, table_weight
from constructions.residual import CODE_GAP
from tests.oracles.reference_tasks import (all_composition_inputs, composition_answer_from_tokens,
                                           composition_token_list, domain_sizes, parse_composition_tokens)
from verify import check
from verify.result import Status
from witness.arith.semantics import arithmetic
from witness.execute import run
from witness.ir import MLP, Layer, Network
from witness.mixers import Attention

FP16_STRICT = arithmetic("fp16", "strict")
HEADER_KEY = "__witness_header__"

#: The issue's size: 8 tables over domains 2, 4, ..., 256, a 512-token prompt.
ISSUE_SIZE = {"L": 8, "m": 2, "n": [2] * 7}


@functools.lru_cache(maxsize=None)
def encoder(L: int, m: int, n: tuple[int, ...]):
    return witness.compile("composition_encoder", L=L, m=m, n=list(n))


def issue_network():
    return encoder(ISSUE_SIZE["L"], ISSUE_SIZE["m"], tuple(ISSUE_SIZE["n"]))


def reference_answers(m: int, n, batch) -> list[int]:
    return [composition_answer_from_tokens(m, tuple(n), row) for row in batch]


def fp16_strict_answers(net, batch) -> list[int]:
    return run(net, np.asarray(batch), FP16_STRICT).predictions[:, 0].tolist()


# -- the shape ---------------------------------------------------------------------------------------------------
def test_shape_at_the_issue_size():
    net = issue_network()
    budget = net.budget(16)
    assert len(net.layers) == 5 <= doubling_count(8) + 3 == 6  # layer 0, three doublings, the read
    assert (budget.H, budget.d_head, budget.d_model) == (2, 19, 150)
    assert all(isinstance(layer.mixer, Attention) and not layer.mixer.causal for layer in net.layers)


@pytest.mark.parametrize("L", range(1, 10))
def test_layer_count_is_ceil_log2_L_plus_two(L):
    net = encoder(L, 2, (1,) * (L - 1))
    assert len(net.layers) == (L - 1).bit_length() + 2 <= (L - 1).bit_length() + 3


def test_the_scale_constants_buy_what_the_argument_uses():
    for beta in range(1, 12):
        for b_hi in range(0, 8):
            C_T = table_weight(beta, b_hi)  # another table loses CODE_GAP C_T and gains at most beta b_hi
            assert CODE_GAP * C_T - beta * b_hi >= CODE_GAP * beta > CODE_GAP * (C_T - 1) - beta * b_hi
    assert KEEP_WEIGHT == 2 * SIGN_GAIN  # silences SIGN_GAIN F (- 1) for every |F| < 2
    notes = issue_network().meta.notes
    assert (511 * math.exp(-CODE_GAP * notes["beta"]) <= OFF_TARGET_MASS_BOUND
            < 511 * math.exp(-CODE_GAP * (notes["beta"] - 1)))  # the least beta for 512 tokens
    assert notes["C"] == CODE_GAP * notes["beta"] and notes["table_weight"] == table_weight(notes["beta"], 1)


# -- every input of small families, at fp16 strict -----------------------------------------------------------------
# (L, m, n, inputs): m * prod N^N * prod n. L = 3, 5, 6 clamp hops past table L; n_l = 1 leaves a table without digits.
@pytest.mark.parametrize("L, m, n, count", [
    (1, 3, (), 81), (2, 2, (2,), 4096), (3, 1, (2, 2), 4096), (4, 1, (2, 1, 1), 128), (4, 2, (1, 1, 1), 512),
    (5, 1, (2, 1, 1, 1), 512), (6, 2, (1, 1, 1, 1, 1), 8192),
])
def test_every_input_of_small_families_at_fp16_strict(L, m, n, count):
    net = encoder(L, m, n)
    result = check.exhaustive(net, FP16_STRICT)
    assert result.status == Status.VERIFIED
    assert result.failures == 0 and result.checked == count
    inputs = np.array(list(all_composition_inputs(m, n)), dtype=np.int64)
    assert fp16_strict_answers(net, inputs) == reference_answers(m, n, inputs)


# -- a forward pass from the file's arrays alone ---------------------------------------------------------------------
def file_arrays(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name].astype(np.float64) for name in archive.files if name != HEADER_KEY}


def plain_forward(arrays: dict[str, np.ndarray], tokens, causal: bool = False) -> list[int]:
    """The argmax at the last position (-1 on a tie) of every sequence: residual blocks, softmax attention over
    every key (or, with `causal`, the keys up to the query's own), ReLU MLPs, in float64."""
    tokens = np.asarray(tokens)
    length = tokens.shape[1]
    x = arrays["embed.W_E"][tokens] + arrays["pos_embed.W_pos"][:length]
    visible = np.tril(np.ones((length, length), bool)) if causal else np.ones((length, length), bool)
    layer = 0
    while f"blocks.{layer}.attn.W_Q" in arrays:
        attn = {name[len(f"blocks.{layer}.attn."):]: array for name, array in arrays.items()
                if name.startswith(f"blocks.{layer}.attn.")}
        out = np.broadcast_to(attn["b_O"], x.shape).copy()
        for h in range(attn["W_Q"].shape[0]):
            q, k, v = (x @ attn[f"W_{kind}"][h] + attn[f"b_{kind}"][h] for kind in "QKV")
            scores = np.where(visible, q @ np.swapaxes(k, 1, 2), -np.inf)
            weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
            out += (weights / weights.sum(axis=-1, keepdims=True)) @ v @ attn["W_O"][h]
        x = x + out
        if f"blocks.{layer}.mlp.W_in" in arrays:
            mlp = {kind: arrays[f"blocks.{layer}.mlp.{kind}"] for kind in ("W_in", "b_in", "W_out", "b_out")}
            x = x + np.maximum(x @ mlp["W_in"] + mlp["b_in"], 0.0) @ mlp["W_out"] + mlp["b_out"]
        layer += 1
    logits = x[:, -1] @ arrays["unembed.W_U"] + arrays["unembed.b_U"]
    top = logits.max(axis=1, keepdims=True)
    return [int(row.argmax()) if (row == best).sum() == 1 else -1 for row, best in zip(logits, top)]


def test_plain_forward_from_the_file_agrees_and_needs_both_directions(tmp_path):
    L, m, n = 3, 1, (2, 2)
    path = tmp_path / "encoder.npz"
    encoder(L, m, n).save(path)
    arrays = file_arrays(path)
    inputs = np.array(list(all_composition_inputs(m, n)), dtype=np.int64)
    expected = reference_answers(m, n, inputs)
    assert plain_forward(arrays, inputs) == expected
    # the table positions read the query in layer 0, and the query sits last: a causal mask hides it from them
    causal = plain_forward(arrays, inputs, causal=True)
    assert sum(got != want for got, want in zip(causal, expected)) > len(inputs) // 4


def test_plain_forward_from_the_file_at_the_issue_size(tmp_path):
    path = tmp_path / "encoder8.npz"
    issue_network().save(path)
    arrays = file_arrays(path)
    inputs = issue_network().task.random_tokens(seed=5, count=12)
    expected = reference_answers(ISSUE_SIZE["m"], ISSUE_SIZE["n"], inputs)
    assert plain_forward(arrays, inputs) == expected
    assert plain_forward(arrays, inputs, causal=True) != expected


# -- adversarial inputs at the issue's size --------------------------------------------------------------------------
def adversarial_tables(kind: str, sizes: list[int], rng: np.random.Generator) -> list[list[int]]:
    """Tables z_1 .. z_L of one kind (`sizes` = N_0 .. N_{L-1}; table l has N_{l-1} entries in [N_{l-1}])."""
    out = []
    for l, size in enumerate(sizes, start=1):
        address, low_size = np.arange(size), sizes[l - 2] if l >= 2 else size
        table = {
            "constant": np.full(size, rng.integers(size)),
            "all zero": np.zeros(size, int),
            "all top": np.full(size, size - 1),  # every code all +1
            "permutation": rng.permutation(size),
            "reversal": size - 1 - address,
            "revisit": address % low_size,  # i_l = i_1 for every l: the chain keeps revisiting one index
            "two-cycle": (address % low_size) ^ (1 if low_size % 2 == 0 else 0),
            "mirrored blocks": np.tile(rng.integers(low_size, size=low_size), size // low_size),
        }[kind]
        out.append([int(v) for v in table])
    return out


ADVERSARIAL_KINDS = ("constant", "all zero", "all top", "permutation", "reversal", "revisit", "two-cycle",
                     "mirrored blocks", "complement")


def adversarial_tokens(task, seed: int) -> np.ndarray:
    """Per kind, three queries (all 0, all top, random) and a random seed. `complement`: random tables whose every
    entry off the chain is the complement of the chain's entry in that table, so every key that is not the target
    carries the opposite code."""
    rng = np.random.default_rng(seed)
    sizes, rows = domain_sizes(task.m, task.n), []
    for kind in ADVERSARIAL_KINDS:
        for w in ([0] * len(task.n), [n_l - 1 for n_l in task.n], [int(rng.integers(n_l)) for n_l in task.n]):
            z0 = int(rng.integers(task.m))
            if kind == "complement":
                tables = adversarial_tables("permutation", sizes, rng)
                chain, index = [], z0
                for l, table in enumerate(tables, start=1):
                    entry = index if l == 1 else w[l - 2] * sizes[l - 2] + index
                    chain.append(entry)
                    index = table[entry]
                    tables[l - 1] = [index if a == entry else sizes[l - 1] - 1 - index for a in range(sizes[l - 1])]
            else:
                tables = adversarial_tables(kind, sizes, rng)
            rows.append(composition_token_list(task.m, task.n, z0, tables, w, "paper"))
    return np.array(rows, dtype=np.int64)


def test_adversarial_inputs_at_the_issue_size_at_fp16_strict():
    net = issue_network()
    inputs = adversarial_tokens(net.task, seed=0)
    assert len(inputs) == 3 * len(ADVERSARIAL_KINDS)
    assert fp16_strict_answers(net, inputs) == reference_answers(ISSUE_SIZE["m"], ISSUE_SIZE["n"], inputs)


# -- the argument, slot by slot ----------------------------------------------------------------------------------------
def reach(tables, w, sizes, L: int, l: int, a: int, s: int) -> int:
    """Where min(2^s, L - l + 1) hops starting with entry (l, a) land (the module docstring's reach_s)."""
    value = tables[l - 1][a]
    for t in range(l + 1, min(l + 2 ** s, L + 1)):
        value = tables[t - 1][w[t - 2] * sizes[t - 2] + value]
    return value


def pm1(value: int, width: int) -> list[float]:
    return [1.0 if (value >> k) & 1 else -1.0 for k in range(width)]


@pytest.mark.parametrize("L, m, n", [(5, 2, (2, 1, 2, 1)), (7, 1, (2, 1, 2, 1, 1, 2))])
def test_selected_entries_hold_exact_codes_of_their_reach(L, m, n):
    net = encoder(L, m, n)
    task, sizes = net.task, domain_sizes(m, n)
    tokens = task.random_tokens(seed=L, count=15)
    trace = run(net, tokens, FP16_STRICT, trace=True).trace
    for row, sequence in enumerate(tokens):
        z0, tables, w = parse_composition_tokens(m, n, sequence, "paper")
        after_spread = trace["blocks.0.hook_resid_post"][row]
        assert (after_spread[:, net.basis.group("seed")] == pm1(z0, len(net.basis.group("seed")))).all()
        for s in range(1, doubling_count(L) + 1):
            stream = trace[f"blocks.{s}.hook_resid_post"][row]
            slot = net.basis.group(f"reach{s}")
            assert np.abs(stream[:, slot]).max() <= 1  # unselected entries hold anything, but within [-1, 1]
            for l in range(1, L + 1):
                start = task.segment(f"z{l}").start
                for a in range(sizes[l - 1]):
                    if l == 1 or a // sizes[l - 2] == w[l - 2]:  # the entries the query selects
                        code = pm1(reach(tables, w, sizes, L, l, a, s), len(slot))
                        assert stream[start + a, slot].tolist() == code, (l, a, s)  # exact, no tolerance
        answer = trace[f"blocks.{doubling_count(L) + 1}.hook_resid_post"][row, -1, net.basis.group("answer")]
        assert answer.tolist() == pm1(composition_answer_from_tokens(m, n, sequence), answer.size)


def without_keep_gates(net):
    """The network with every keep{s} direction cut from the MLPs' inputs: no position keeps its reach."""
    layers = []
    for layer in net.layers:
        W_in = np.array(layer.mlp.W_in, dtype=np.float64)
        W_in[[index for index, label in enumerate(net.basis.labels) if label.startswith("keep")]] = 0.0
        layers.append(Layer(layer.mixer, MLP(W_in, layer.mlp.b_in, layer.mlp.W_out, layer.mlp.b_out)))
    return Network(net.embedding, tuple(layers), net.readout, net.basis, net.meta)


@pytest.mark.parametrize("L, m, n", [(3, 1, (2, 2)), (5, 1, (2, 1, 1, 1))])
def test_the_clamp_past_table_L_is_load_bearing(L, m, n):
    """At L = 3 and 5 the entry (1, z_0) composes with a table whose reach was clamped (table 3, table 5); without
    the keep gates that reach is a cleaned fetch of nothing, and some input is answered wrongly."""
    result = check.exhaustive(without_keep_gates(encoder(L, m, n)), FP16_STRICT)
    assert result.status == Status.FALSIFIED


# -- a property at the issue's size ------------------------------------------------------------------------------------
@st.composite
def issue_inputs(draw):
    """Inputs of the issue's family, each table drawn whole at random or as a constant or a shifted identity, so
    that shrinking goes towards simple tables."""
    sizes = domain_sizes(ISSUE_SIZE["m"], tuple(ISSUE_SIZE["n"]))
    tables = []
    for size in sizes:
        shape = draw(st.sampled_from(("random", "constant", "shift")))
        if shape == "random":
            tables.append(draw(st.lists(st.integers(0, size - 1), min_size=size, max_size=size)))
        else:
            offset = draw(st.integers(0, size - 1))
            tables.append([offset if shape == "constant" else (a + offset) % size for a in range(size)])
    z0 = draw(st.integers(0, ISSUE_SIZE["m"] - 1))
    w = [draw(st.integers(0, n_l - 1)) for n_l in ISSUE_SIZE["n"]]
    return composition_token_list(ISSUE_SIZE["m"], tuple(ISSUE_SIZE["n"]), z0, tables, w, "paper")


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(tokens=issue_inputs())
def test_property_at_the_issue_size_at_fp16_strict(tokens):
    net = issue_network()
    assert len(net.layers) <= doubling_count(8) + 3
    assert fp16_strict_answers(net, [tokens]) == reference_answers(ISSUE_SIZE["m"], ISSUE_SIZE["n"], [tokens])


def test_compile_and_verify_from_the_command_line(tmp_path, capsys):
    from cli.main import main

    path = tmp_path / "encoder.npz"
    assert main(["compile", "composition_encoder", "--L", "3", "--m", "1", "--n", "2", "2", "-o", str(path)]) == 0
    assert main(["verify", str(path), "--format", "fp16", "--semantics", "strict", "--exhaustive"]) == 0
    assert "4096" in capsys.readouterr().out
