"""The two-layer chain-of-thought composition network (constructions/composition_cot.py) generates i_1 .. i_L on
every input it is claimed for, at fp16 strict.

Expected chains come from the literal reference (tests/oracles/reference_tasks.py), never from the task code; a
second forward pass, written here from the saved file's arrays alone (float64, causal softmax, one generated token
at a time), must generate the same chains.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import witness
from constructions.composition import OFF_TARGET_MASS_BOUND
from constructions.composition_cot import THRESHOLD_GAIN
from lab import strategies as ws
from tests.oracles.reference_forward import load_npz, n_layers
from tests.oracles.reference_tasks import (all_composition_inputs, composition_chain, composition_token_list,
                                           parse_composition_tokens)
from verify import check
from verify.result import Status
from witness.arith import arithmetic
from witness.errors import ParameterError
from witness.execute import run
from witness.generate import generate

FP16_STRICT = arithmetic("fp16", "strict")


def chains(m: int, n, batch) -> np.ndarray:
    """i_1 .. i_L of every input, by the literal reference."""
    rows = []
    for tokens in batch:
        z0, tables, w = parse_composition_tokens(m, tuple(n), tokens, "paper")
        rows.append(composition_chain(m, tuple(n), z0, tables, w)[1:])
    return np.array(rows)


def reference_generate(path, batch: np.ndarray, k: int) -> np.ndarray:
    """Greedy generation by a plain float64 forward pass over the saved arrays (TransformerLens names, batched over
    inputs): embedding, then per layer causal softmax attention and a ReLU MLP added to the stream, then the
    readout at the last position; a tie generates -1."""
    arrays, head = load_npz(path)
    transcript = np.array(batch, dtype=np.int64)
    out = []
    for _ in range(k):
        length = transcript.shape[1]
        x = arrays["embed.W_E"][transcript] + arrays["pos_embed.W_pos"][:length]
        mask = np.triu(np.ones((length, length), dtype=bool), 1)
        for l in range(n_layers(arrays)):
            a = {name: arrays[f"blocks.{l}.attn.{name}"] for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K",
                                                                     "b_V", "b_O")}
            assert head["structure"]["layers"][l]["causal"]
            mixed = np.zeros_like(x) + a["b_O"]
            for h in range(a["W_Q"].shape[0]):
                q, key, v = (x @ a[f"W_{s}"][h] + a[f"b_{s}"][h] for s in "QKV")
                scores = np.where(mask, -np.inf, q @ key.transpose(0, 2, 1))
                weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
                mixed += (weights / weights.sum(axis=-1, keepdims=True)) @ v @ a["W_O"][h]
            x = x + mixed
            p = {name: arrays[f"blocks.{l}.mlp.{name}"] for name in ("W_in", "b_in", "W_out", "b_out")}
            x = x + np.maximum(x @ p["W_in"] + p["b_in"], 0) @ p["W_out"] + p["b_out"]
        logits = x[:, -1] @ arrays["unembed.W_U"] + arrays["unembed.b_U"]
        best = logits.argmax(axis=-1)
        tied = (logits == logits.max(axis=-1, keepdims=True)).sum(axis=-1) > 1
        out.append(np.where(tied, -1, best))
        transcript = np.concatenate([transcript, out[-1][:, None]], axis=1)
    return np.stack(out, axis=1)


# (L, m, n, inputs): m * m^m for L = 1; 2 * 2^2 * 4^4 * 2 = 4096; 2 * 2^2 * 2^2 * 4^4 * 2 = 16384.
@pytest.mark.parametrize("L, m, n, count", [(1, 2, [], 8), (1, 3, [], 81), (1, 4, [], 1024), (2, 2, [2], 4096),
                                            (3, 2, [1, 2], 16384), (3, 1, [2, 2], 1 * 2**2 * 4**4 * 4)])
def test_every_input_of_small_families_at_fp16_strict_and_by_a_plain_forward_pass(L, m, n, count, tmp_path):
    net = witness.compile("composition_cot", L=L, m=m, n=n)
    result = check.exhaustive(net, FP16_STRICT)
    assert result.status == Status.VERIFIED and result.checked == count and result.failures == 0
    inputs = np.array(list(all_composition_inputs(m, tuple(n))), dtype=np.int64)
    assert len(inputs) == count
    expected = chains(m, n, inputs)
    assert np.array_equal(generate(net, inputs, L, FP16_STRICT).tokens, expected)
    net.save(tmp_path / "cot.npz")
    assert np.array_equal(reference_generate(tmp_path / "cot.npz", inputs, L), expected)


def adversarial_inputs(m: int, n) -> list[list[int]]:
    """Constant tables (every value, so every chain repeats one value), all-zero and all-maximal tables, tables
    that send every address to its low part (i_l = i_0 for every l), with every seed and every query."""
    sizes = [m]
    for n_l in n:
        sizes.append(sizes[-1] * n_l)
    fills = [lambda size, c=c: [min(c, size - 1)] * size for c in range(sizes[-1])]
    fills += [lambda size: [a % m for a in range(size)], lambda size: [size - 1 - a % m for a in range(size)],
              lambda size: [(a * 7 + 3) % size for a in range(size)]]
    queries = [tuple(int(d) for d in np.unravel_index(q, tuple(reversed(n)))[::-1]) for q in range(int(np.prod(n)))]
    return [composition_token_list(m, tuple(n), z0, [fill(size) for size in sizes], w, "paper")
            for fill in fills for z0 in range(m) for w in queries]


@pytest.mark.parametrize("L, m, n", [(4, 4, [2, 2, 2]), (3, 3, [3, 2]), (5, 2, [1, 2, 1, 2])])
def test_adversarial_tables(L, m, n, tmp_path):
    net = witness.compile("composition_cot", L=L, m=m, n=n)
    inputs = np.array(adversarial_inputs(m, n), dtype=np.int64)
    expected = chains(m, n, inputs)
    assert np.array_equal(generate(net, inputs, L, FP16_STRICT).tokens, expected)
    net.save(tmp_path / "cot.npz")
    assert np.array_equal(reference_generate(tmp_path / "cot.npz", inputs, L), expected)


@pytest.fixture(scope="module")
def issue_size():
    return witness.compile("composition_cot", L=4, m=4, n=[2, 2, 2])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=ws.tokens(witness.tasks.CompositionCoT(4, 4, (2, 2, 2)), max_batch=4))
def test_random_instances_at_the_issues_size_at_fp16_strict(issue_size, batch):
    assert np.array_equal(generate(issue_size, batch, 4, FP16_STRICT).tokens, chains(4, [2, 2, 2], batch))


def test_shape_at_the_issues_size(issue_size):
    """2 layers, one head, d_head = 3 + b_T + b_V + sum b_l = 3 + 2 + 5 + 3, d_model = 4 + 2 b_T + 6 b_V +
    4 sum b_l = 50, the value ids and query ids as vocabulary, and room for the prompt plus L - 1 tokens."""
    net = issue_size
    assert len(net.layers) == 2 and {layer.mixer.n_heads for layer in net.layers} == {1}
    assert {layer.mixer.d_head for layer in net.layers} == {13} and net.d_model == 50
    assert (net.d_vocab, net.d_vocab_out, net.n_ctx) == (32 + 8, 32, 62 + 3)
    assert net.meta.task == "composition_cot" and net.meta.params["layout"] == "paper"


def test_widths_grow_with_log_n():
    """Multiplying every domain by 16 adds 4 bits to each value code (6 groups of b_V in the stream)."""
    small, large = (witness.compile("composition_cot", L=3, m=m, n=[2, 2]) for m in (2, 32))
    assert large.layers[0].mixer.d_head - small.layers[0].mixer.d_head == 4
    assert large.d_model - small.d_model == 6 * 4


def test_step_slots_hold_exact_codes(issue_size):
    """At every step's last position, after layer 0, val + R0 is exactly code(i_{l-1}) and each Rw{l} exactly
    code(w_l) (0 at the query position), and Rnext exactly code(i_l) after layer 1: the threshold MLPs' claims."""
    net, task = issue_size, issue_size.task
    tokens = task.random_tokens(9, 50)
    chain = task.hop_answers(tokens)
    z0 = tokens[:, task.segment("z0").start]
    digits = task.decode_query(tokens[:, task.segment("w").start] - task.value_vocab)
    code = lambda values, width: 2 * ((np.asarray(values)[:, None] >> np.arange(width)) & 1) - 1  # noqa: E731
    group = lambda name: net.basis.group(name)  # noqa: E731
    for step in range(task.L):
        transcript = np.concatenate([tokens, chain[:, :step]], axis=1)
        trace = run(net, transcript, FP16_STRICT, trace=True).trace
        after0, after1 = trace["blocks.0.hook_resid_post"][:, -1], trace["blocks.1.hook_resid_post"][:, -1]
        previous = z0 if step == 0 else chain[:, step - 1]
        assert np.array_equal(after0[:, group("val")] + after0[:, group("R0")], code(previous, 5))
        for l in range(1, task.L):
            assert np.array_equal(after0[:, group(f"Rw{l}")], code(digits[l - 1], 1) * (step > 0))
        assert np.array_equal(after1[:, group("Rnext")], code(chain[:, step], 5))


