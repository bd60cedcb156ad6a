"""lab.train on chain-of-thought tasks: teacher-forced batches, an accuracy counted by greedy generation (recounted
here with witness.generate), seeded bit-for-bit runs, and the one-line refusals."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")

import witness  # noqa: E402
from witness.errors import ParameterError  # noqa: E402
from witness.generate import generate, generated_count  # noqa: E402
from witness.tasks import Composition, CompositionCoT, CompositionCoTPairs  # noqa: E402
from lab.train import Architecture, LayerSpec, evaluation_inputs, read_slice, train, training_batch  # noqa: E402

TWO_FULL = Architecture(H=1, d_head=8, d_model=32, layers=(LayerSpec(), LayerSpec()))


def chain(tokens, L, m, n):
    """The chain i_1 .. i_L and the addresses a_1 .. a_L it reads, followed through the `paper` layout
    [z_L] .. [z_1] [z_0] [w] directly -- independent of the task classes. [batch, L] each."""
    sizes = [m]
    for n_l in n:
        sizes.append(sizes[-1] * n_l)
    start = {}
    offset = 0
    for l in range(L, 0, -1):
        start[l] = offset
        offset += sizes[l - 1]
    z0, query = tokens[:, offset], tokens[:, offset + 1] - sizes[-1]
    w = []
    for n_l in n:
        w.append(query % n_l)
        query = query // n_l
    rows = np.arange(len(tokens))
    address, hops, addresses = z0, [], []
    for l in range(1, L + 1):
        if l > 1:
            address = w[l - 2] * sizes[l - 2] + hops[-1]
        addresses.append(address)
        hops.append(tokens[rows, start[l] + address])
    return np.stack(hops, axis=1), np.stack(addresses, axis=1)


@pytest.mark.parametrize("L, m, n", [(1, 3, ()), (2, 3, (2,)), (3, 2, (2, 3))])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_batch_is_the_prompt_and_the_gold_chain_prefix(L, m, n, seed):
    task = CompositionCoT(L, m, n)
    prompts = task.random_tokens(np.random.default_rng(seed), 50)
    hops, _ = chain(prompts, L, m, n)
    inputs, targets = training_batch(task, prompts)
    assert inputs.shape == (50, task.context_length) == (50, task.prompt_length + L - 1)
    assert np.array_equal(inputs, np.concatenate([prompts, hops[:, :L - 1]], axis=1))
    assert np.array_equal(targets, hops)
    assert np.array_equal(targets, task.answers(prompts)) and np.array_equal(targets, task.hop_answers(prompts))
    # the read positions give i_1 .. i_L: the last L positions of the transcript
    assert read_slice(task) == slice(task.prompt_length - 1, task.prompt_length + L - 1)
    # the one-pass task is untouched: its prompts, its answer
    plain = Composition(L, m, n)
    inputs, targets = training_batch(plain, prompts)
    assert inputs is prompts and np.array_equal(targets[:, 0], hops[:, -1]) and read_slice(plain) is None


@pytest.mark.parametrize("seed", [0, 3])
def test_the_pairs_batch_feeds_back_the_addresses(seed):
    task = CompositionCoTPairs(2, 3, (2,))
    prompts = task.random_tokens(np.random.default_rng(seed), 50)
    hops, addresses = chain(prompts, 2, 3, (2,))
    inputs, targets = training_batch(task, prompts)
    assert np.array_equal(inputs, np.concatenate([prompts, addresses], axis=1))
    assert inputs.shape[1] == task.context_length
    assert np.array_equal(targets, np.concatenate([addresses, hops[:, -1:]], axis=1))
    assert read_slice(task) == slice(task.prompt_length - 1, task.context_length)


def recount(network, tokens, task):
    """Generation accuracy, recounted: the whole chain generated, -1 (a tie) never matching."""
    expected = task.answers(tokens).reshape(len(tokens), -1)
    generated = generate(network, tokens, expected.shape[1]).tokens
    return float((generated == expected).all(axis=1).mean())


@pytest.mark.parametrize("task", [CompositionCoT(2, 4, (2,)), CompositionCoTPairs(2, 2, (2,))], ids=str)
def test_a_short_run_reports_the_generation_accuracy(task):
    network, report = train(TWO_FULL, task, steps=40, seed=0)
    assert network.n_ctx == task.context_length and generated_count(network) == task.generated_tokens
    assert network.readout.read == "last" and network.task == task
    tokens, exhaustive = evaluation_inputs(task, 0)
    assert (report.eval_inputs, report.exhaustive) == (len(tokens), exhaustive)
    assert 0.0 <= report.accuracy <= 1.0
    assert report.accuracy == recount(network, tokens, task)
    assert report.hop_weight == 0.0
    assert network.meta.notes["trained"]["teacher_forced"] is True


def test_the_same_seed_gives_the_same_weights_bit_for_bit():
    task = CompositionCoT(2, 2, (2,))
    a, report_a = train(TWO_FULL, task, steps=20, seed=4, eval_every=5)
    b, report_b = train(TWO_FULL, task, steps=20, seed=4, eval_every=5)
    c, _ = train(TWO_FULL, task, steps=20, seed=5, eval_every=5)
    for name, array in a.state_dict().items():
        assert np.array_equal(array, b.state_dict()[name]), name
    assert report_a.history == report_b.history and report_a.accuracy == report_b.accuracy
    assert not np.array_equal(a.state_dict()["embed.W_E"], c.state_dict()["embed.W_E"])


@pytest.mark.parametrize("task", [CompositionCoT(1, 4), CompositionCoT(2, 2, (2,))], ids=str)
def test_two_full_layers_learn_the_chain(task):
    """Two causal full-attention layers (each generated token is one look-up given the one before it) reach every
    input of these small families by generation in 800 steps (about 3 s each on 2 cores). Seed 0; of seeds 0-4,
    5 and 4 reached >= 0.98 when this was written (one stalled at 0.96 on L = 2), so the pinned seed is a choice."""
    network, report = train(TWO_FULL, task, steps=800, seed=0)
    tokens, exhaustive = evaluation_inputs(task, 0)
    assert exhaustive and report.accuracy >= 0.98
    assert recount(network, tokens, task) == report.accuracy


def test_refusals_are_one_line():
    task = CompositionCoT(2, 2, (2,))
    with pytest.raises(ParameterError, match="hop_weight must be 0 for composition_cot") as hop:
        train(TWO_FULL, task, steps=1, hop_weight=1.0)
    everywhere = Architecture(H=1, d_head=8, d_model=32, layers=(LayerSpec(),), read="all")
    with pytest.raises(ParameterError, match="read at the last position") as read:
        train(everywhere, task, steps=1)
    open_layer = Architecture(H=1, d_head=8, d_model=32, layers=(LayerSpec(), LayerSpec(causal=False)))
    with pytest.raises(ParameterError, match="layer 1 is bidirectional") as causal:
        train(open_layer, task, steps=1)
    for error in (hop, read, causal):
        assert "\n" not in str(error.value)


def test_the_command_trains_and_the_file_generates(tmp_path, capsys):
    from cli.main import main

    out = tmp_path / "cot.npz"
    argv = ["train", "composition_cot", "--L", "2", "--m", "4", "--n", "2", "--arch", "full", "--layers", "2",
            "--H", "1", "--d-head", "8", "--d-model", "32", "--steps", "30", "-o", str(out)]
    assert main(argv + ["--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    accuracy = payload["accuracy"]
    assert (accuracy["format"], accuracy["semantics"], accuracy["exhaustive"]) == ("fp64", "strict", False)
    assert "greedy generation produces all 2 answer tokens" in accuracy["correct_means"]
    assert payload["hop_weight"] == 0.0 and payload["generated_tokens"] == 2 and payload["teacher_forced"]
    network = witness.load(out)
    task = CompositionCoT(2, 4, (2,))
    tokens, _ = evaluation_inputs(task, 0)
    assert accuracy["value"] == recount(network, tokens, task)
    prompt = task.random_tokens(np.random.default_rng(9), 1)[0]
    assert main(["run", str(out), "--tokens", ",".join(map(str, prompt)), "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert ran["generated"] == generate(network, prompt, 2).generated(0) and len(ran["generated"]) in (0, 1, 2)
    out.unlink()
    assert main(argv) == 0
    assert "correct = greedy generation produces all 2 answer tokens" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--arch", "sparse", "--block", "2", "--k", "1"], "each step read at its last position only, architecture sparse at every position"),
    (["--arch", "full", "--layers", "2", "--hop-weight", "1"], "hop_weight must be 0"),
])
def test_the_command_refuses_in_one_line(extra, message, capsys):
    from cli.main import main

    assert main(["train", "composition_cot", "--L", "2", "--m", "2", "--n", "2", "--H", "1", "--d-head", "4",
                 "--d-model", "16", "--steps", "2", "-o", "/tmp/never-written-cot.npz", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "internal error" not in err, err
