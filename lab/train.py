"""Training under a budget: one generic, seeded, deterministic trainer for any IR architecture on any task.

    arch = Architecture(H=1, d_head=32, d_model=32, layers=(LayerSpec(), LayerSpec()))
    network, report = train(arch, Composition(L=1, m=8), steps=4000, seed=0)             # on the CPU
    network, report = train(arch, Composition(L=1, m=8), steps=4000, seed=0, device="cuda")  # where one is

Each step draws a fresh batch of the task's random instances and takes one AdamW step (warm-up, then cosine decay)
on the cross-entropy of the logits at the read positions (torch, float32), plus intermediate-hop targets where the
task has hops; training always runs the given number of steps, so a seed fixes the result. The honest number is
`report.accuracy`: the trained weights are imported back into the IR and run by witness's own float64 executor (on
the CPU, whatever device trained them), on every input of the family when it is small enough and otherwise on
held-out random inputs from a separate seed; an input counts as correct only when every read position's unique
argmax is the answer (a tie is wrong). The search modules use this trainer.

A task answered by generated tokens (`composition_cot`, `composition_cot_pairs`: `generated_tokens` k > 0) trains
by teacher forcing (`training_batch`): each batch is the transcript of the gold generation, the prompt followed by
the first k - 1 tokens of the task's `answers`, and the loss is the cross-entropy at every one of the task's read
positions (the last k positions, whose logits generate the k tokens) against `answers`, in one forward pass. The
network's context covers the task's `context_length`. Its `report.accuracy` is not a teacher-forced number: an
input counts as correct only when the network's own greedy generation (`witness.generate`, the path the checks in
verify/check/ run) produces all k tokens, a tie stopping it and so counting wrong.

What to train is `lab.specs` (`LayerSpec`, `Architecture`); the torch step, its module, optimiser, schedule and
run settings are `lab.step`; both are importable from here. torch is an optional extra; the core never imports
this module.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from witness.errors import ParameterError, TrainingDiverged
from witness.arith import FLOAT64, Arithmetic
from witness.execute import unique_argmax
from witness.generate import answer_ids
from witness.progress import bar
from witness.ir import Meta, Network
from witness.mixers import MIXERS
from witness.tasks import RECORDS
from witness.tasks.base import check_int
from lab.rates import check_rate
from lab.specs import EMBED_RESID_SCALE, RESID_GROWTH, Architecture, LayerSpec
from lab.step import (MAX_GRAD_NORM, deterministic, hop_layers, learning_rate, logits_at, optimiser_for,
                      training_device, training_module, training_step, use_deterministic_algorithms)
from lab.torch import from_module

#: Evaluate on every input when the family has at most this many, else on this many held-out random inputs.
EVAL_INPUTS = 4096
#: `train`'s defaults: enough for L + 1 full-attention layers to learn L = 1 composition at m = 8 and 14 (d_model 32)
#: on held-out inputs (tests/lab/test_train.py, docs/training.md).
DEFAULT_STEPS = 4000
DEFAULT_LR = 3e-3
#: Weight of the intermediate-hop targets where the task has hops: without them 3 full layers stalled at 0.34 on
#: L = 2, m = 4, n = 4 (H 4, d_head 16, d_model 64, 3000 steps); with weight 1 they reached 0.9995 (lr 3e-3) and
#: 1.0 (lr 1e-3).
DEFAULT_HOP_WEIGHT = 1.0
#: Learning rates `sweep_lr` tries by default: half a decade apart around Adam's usual range for small models.
SWEEP_LRS = (1e-3, 3e-3, 1e-2)
#: Held-out inputs the accuracy during training is measured on (torch, float32); the final accuracy is the
#: float64 executor's on `evaluation_inputs`.
CURVE_INPUTS = 1024


@dataclass(frozen=True)
class TrainReport:
    """What happened. `accuracy` is the float64 executor's on `eval_inputs` held-out inputs (`exhaustive`: every
    input of the family), counted as correct only when every read position's unique argmax is the answer, or for a
    task answered by `generated_tokens` tokens, when greedy generation produces all of them (`accuracy`).
    `history` is the learning curve: (step, training loss, accuracy of the float32 torch model on CURVE_INPUTS
    held-out inputs). `seconds` is reported, never used to stop: the step count fixes the result. `device`: where the
    torch module trained."""

    accuracy: float
    eval_inputs: int
    exhaustive: bool
    steps: int
    seconds: float
    final_loss: float
    seed: int
    lr: float
    batch_size: int
    warmup: int
    hop_weight: float
    history: tuple[tuple[int, float, float], ...] = field(default=())
    device: str = "cpu"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluation_inputs(task, seed: int) -> tuple[np.ndarray, bool]:
    """Every input when the family is small, else EVAL_INPUTS random ones from a stream the training never uses."""
    if task.count() <= EVAL_INPUTS:
        return np.concatenate(list(task.enumerate_tokens(EVAL_INPUTS))), True
    return task.random_tokens(np.random.default_rng([seed, 1]), EVAL_INPUTS), False


def accuracy(network: Network, tokens: np.ndarray, arith: Arithmetic = FLOAT64) -> float:
    """Fraction of inputs whose every read position is the unique argmax of the right answer (the executor, by
    default in float64); for a network whose task is answered by generated tokens, whose greedy generation gives
    every one of them (a tie stops it: wrong). `witness.generate.answer_ids`, what verify/check/ compares too."""
    expected = network.task.answers(tokens).reshape(len(tokens), -1)
    return float((answer_ids(network, tokens, arith) == expected).all(axis=1).mean())


def _check_finite(architecture: Architecture, module, loss_value: float, step: int, seed: int, lr: float) -> None:
    """A TrainingDiverged naming the run when the latest loss or a weight is not finite after `step` steps (rather
    than a finished run whose weights the IR then refuses)."""
    bad = [] if math.isfinite(loss_value) else [f"loss {loss_value}"]
    bad += [name for name, parameter in module.named_parameters() if not torch.isfinite(parameter).all()]
    if bad:
        mixers = ", ".join(spec.mixer for spec in architecture.layers)
        raise TrainingDiverged(f"training diverged at step {step} (layers {mixers}; seed {seed}, lr {lr}): "
                               f"{', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''} not finite; "
                               f"{'the initial weights overflow' if step == 0 else 'try a smaller lr'}")


def _torch_accuracy(module, tokens: torch.Tensor, expected: np.ndarray, read: slice | None = None) -> float:
    """`accuracy`'s count on the float32 module's logits at the loss's read positions (the learning curve's cheap
    measurement; on a teacher-forced transcript, each generated token given the gold ones before it)."""
    with torch.no_grad():
        logits = logits_at(module, module.residual(tokens), read)
    return float((unique_argmax(logits.double().cpu().numpy()) == expected).all(axis=1).mean())


def require_trainable(task) -> None:
    """A ParameterError unless `task` is a registered task (one answered by generated tokens trains by teacher
    forcing, `training_batch`)."""
    if not isinstance(task, tuple(record.task for record in RECORDS.values())):
        raise ParameterError(f"train needs a task ({', '.join(RECORDS)}), got {type(task).__name__}")


def training_batch(task, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) of one batch of prompts `tokens`: targets are the task's answers [batch, n_read]; inputs
    are the prompts, or for a task answered by k generated tokens the teacher-forced transcripts, each prompt
    followed by the first k - 1 tokens of its answers (the gold generation up to the last token, which is read, not
    fed back), on which the k read positions (`read_slice`) give the k tokens."""
    targets = task.answers(tokens).reshape(len(tokens), -1)
    count = getattr(task, "generated_tokens", 0)
    if not count:
        return tokens, targets
    return np.concatenate([tokens, targets[:, :count - 1]], axis=1), targets


