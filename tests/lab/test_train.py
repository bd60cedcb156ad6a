"""lab.train: a seeded, deterministic trainer whose reported accuracy is the executor's, recounted here."""

import re

import numpy as np
import pytest

pytest.importorskip("torch")

from witness.errors import ParameterError  # noqa: E402
from witness.tasks import Composition, TwoSum  # noqa: E402
from lab.train import Architecture, LayerSpec, train  # noqa: E402

TWO_LAYERS = Architecture(H=2, d_head=16, d_model=32, layers=(LayerSpec(d_mlp=64), LayerSpec(d_mlp=64)))
ONE_LAYER = Architecture(H=2, d_head=16, d_model=32, layers=(LayerSpec(d_mlp=64),))
TASK = Composition(L=1, m=4)  # 4 * 4^4 = 1024 inputs: small enough to evaluate every one


def all_inputs(task):
    return np.concatenate(list(task.enumerate_tokens(4096)))


def chain_answers(tokens, m):
    """i_1 = z_1(z_0), read straight off the `paper` layout [z_1(0..m-1)] [z_0] [w] -- independent of the task."""
    return tokens[np.arange(len(tokens)), tokens[:, m]]


def recount(network, tokens, answers):
    return float(np.mean(np.asarray(network.run(tokens)) == answers))


def test_easy_setting_reaches_every_input():
    network, report = train(TWO_LAYERS, TASK, steps=800, seed=1, lr=3e-3)
    tokens = all_inputs(TASK)
    assert report.exhaustive and report.eval_inputs == TASK.count() == len(tokens)
    assert report.accuracy == 1.0 and report.steps == 800
    assert recount(network, tokens, chain_answers(tokens, TASK.m)) == 1.0
    assert network.basis.labels[:2] == ("x[0]", "x[1]")
    assert network.meta.task == "composition" and network.meta.notes["trained"]["accuracy"] == 1.0


def test_one_layer_reports_honestly_below_one():
    """One layer is too few for the chase (the L-layer side of CPW); whatever it reaches is reported as is."""
    network, report = train(ONE_LAYER, TASK, steps=300, seed=0, lr=3e-3)
    tokens = all_inputs(TASK)
    assert report.steps == 300
    assert report.accuracy == recount(network, tokens, chain_answers(tokens, TASK.m))
    assert report.accuracy < 1.0
    assert report.history[-1][:2] == (300, report.final_loss)


def test_same_seed_same_weights_and_another_seed_differs():
    a, report_a = train(ONE_LAYER, TASK, steps=30, seed=5, eval_every=10)
    b, report_b = train(ONE_LAYER, TASK, steps=30, seed=5, eval_every=10)
    c, _ = train(ONE_LAYER, TASK, steps=30, seed=6, eval_every=10)
    for name, array in a.state_dict().items():
        assert np.array_equal(array, b.state_dict()[name]), name
    assert report_a.history == report_b.history
    assert not np.array_equal(a.state_dict()["embed.W_E"], c.state_dict()["embed.W_E"])


def test_the_same_seed_writes_the_same_file_bit_for_bit(tmp_path):
    from cli.main import main

    argv = ["train", "composition", "--L", "1", "--m", "3", "--arch", "hybrid", "--full-layers", "0",
            "--linear-per-gap", "2", "--mixer", "deltanet", "--H", "1", "--d-head", "4", "--d-model", "8",
            "--steps", "15", "--quiet"]
    for name in ("a.npz", "b.npz"):
        assert main(argv + ["-o", str(tmp_path / name)]) == 0
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()


def test_the_schedule_warms_up_then_decays_to_a_tenth():
    from lab.train import learning_rate

    rates = [learning_rate(step, 100, 1.0, 10) for step in range(100)]
    assert rates[0] == 0.1 and rates[9] == 1.0 and rates[10] == 1.0
    assert all(a >= b for a, b in zip(rates[10:], rates[11:]))
    assert abs(rates[-1] - 0.1) < 0.01