def test_threshold_gain_is_the_only_one_that_works():
    """G epsilon <= 1 (a diluted 0 stays below both units' thresholds) and G (1 - 2 epsilon) >= 2 (a diluted ±1
    clears both), at the construction's epsilon; and G is a power of two, so G F is exact."""
    assert THRESHOLD_GAIN * OFF_TARGET_MASS_BOUND <= 1 and THRESHOLD_GAIN * (1 - 2 * OFF_TARGET_MASS_BOUND) >= 2
    assert THRESHOLD_GAIN == 4


def test_a_broken_network_is_falsified_with_the_generated_tokens_as_its_output():
    """Moving the readout's code of the value 0 onto the code of 1 makes 0 and 1 tie whenever i_l is 0 or 1: the
    exhaustive check falsifies it, and its counterexample shows the chain against what was generated."""
    net = witness.compile("composition_cot", L=2, m=2, n=[2])
    W_U = np.array(net.readout.W_U, dtype=np.float64)
    W_U[:, 0] = W_U[:, 1]
    broken = net.with_arrays({"unembed.W_U": W_U})
    result = check.exhaustive(broken, FP16_STRICT)
    assert result.status == Status.FALSIFIED
    example = result.counterexample
    assert example.expected == chains(2, [2], [example.tokens])[0].tolist()
    assert isinstance(example.output, list) and len(example.output) == 2 and -1 in example.output
    assert example.trace  # the traced run of the first step that went wrong


