"""lab.train's `device`: the CPU by default and unchanged; "cuda" refused in one line (a ParameterError from the API,
exit 2 from the commands: train, capacity, search with trained weights) where torch sees no CUDA device, and by a
search whose weights do not train; where one is, a few steps train there, reproducibly, and the accuracy is still
the executor's on the CPU."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cli.main import main  # noqa: E402
from experiments.capacity import CapacitySpec, plain_spec  # noqa: E402
from lab.architectures import hybrid_architecture  # noqa: E402
from lab.train import Architecture, LayerSpec, train, training_module  # noqa: E402
from witness.errors import ParameterError  # noqa: E402
from witness.tasks import Composition  # noqa: E402

TASK = Composition(L=1, m=4)
FULL = Architecture(H=1, d_head=4, d_model=8, layers=(LayerSpec(d_mlp=8), LayerSpec()))
SMALL = {"steps": 6, "seed": 1, "batch_size": 8, "eval_every": 3}


@pytest.fixture
def no_cuda(monkeypatch):
    """A machine without CUDA, whatever this one has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_the_default_device_is_the_cpu_and_the_same_run_bit_for_bit():
    default, report = train(FULL, TASK, **SMALL)
    on_cpu, cpu_report = train(FULL, TASK, device="cpu", **SMALL)
    for name, array in default.state_dict().items():
        assert np.array_equal(array, on_cpu.state_dict()[name]), name
    assert report.device == cpu_report.device == "cpu" and report.history == cpu_report.history
    assert default.meta.notes["trained"]["device"] == "cpu"


def test_cuda_without_a_gpu_is_refused_before_training(no_cuda):
    with pytest.raises(ParameterError, match=r"^device cuda: torch\.cuda\.is_available\(\) is False .*train on cpu$"):
        train(FULL, TASK, device="cuda", **SMALL)


@pytest.mark.parametrize("device", ["gpu", "cuda:0", None, torch.device("cpu")])
def test_a_device_that_is_not_a_name_the_trainer_takes_is_refused(device):
    with pytest.raises(ParameterError, match="device must be one of cpu, cuda"):
        train(FULL, TASK, device=device, **SMALL)


SEARCH_FULL = ["search", "full", "--L", "1", "--m", "3", "--layers", "2", "--H", "1", "--d-head", "2", "--d-model",
               "4", "--save-network", "{out}/net.npz"]
SEARCH_SPARSE = ["search", "sparse", "--n", "8", "--M", "4", "--block", "4", "--k", "1", "--H", "1", "--d-head", "2",
                 "--d-model", "4", "--save-network", "{out}/net.npz"]


@pytest.mark.parametrize("command, says", [
    (["train", "composition", "--L", "1", "--m", "4", "--arch", "full", "--layers", "2", "--H", "1", "--d-head",
      "4", "--d-model", "8", "--steps", "2", "-o", "{out}/net.npz"], "device cuda: torch.cuda.is_available() is False"),
    (["capacity", "--sizes", "4", "--H", "1", "--d-head", "2", "--d-model", "8", "--seeds", "1", "--steps", "2",
      "--out", "{out}/curve"], "device cuda: torch.cuda.is_available() is False"),
    (SEARCH_FULL + ["--weights", "trained"], "device cuda: torch.cuda.is_available() is False"),
    (SEARCH_FULL, "device cuda is where trained weights train; 'random' weights are not trained"),
    (SEARCH_SPARSE + ["--weights", "natural"], "device cuda is where trained weights train; 'natural' weights"),
])
def test_the_commands_refuse_cuda_without_a_gpu_in_one_line(no_cuda, tmp_path, capsys, monkeypatch, command, says):
    def must_not_run(*args, **kwargs):
        raise AssertionError("worked although the device was refused")

    for name in ("lab.train.training_module", "experiments.capacity.capacity", "verify.search.hybrid.search_network",
                 "verify.search.sparse.search_network"):
        monkeypatch.setattr(name, must_not_run)
    argv = [part.format(out=tmp_path) for part in command] + ["--device", "cuda", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not (tmp_path / "net.npz").exists() and not (tmp_path / "curve").exists()


def test_a_curve_names_its_device_only_where_it_is_not_the_cpu():
    assert "device" not in plain_spec(CapacitySpec(sizes=(4,)))
    assert plain_spec(CapacitySpec(sizes=(4,), device="cuda"))["device"] == "cuda"
    with pytest.raises(ParameterError, match="device must be one of cpu, cuda, got 'tpu'"):
        CapacitySpec(sizes=(4,), device="tpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_few_steps_train_on_cuda_reproducibly():
    hybrid = hybrid_architecture(1, 1, "deltanet", H=1, d_head=4, d_model=8)
    for architecture in (FULL, hybrid):
        first, report = train(architecture, TASK, device="cuda", **SMALL)
        again, _ = train(architecture, TASK, device="cuda", **SMALL)
        for name, array in first.state_dict().items():
            assert np.isfinite(array).all() and np.array_equal(array, again.state_dict()[name]), name
        assert report.device == "cuda" and first.meta.notes["trained"]["device"] == "cuda"
        assert 0.0 <= report.accuracy <= 1.0 and report.exhaustive and len(report.history) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_computes_the_cpu_modules_loss_and_gradients():
    """The same network trained on cuda is the same function: its loss and every gradient agree with the CPU's up to
    float32 rounding (the kernels sum in other orders, so not bit for bit)."""
    hybrid = hybrid_architecture(1, 1, "deltanet", H=1, d_head=4, d_model=8)
    tokens = torch.as_tensor(TASK.random_tokens(np.random.default_rng(0), 32))
    targets = torch.as_tensor(TASK.answers(tokens.numpy()).reshape(32, -1)[:, -1])
    for architecture in (FULL, hybrid):
        network = architecture.initial_network(TASK, seed=0)
        found = {}
        for device in ("cpu", "cuda"):
            module = training_module(network, device)
            loss = torch.nn.functional.cross_entropy(module(tokens.to(device))[:, -1], targets.to(device))
            loss.backward()
            found[device] = [loss.detach().cpu()] + [p.grad.cpu() for p in module.parameters() if p.grad is not None]
        assert len(found["cpu"]) == len(found["cuda"]) > 1
        for cpu, cuda in zip(found["cpu"], found["cuda"]):
            torch.testing.assert_close(cuda, cpu, rtol=1e-4, atol=1e-5)