def test_hop_answers_follow_the_chain():
    """Each hop recomputed from the `paper` layout [z_2 (m n_1 entries)] [z_1 (m entries)] [z_0] [w], by hand."""
    task = Composition(L=2, m=3, n=(2,))
    tokens = task.random_tokens(np.random.default_rng(0), 50)
    z2, z1, z0, w = tokens[:, :6], tokens[:, 6:9], tokens[:, 9], tokens[:, 10] - task.value_vocab
    rows = np.arange(50)
    first = z1[rows, z0]
    second = z2[rows, w * 3 + first]
    assert np.array_equal(task.hop_answers(tokens), np.stack([first, second], axis=1))
    assert np.array_equal(task.answers(tokens), second)


def test_hop_targets_need_hops():
    with pytest.raises(ParameterError, match="hop_weight needs intermediate hops"):
        train(ONE_LAYER, TASK, steps=1, hop_weight=1.0)


def test_the_lr_sweep_keeps_the_most_accurate_rate():
    from lab.train import sweep_lr

    found = sweep_lr(ONE_LAYER, TASK, steps=20, seed=0, lrs=(1e-5, 3e-3))
    assert [lr for lr, _ in found.tried] == [1e-5, 3e-3]
    assert found.lr == max(found.tried, key=lambda entry: (entry[1], -entry[0]))[0]


def test_all_position_readout_on_two_sum():
    task = TwoSum(n=4, M=3, t=1)
    arch = Architecture(H=1, d_head=8, d_model=16, layers=(LayerSpec(d_mlp=32),), read="all")
    network, report = train(arch, task, steps=20, seed=0)
    tokens = all_inputs(task)
    expected = task.answers(tokens).reshape(len(tokens), -1)
    assert report.exhaustive
    assert report.accuracy == float((np.asarray(network.run(tokens)) == expected).all(axis=1).mean())


