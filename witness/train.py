"""Training under a budget: one generic, seeded, deterministic CPU trainer for any IR architecture on any task.

    arch = Architecture(H=1, d_head=16, d_model=32, layers=(LayerSpec(d_mlp=64), LayerSpec(d_mlp=64)))
    network, report = train(arch, Composition(L=1, m=3), steps=2000, seconds=60, seed=0)

Each step draws a fresh batch of the task's random instances and takes one Adam step on the cross-entropy of the
logits at the read positions (torch, float32). The honest number is `report.accuracy`: the trained weights are
imported back into the IR and run by witness's own float64 executor, on every input of the family when it is
small enough and otherwise on held-out random inputs from a separate seed; an input counts as correct only when
every read position's unique argmax is the answer (a tie is wrong). The search modules use this trainer.

torch is an optional extra; the core never imports this module.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from witness.errors import ParameterError
from witness.execute import run
from witness.ir import MLP, Attention, Basis, Embedding, Layer, Meta, Network, Readout, READ_MODES
from witness.tasks import TASKS
from witness.tasks.base import check_int
from witness.torch import from_module, to_module

#: Evaluate on every input when the family has at most this many, else on this many held-out random inputs.
EVAL_INPUTS = 4096


@dataclass(frozen=True)
class LayerSpec:
    """One layer: causal (or bidirectional) softmax attention, then a ReLU MLP of width `d_mlp` (None: no MLP)."""

    causal: bool = True
    d_mlp: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.causal, bool):
            raise ParameterError(f"LayerSpec.causal must be a bool, got {self.causal!r}")
        if self.d_mlp is not None:
            check_int("d_mlp", self.d_mlp, 1)


@dataclass(frozen=True)
class Architecture:
    """What to train: H heads of size d_head per layer, residual width d_model, the layer list, the read mode."""

    H: int
    d_head: int
    d_model: int
    layers: tuple[LayerSpec, ...]
    read: str = "last"

    def __post_init__(self) -> None:
        for name in ("H", "d_head", "d_model"):
            check_int(name, getattr(self, name), 1)
        layers = tuple(self.layers)
        if not layers or not all(isinstance(layer, LayerSpec) for layer in layers):
            raise ParameterError("Architecture.layers must be a non-empty list of LayerSpec")
        object.__setattr__(self, "layers", layers)
        if self.read not in READ_MODES:
            raise ParameterError(f"Architecture.read must be one of {READ_MODES}, got {self.read!r}")

    def initial_network(self, task, seed: int) -> Network:
        """Random weights (normal, std 1/sqrt(fan-in)) for `task`'s vocabulary and prompt length, from `seed`.
        The output vocabulary is the task's token vocabulary, as in TransformerLens (d_vocab_out = d_vocab)."""
        rng = np.random.default_rng(seed)
        d, H, k = self.d_model, self.H, self.d_head
        vocab, n_ctx = task.vocab_size, task.prompt_length

        def normal(fan_in: int, *shape: int) -> np.ndarray:
            return rng.normal(scale=1 / math.sqrt(fan_in), size=shape)

        layers = []
        for spec in self.layers:
            attention = Attention(normal(d, H, d, k), normal(d, H, d, k), normal(d, H, d, k), normal(H * k, H, k, d),
                                  np.zeros((H, k)), np.zeros((H, k)), np.zeros((H, k)), np.zeros(d), spec.causal)
            mlp = None
            if spec.d_mlp is not None:
                mlp = MLP(normal(d, d, spec.d_mlp), np.zeros(spec.d_mlp), normal(spec.d_mlp, spec.d_mlp, d), np.zeros(d))
            layers.append(Layer(attention, mlp))
        embedding = Embedding(rng.normal(size=(vocab, d)), rng.normal(size=(n_ctx, d)))
        readout = Readout(normal(d, d, vocab), np.zeros(vocab), self.read)
        meta = Meta(task=task.name, params=task.params(), claimed_format="fp64")
        return Network(embedding, tuple(layers), readout, Basis(tuple(f"x[{i}]" for i in range(d))), meta)