def read_slice(task) -> slice | None:
    """Where the loss reads a batch of `training_batch`: None (the module's read mode) for a task answered in one
    pass, else the task's read positions of the transcript (its last `generated_tokens` positions)."""
    if not getattr(task, "generated_tokens", 0):
        return None
    read = tuple(task.read_positions)
    if read != tuple(range(read[0], read[0] + len(read))) or len(read) != task.generated_tokens:
        raise ParameterError(f"{task.name} reads positions {read}; teacher forcing needs its {task.generated_tokens} "
                             "generated tokens read at consecutive positions")
    return slice(read[0], read[-1] + 1)


def _check_generating(architecture: Architecture, task, hop_weight) -> None:
    """What teacher forcing needs of a task answered by generated tokens, each refused in one line: no hop targets
    (every hop is a generated token, already a target), a network read at its last position (each generation step
    reads it) and causal layers (a bidirectional one would let a read position see the gold token it must give)."""
    if hop_weight:
        raise ParameterError(f"hop_weight must be 0 for {task.name}: its hops are the {task.generated_tokens} "
                             "generated tokens, each already a target of the teacher-forced loss (hop targets are "
                             "for one-pass composition)")
    if architecture.read != "last":
        raise ParameterError(f"{task.name} is answered by {task.generated_tokens} generated tokens, each read at the "
                             f"last position of its step; the architecture reads {architecture.read!r}")
    open_layers = [depth for depth, spec in enumerate(architecture.layers) if not spec.causal
                   and "causal" in MIXERS[spec.mixer].block.option_names]
    if open_layers:
        raise ParameterError(f"{task.name} trains by teacher forcing, which needs causal layers: layer "
                             f"{open_layers[0]} is bidirectional, so a read position would see the gold token it "
                             "must generate")