@pytest.mark.parametrize("kwargs, message", [
    ({"steps": 0}, "steps"),
    ({"lr": -1.0}, "lr"),
    ({"lr": float("nan")}, "lr"),
    ({"hop_weight": -1.0}, "hop_weight"),
    ({"warmup": -1}, "warmup"),
])
def test_bad_budgets_are_refused(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        train(ONE_LAYER, TASK, **kwargs)


def test_bad_task_is_refused():
    with pytest.raises(ParameterError, match="needs a task"):
        train(ONE_LAYER, "composition")


def test_bad_architectures_are_refused():
    with pytest.raises(ParameterError, match="d_model"):
        Architecture(H=1, d_head=4, d_model=0, layers=(LayerSpec(),))
    with pytest.raises(ParameterError, match="LayerSpec"):
        Architecture(H=1, d_head=4, d_model=4, layers=())
    with pytest.raises(ParameterError, match="read"):
        train(Architecture(H=1, d_head=4, d_model=4, layers=(LayerSpec(),), read="all"), TASK, steps=1)


# -- recurrent hybrids: a random initialisation that stays finite, training that stays finite or says why ---------
MATRIX_MIXERS = ("linear", "retnet", "gla", "mamba2", "deltanet", "gated_deltanet")


@pytest.mark.parametrize("mixer", MATRIX_MIXERS + ("rnn",))
def test_random_hybrid_is_finite_on_a_long_prompt(mixer):
    """Nine layers (4 recurrent, full, 4 recurrent) and no layer norm on a 92-token prompt: at the plain
    1/fan-in scale the cubic read-out overflowed float64 for every matrix mixer; now fp64 and fp16 stay finite."""
    from lab.architectures import hybrid
    from witness.arith import arithmetic, parse_format
    from witness.execute import run

    task = Composition(L=2, m=9, n=(9,))
    tokens = task.random_tokens(np.random.default_rng(0), 4)
    for seed in (0, 1):
        network = hybrid(task, 1, 4, mixer, H=1, d_head=4, d_model=8, seed=seed)
        for fmt in ("fp64", "fp16"):
            logits = np.asarray(run(network, tokens, arithmetic(parse_format(fmt), "strict")).logits, dtype=float)
            assert np.isfinite(logits).all(), (mixer, seed, fmt)


@pytest.mark.parametrize("mixer", MATRIX_MIXERS)
def test_training_a_recurrent_hybrid_stays_finite(mixer):
    from lab.architectures import hybrid_architecture

    architecture = hybrid_architecture(1, 2, mixer, H=1, d_head=4, d_model=8)  # 1/fan-in init: NaN at step 0
    network, report = train(architecture, TASK, steps=40, seed=0, lr=1e-2, batch_size=16, eval_every=40)
    assert report.steps == 40 and np.isfinite(report.final_loss)
    assert all(np.isfinite(array).all() for array in network.state_dict().values())


def test_diverged_training_is_a_typed_error_naming_the_run():
    from witness.errors import TrainingDiverged

    architecture = Architecture(H=1, d_head=4, d_model=8, layers=(LayerSpec(mixer="linear", d_mlp=8),))
    with pytest.raises(TrainingDiverged, match=r"training diverged at step \d+ \(layers linear; seed 3, lr 1e\+30\)"):
        train(architecture, TASK, steps=50, seed=3, lr=1e30, batch_size=8)


@pytest.mark.parametrize("mixer, options, missing", [
    ("block_sparse", {}, "['block', 'k']"),
    ("block_sparse", {"block": 2}, "['block', 'k']"),
    ("sliding_window", {}, "['window']"),
])
def test_layer_spec_names_missing_options(mixer, options, missing):
    with pytest.raises(ParameterError, match=re.escape(f"for '{mixer}' must set {missing}")):
        LayerSpec(mixer=mixer, options=options)
    assert LayerSpec(mixer="block_sparse", options={"block": 2, "k": 1}).options == (("block", 2), ("k", 1))


def test_the_default_recipe_learns_the_l1_family_m8():
    """docs/training.md's first row, shortened: 2 full layers (H 4, d_head 8, d_model 32, no MLP) on L = 1, m = 8
    from a random initialisation, the default schedule over 1,500 steps; the accuracy is recounted here against the
    chain read straight off the tokens, on 4,096 fresh inputs."""
    from lab.architectures import full_architecture

    task = Composition(L=1, m=8)
    network, report = train(full_architecture(2, 4, 8, 32, mlp_ratio=0), task, steps=1500, seed=0)
    tokens = task.random_tokens(np.random.default_rng(123), 4096)
    assert report.accuracy >= 0.98 and recount(network, tokens, chain_answers(tokens, task.m)) >= 0.98


def test_cli_train_json_says_what_the_accuracy_is_measured_on(tmp_path, capsys):
    import json

    import witness
    from cli.main import main

    out = tmp_path / "net.npz"
    argv = ["train", "composition", "--L", "2", "--m", "2", "--n", "2", "--arch", "full", "--layers", "3", "--H", "1",
            "--d-head", "4", "--d-model", "8", "--steps", "6", "--lr-sweep", "1e-3", "1e-2", "-o", str(out), "--json"]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    accuracy = payload["accuracy"]
    # 2 * 2^2 * 4^4 * 2 = 4,096 inputs: small enough to measure on every one
    assert (accuracy["format"], accuracy["semantics"], accuracy["exhaustive"]) == ("fp64", "strict", True)
    assert accuracy["inputs"] == 4096 and 0.0 <= accuracy["value"] <= 1.0
    assert payload["steps"] == 6 and payload["hop_weight"] == 1.0 and payload["learning_curve"][-1]["step"] == 6
    assert [lr for lr, _ in payload["lr_sweep"]["tried"]] == [1e-3, 1e-2] and payload["lr"] == payload["lr_sweep"]["lr"]
    assert witness.load(out).meta.notes["trained"]["steps"] == 6


def test_a_task_answered_by_generated_tokens_is_refused_on_an_architecture_read_everywhere(capsys):
    """A chain-of-thought task trains by teacher forcing (tests/lab/test_train_cot.py) on an architecture read at
    its last position; on the sparse one it would crash deep in the architecture (it did: an AttributeError), so the
    command refuses it in one line, before any step."""
    from cli.main import main

    assert main(["train", "composition_cot", "--L", "2", "--m", "2", "--n", "2", "--arch", "sparse", "--H", "1",
                 "--d-head", "4", "--d-model", "16", "--block", "2", "--k", "1", "--steps", "2", "-o",
                 "/tmp/never-written.npz"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "generated tokens" in err and "internal error" not in err, err