@dataclass(frozen=True)
class TrainReport:
    """What happened. `accuracy` is measured by the float64 executor on `eval_inputs` inputs (`exhaustive`: all
    of them); `stopped_by` is "steps", "seconds" or "accuracy"; `history` lists (step, loss, accuracy)."""

    accuracy: float
    eval_inputs: int
    exhaustive: bool
    steps: int
    seconds: float
    final_loss: float
    stopped_by: str
    seed: int
    lr: float
    batch_size: int
    history: tuple[tuple[int, float, float], ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluation_inputs(task, seed: int) -> tuple[np.ndarray, bool]:
    """Every input when the family is small, else EVAL_INPUTS random ones from a stream the training never uses."""
    if task.count() <= EVAL_INPUTS:
        return np.concatenate(list(task.enumerate_tokens(EVAL_INPUTS))), True
    return task.random_tokens(np.random.default_rng([seed, 1]), EVAL_INPUTS), False


def accuracy(network: Network, tokens: np.ndarray) -> float:
    """Fraction of inputs whose every read position is the unique argmax of the right answer (float64 executor)."""
    expected = network.task.answers(tokens).reshape(len(tokens), -1)
    predicted = run(network, tokens).predictions
    return float((predicted == expected).all(axis=1).mean())


def train(architecture: Architecture, task, steps: int = 1000, seconds: float | None = None, seed: int = 0,
          lr: float = 1e-3, batch_size: int = 64, eval_every: int = 100,
          stop_at_accuracy: float | None = 1.0) -> tuple[Network, TrainReport]:
    """Train `architecture` on `task` for at most `steps` steps and `seconds` seconds (None: no time limit).

    Deterministic for a given seed and step count (torch.manual_seed, deterministic algorithms); a time budget
    makes the step count, and so the result, depend on the machine's speed. Training stops early once the
    held-out accuracy reaches `stop_at_accuracy` (None: never)."""
    if not isinstance(task, tuple(TASKS.values())):
        raise ParameterError(f"train needs a task ({', '.join(TASKS)}), got {type(task).__name__}")
    steps = check_int("steps", steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    eval_every = check_int("eval_every", eval_every, 1)
    if seconds is not None and not seconds > 0:
        raise ParameterError(f"seconds must be positive, got {seconds}")
    if not lr > 0:
        raise ParameterError(f"lr must be positive, got {lr}")
    expected_read = (task.prompt_length - 1,) if architecture.read == "last" else tuple(range(task.prompt_length))
    if tuple(task.read_positions) != expected_read:
        raise ParameterError(f"architecture reads {architecture.read!r} positions but task {task.name} is read at "
                             f"{len(task.read_positions)} positions")

    eval_tokens, exhaustive = evaluation_inputs(task, seed)
    data_rng = np.random.default_rng([seed, 0])
    previous_determinism, previous_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    # One thread: these matrices are tiny, so handing them between threads costs more than it saves, and the
    # result then cannot depend on how many cores the machine has.
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        module = to_module(architecture.initial_network(task, seed), dtype=torch.float32)
        optimiser = torch.optim.Adam(module.parameters(), lr=lr)
        history: list[tuple[int, float, float]] = []
        start = time.perf_counter()
        loss_value, stopped_by, step, score = math.nan, "steps", 0, 0.0
        with tqdm(total=steps, desc="train", unit="step", disable=None, leave=False) as progress:
            while step < steps:
                tokens = task.random_tokens(data_rng, batch_size)
                targets = torch.as_tensor(task.answers(tokens).reshape(batch_size, -1))
                logits = module.read_logits(torch.as_tensor(tokens))
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                step += 1
                loss_value = loss.item()
                progress.update(1)
                out_of_time = seconds is not None and time.perf_counter() - start >= seconds
                if step % eval_every == 0 or step == steps or out_of_time:
                    score = accuracy(from_module(module), eval_tokens)
                    history.append((step, loss_value, score))
                    progress.set_postfix(loss=f"{loss_value:.3f}", acc=f"{score:.3f}")
                    if stop_at_accuracy is not None and score >= stop_at_accuracy:
                        stopped_by = "accuracy"
                        break
                if out_of_time:
                    stopped_by = "seconds"
                    break
        elapsed = time.perf_counter() - start
    finally:
        torch.use_deterministic_algorithms(previous_determinism)
        torch.set_num_threads(previous_threads)

    report = TrainReport(accuracy=score, eval_inputs=len(eval_tokens), exhaustive=exhaustive, steps=step,
                         seconds=elapsed, final_loss=loss_value, stopped_by=stopped_by, seed=seed, lr=lr,
                         batch_size=batch_size, history=tuple(history))
    trained = from_module(module)
    notes = {"trained": {"seed": seed, "steps": step, "lr": lr, "batch_size": batch_size, "accuracy": score,
                         "eval_inputs": len(eval_tokens), "exhaustive": exhaustive}}
    meta = Meta(task=task.name, params=task.params(), construction=None, claimed_format="fp64", notes=notes)
    return Network(trained.embedding, trained.layers, trained.readout, trained.basis, meta), report


__all__ = ["Architecture", "LayerSpec", "TrainReport", "train", "accuracy"]