def train(architecture: Architecture, task, steps: int = DEFAULT_STEPS, seed: int = 0, lr: float = DEFAULT_LR,
          batch_size: int = 64, warmup: int | None = None, hop_weight: float | None = None, weight_decay: float = 0.0,
          eval_every: int | None = None, device: str = "cpu") -> tuple[Network, TrainReport]:
    """Train `architecture` on `task` for exactly `steps` AdamW steps from its seeded random initialisation.

    Each step draws a fresh batch (stream [seed, 0]; teacher-forced transcripts for a task answered by generated
    tokens, `training_batch`) and minimises the cross-entropy at the read positions, plus
    `hop_weight` times that of the intermediate hops (`hop_layers`; composition with L >= 2 only; default
    DEFAULT_HOP_WEIGHT where the task has hops, else 0; must be 0 for a task answered by generated tokens), under the
    `learning_rate` schedule (warm-up: `warmup` steps, default steps / 20). Deterministic: the same arguments
    give the same weights bit for bit (torch.manual_seed, deterministic algorithms, one thread), on any machine
    with the same torch build and device. The learning curve is measured every `eval_every` steps (default
    steps / 20). `device` ("cpu" or "cuda", `lab.rates.DEVICES`) is where the module and its batches live; "cuda"
    is a ParameterError where torch sees none. CUDA kernels round otherwise than the CPU's, so a run on "cuda"
    gives other weights than the same run on "cpu"; the final accuracy is the executor's, on the CPU, either way."""
    where = training_device(device)
    require_trainable(task)
    steps = check_int("steps", steps, 1)
    seed = check_int("seed", seed, 0)
    if seed >= 2 ** 64:
        raise ParameterError(f"seed must be below 2^64 (torch.manual_seed takes 64 bits), got {seed}")
    batch_size = check_int("batch_size", batch_size, 1)
    warmup = max(1, steps // 20) if warmup is None else check_int("warmup", warmup, 0)
    eval_every = max(1, steps // 20) if eval_every is None else check_int("eval_every", eval_every, 1)
    lr = check_rate("lr", lr)
    hop_at = hop_layers(task, len(architecture.layers))
    if hop_weight is None:
        hop_weight = DEFAULT_HOP_WEIGHT if hop_at else 0.0
    if not (isinstance(hop_weight, (int, float)) and hop_weight >= 0 and math.isfinite(hop_weight)):
        raise ParameterError(f"hop_weight must be a number >= 0, got {hop_weight!r}")
    generated = getattr(task, "generated_tokens", 0)
    if generated:
        _check_generating(architecture, task, hop_weight)
    elif hop_weight and not hop_at:
        raise ParameterError(f"hop_weight needs intermediate hops (composition with L >= 2); {task} has none")
    else:
        expected_read = (task.prompt_length - 1,) if architecture.read == "last" else tuple(range(task.prompt_length))
        if tuple(task.read_positions) != expected_read:
            raise ParameterError(f"architecture reads {architecture.read!r} positions but task {task.name} is read "
                                 f"at {len(task.read_positions)} positions")
    read = read_slice(task)

    eval_tokens, exhaustive = evaluation_inputs(task, seed)
    curve_inputs, curve_expected = training_batch(task, eval_tokens[:CURVE_INPUTS])
    curve_tokens = torch.as_tensor(curve_inputs, device=where)
    data_rng = np.random.default_rng([seed, 0])
    with deterministic(seed):
        module = training_module(architecture.initial_network(task, seed), where)
        optimiser = optimiser_for(module, lr, weight_decay)
        history: list[tuple[int, float, float]] = []
        start = time.perf_counter()
        loss_value = math.nan
        with bar(total=steps, desc="train", unit="step") as progress:
            for step in range(steps):
                for group in optimiser.param_groups:
                    group["lr"] = learning_rate(step, steps, lr, warmup)
                tokens = task.random_tokens(data_rng, batch_size)
                inputs, targets = training_batch(task, tokens)
                hop_targets = torch.as_tensor(task.hop_answers(tokens), device=where) if hop_weight else None
                loss_value = training_step(module, optimiser, torch.as_tensor(inputs, device=where),
                                           torch.as_tensor(targets, device=where), hop_targets, hop_at, hop_weight,
                                           read)
                if not math.isfinite(loss_value):
                    _check_finite(architecture, module, loss_value, step, seed, lr)
                progress.update(1)
                if (step + 1) % eval_every == 0 or step + 1 == steps:
                    _check_finite(architecture, module, loss_value, step + 1, seed, lr)
                    history.append((step + 1, loss_value,
                                    _torch_accuracy(module, curve_tokens, curve_expected, read)))
                    progress.set_postfix(loss=f"{loss_value:.3f}", acc=f"{history[-1][2]:.3f}", refresh=False)
        elapsed = time.perf_counter() - start

    trained = from_module(module)
    score = accuracy(trained, eval_tokens)
    report = TrainReport(accuracy=score, eval_inputs=len(eval_tokens), exhaustive=exhaustive, steps=steps,
                         seconds=elapsed, final_loss=loss_value, seed=seed, lr=lr, batch_size=batch_size,
                         warmup=warmup, hop_weight=hop_weight, history=tuple(history), device=device)
    notes = {"trained": {"seed": seed, "steps": steps, "lr": lr, "batch_size": batch_size, "warmup": warmup,
                         "hop_weight": hop_weight, "accuracy": score, "eval_inputs": len(eval_tokens),
                         "exhaustive": exhaustive, "device": device,
                         **({"teacher_forced": True, "generated_tokens": generated} if generated else {})}}
    meta = Meta(task=task.name, params=task.params(), construction=None, claimed_format="fp64", notes=notes)
    return Network(trained.embedding, trained.layers, trained.readout, trained.basis, meta), report


@dataclass(frozen=True)
class SweepReport:
    """`sweep_lr`'s choice: each tried lr with the accuracy (`accuracy`: the float64 executor's, by generation for a
    task answered by generated tokens) it reached after `steps` steps on held-out inputs (stream [seed, 2], which
    neither training nor the final evaluation uses), and the chosen one."""

    lr: float
    steps: int
    tried: tuple[tuple[float, float], ...]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def sweep_lr(architecture: Architecture, task, steps: int, seed: int = 0, lrs=SWEEP_LRS, **options) -> SweepReport:
    """Train `steps` steps at each of `lrs` (same seed, same schedule shape) and choose the lr whose model is most
    accurate on a validation stream of its own; ties go to the smaller lr. `options` go to `train`."""
    lrs = tuple(check_rate("lrs", lr) for lr in lrs)
    if not lrs:
        raise ParameterError("sweep_lr needs at least one learning rate")
    validation = task.random_tokens(np.random.default_rng([seed, 2]), CURVE_INPUTS)
    tried = []
    for lr in lrs:
        network, _ = train(architecture, task, steps=steps, seed=seed, lr=lr, **options)
        tried.append((lr, accuracy(network, validation)))
    best = max(tried, key=lambda entry: (entry[1], -entry[0]))
    return SweepReport(lr=best[0], steps=steps, tried=tuple(tried))


__all__ = ["Architecture", "LayerSpec", "TrainReport", "SweepReport", "train", "require_trainable", "sweep_lr",
           "accuracy", "training_batch", "read_slice", "learning_rate", "hop_layers", "training_module",
           "optimiser_for", "training_step", "training_device", "deterministic", "use_deterministic_algorithms",
           "MAX_GRAD_NORM", "EMBED_RESID_SCALE", "RESID_GROWTH"]