def test_certify_and_margins_say_what_they_do_not_cover(issue_size):
    from verify.certify import certify

    assert certify(issue_size, FP16_STRICT).status == Status.UNKNOWN
    with pytest.raises(ParameterError, match="answers by the tokens it generates"):
        check.margin(issue_size, issue_size.task.random_tokens(0, 2), FP16_STRICT)


def test_the_transformer_lens_export_generates_the_same_tokens(issue_size):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformer_lens.model_bridge.sources.native")
    from lab.torch import to_transformer_lens

    bridge = to_transformer_lens(issue_size)
    transcript = torch.as_tensor(issue_size.task.random_tokens(4, 50))
    with torch.no_grad():
        for _ in range(4):
            transcript = torch.cat([transcript, bridge(transcript)[:, -1].argmax(-1, keepdim=True)], dim=1)
    tokens = issue_size.task.random_tokens(4, 50)
    assert np.array_equal(transcript[:, -4:].numpy(), chains(4, [2, 2, 2], tokens))


def test_parameters_outside_the_task_are_refused():
    with pytest.raises(ParameterError):
        witness.compile("composition_cot", L=0, m=2)
    with pytest.raises(ParameterError, match="n must have L-1"):
        witness.compile("composition_cot", L=3, m=2, n=[2])


def test_the_command_line_generates_verifies_and_reports_a_tie(tmp_path, capsys):
    import json

    from cli.main import main
    from witness.io import load

    path, broken_path = tmp_path / "cot.npz", tmp_path / "broken.npz"
    assert main(["compile", "composition_cot", "--L", "2", "--m", "2", "--n", "2", "-o", str(path)]) == 0
    net = load(path)
    tokens = net.task.random_tokens(0, 40)
    chain = chains(2, [2], tokens)
    row = int(np.flatnonzero(chain[:, 0] <= 1)[0])  # i_1 is 0 or 1: the broken readout below ties there
    text = ",".join(map(str, tokens[row]))
    fp16 = ["--format", "fp16", "--semantics", "strict"]
    capsys.readouterr()
    assert main(["run", str(path), "--tokens", text, "--json", *fp16]) == 0
    assert json.loads(capsys.readouterr().out) == {"generated": chain[row].tolist(), "output": int(chain[row, -1]),
                                                   "stopped_by_tie": None}
    assert main(["run", str(path), "--tokens", text]) == 0
    assert capsys.readouterr().out.strip() == f"generated {chain[row, 0]} {chain[row, 1]}; answer {chain[row, 1]}"
    assert main(["verify", str(path), "--exhaustive", "--json", *fp16]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["status"], verdict["checked"], verdict["failures"]) == ("verified", 4096, 0)

    W_U = np.array(net.readout.W_U, dtype=np.float64)
    W_U[:, 0] = W_U[:, 1]
    net.with_arrays({"unembed.W_U": W_U}).save(broken_path)
    assert main(["run", str(broken_path), "--tokens", text, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"generated": [], "output": -1, "stopped_by_tie": 0}
    assert main(["run", str(broken_path), "--tokens", text]) == 0
    assert capsys.readouterr().out.strip() == "generated nothing; a tie at step 0 (0-based) stopped generation"
    assert main(["run", str(broken_path), "--random", "50", *fp16]) == 1
