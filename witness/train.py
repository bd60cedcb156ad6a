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
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from witness.errors import ParameterError, TrainingDiverged
from witness.execute import run
from witness.resources import require_memory
from witness.ir import (MIXERS, MLP, READ_MODES, RECURRENT_MIXERS, RNN, Basis, Embedding, Layer, Meta, Network,
                        Readout)
from witness.tasks import TASKS
from witness.tasks.base import check_int
from witness.torch import from_module, to_module

#: Evaluate on every input when the family has at most this many, else on this many held-out random inputs.
EVAL_INPUTS = 4096
#: Gradient-norm clip per step (the usual 1.0): without layer norm a matrix-state layer's gradient is polynomial (up
#: to cubic) in its weights, and clipping keeps one spiking batch from dominating Adam's moment estimates. The
#: guard against divergence is still `_check_finite`.
MAX_GRAD_NORM = 1.0


@dataclass(frozen=True)
class LayerSpec:
    """One layer: a mixer, then a ReLU MLP of width `d_mlp` (None: no MLP). The mixer is causal (or bidirectional)
    softmax attention by default, or any kind in `witness.ir.MIXERS` named by `mixer` (e.g. "deltanet"), with its
    form's non-array `options` (e.g. {"feature_map": "relu", "normalize": True} for "linear"; kept as sorted
    (name, value) pairs so that a LayerSpec stays hashable)."""

    causal: bool = True
    d_mlp: int | None = None
    mixer: str = "attention"
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.causal, bool):
            raise ParameterError(f"LayerSpec.causal must be a bool, got {self.causal!r}")
        if self.d_mlp is not None:
            check_int("d_mlp", self.d_mlp, 1)
        if self.mixer not in MIXERS:
            raise ParameterError(f"LayerSpec.mixer must be one of {sorted(MIXERS)}, got {self.mixer!r}")
        allowed = set(MIXERS[self.mixer].option_names) - {"causal"}
        try:
            options = dict(self.options)
        except (TypeError, ValueError):
            options = None
        if options is None or set(options) - allowed:
            raise ParameterError(f"LayerSpec.options for {self.mixer!r} may set {sorted(allowed)}, got {self.options!r}")
        required = {f.name for f in fields(MIXERS[self.mixer]) if f.name in allowed
                    and f.default is MISSING and f.default_factory is MISSING}
        if required - set(options):
            raise ParameterError(f"LayerSpec.options for {self.mixer!r} must set {sorted(required)}, "
                                 f"got {self.options!r}")
        object.__setattr__(self, "options", tuple(sorted(options.items())))


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

    def parameter_count(self, task) -> int:
        """How many numbers the network for `task` holds (embedding, every layer's arrays, readout)."""
        d, H, k = self.d_model, self.H, self.d_head
        count = (2 * task.vocab_size + task.prompt_length) * d + task.vocab_size
        for spec in self.layers:
            cls = MIXERS[spec.mixer]
            if cls in RECURRENT_MIXERS:
                count += sum(math.prod(shape) for shape in cls.array_shapes(H, d, k).values())
            else:
                count += 4 * H * d * k + 3 * H * k + d
            if spec.d_mlp is not None:
                count += 2 * d * spec.d_mlp + spec.d_mlp + d
        return count

    def memory_bytes(self, task) -> int:
        """What building and training the network holds at once: float64 arrays and their frozen copy (16 bytes a
        number), the torch module's parameters, gradients and Adam's two moments (32 bytes)."""
        return 48 * self.parameter_count(task)

    def initial_network(self, task, seed: int) -> Network:
        """Random weights (normal, std 1/sqrt(fan-in)) for `task`'s vocabulary and prompt length, from `seed`.
        The output vocabulary is the task's token vocabulary, as in TransformerLens (d_vocab_out = d_vocab).
        Refused (`TooLarge`) before allocating when `memory_bytes` exceeds what the machine has."""
        require_memory(self.memory_bytes(task), f"a network of d_model {self.d_model}, H {self.H}, d_head "
                                                f"{self.d_head} and {len(self.layers)} layers")
        rng = np.random.default_rng(seed)
        d, H, k = self.d_model, self.H, self.d_head
        vocab, n_ctx = task.vocab_size, task.prompt_length

        def normal(fan_in: int, *shape: int) -> np.ndarray:
            return rng.normal(scale=1 / math.sqrt(fan_in), size=shape)

        layers = []
        for depth, spec in enumerate(self.layers):
            cls = MIXERS[spec.mixer]
            if cls in RECURRENT_MIXERS:
                resid_scale = EMBED_RESID_SCALE * RESID_GROWTH ** depth
                mixer = _initial_recurrent(cls, dict(spec.options), H, d, k, n_ctx, resid_scale, normal)
            else:
                mixer = cls(normal(d, H, d, k), normal(d, H, d, k), normal(d, H, d, k), normal(H * k, H, k, d),
                            np.zeros((H, k)), np.zeros((H, k)), np.zeros((H, k)), np.zeros(d), causal=spec.causal,
                            **dict(spec.options))
            mlp = None
            if spec.d_mlp is not None:
                mlp = MLP(normal(d, d, spec.d_mlp), np.zeros(spec.d_mlp), normal(spec.d_mlp, spec.d_mlp, d), np.zeros(d))
            layers.append(Layer(mixer, mlp))
        embedding = Embedding(rng.normal(size=(vocab, d)), rng.normal(size=(n_ctx, d)))
        readout = Readout(normal(d, d, vocab), np.zeros(vocab), self.read)
        meta = Meta(task=task.name, params=task.params(), claimed_format="fp64")
        return Network(embedding, tuple(layers), readout, Basis(tuple(f"x[{i}]" for i in range(d))), meta)


#: Initial decay: a sigmoid gate's bias makes alpha = sigmoid(2) ~ 0.88 at the start (the state remembers a few
#: positions back, as GLA and Mamba initialise); a fixed (ungated) decay starts at RetNet's usual gamma range.
INITIAL_GATE_BIAS = {"sigmoid": 2.0, "none": 0.9}
#: The residual's entry scale (rms) the recurrent initialisation plans for: the embedding's entries are the sum of
#: two unit normals (W_E, W_pos), and every layer of a random stack grows it by a factor of about 1.3 (measured on
#: the search's hybrids, d_model 8), planned as 1.5.
EMBED_RESID_SCALE = math.sqrt(2)
RESID_GROWTH = 1.5
#: The general RNN's W_s gain: see `_initial_recurrent`.
RNN_STATE_GAIN = 0.25


def _initial_recurrent(cls, options: dict[str, Any], H: int, d: int, k: int, n_ctx: int, resid_scale: float,
                       normal):
    """A recurrent mixer with d_k = d_v = d_state = k: weight matrices normal(0, 1/fan-in) times a gain, biases zero
    except the decay gate's (INITIAL_GATE_BIAS), and the arrays the form pins to zero left at zero.

    Why the gains. There is no layer norm, so a layer's output scale is a power of its input's: a matrix state's
    read-out o_t = S_t^T q_t = sum_{s<=t} c_ts (q_t . k_s) v_s (|c_ts| <= 1: decays lie in (0, 1), the delta rule
    only shrinks S along k) is cubic in the residual x and sums up to n_ctx terms, so at plain 1/fan-in scale a
    stack of such layers grows like x^(3^layers) and overflows even float64 on a 22-token prompt. Here W_Q, W_K
    and W_V have gain 1 / (resid_scale sqrt(k)): with residual entries of rms resid_scale (the scale planned for
    this depth, RESID_GROWTH), q, k and v have norm ~1, so |q . k| <~ 1, and W_O's 1/n_ctx undoes the sum over
    up to n_ctx positions: the layer adds O(1) to the residual whatever the depth, instead of cubing it -- finite
    at fp16 (max 65504) on prompts of ~100 tokens. |k| ~ 1 also keeps DeltaNet's beta |k|^2 < 2 (beta < 1), the
    condition for (I - beta k k^T) to shrink S along k instead of flipping and growing it. The general RNN is
    linear (or ReLU) in x, so only its recurrence needs taming: W_s at gain RNN_STATE_GAIN has operator norm about
    2 RNN_STATE_GAIN = 1/2, so its state is at most about twice its latest input instead of growing with t. Training may leave this regime; the trainer's finite-loss guard
    reports it."""
    unit = 1 / (resid_scale * math.sqrt(k))
    if cls is RNN:
        gains = {"W_s": RNN_STATE_GAIN}
    else:
        gains = {"W_Q": unit, "W_K": unit, "W_V": unit, "W_O": 1 / n_ctx}
    arrays = {}
    for name, shape in cls.array_shapes(H, d, k).items():
        if name.startswith("W_"):
            arrays[name] = gains.get(name, 1.0) * normal(H * k if name == "W_O" else shape[-2], *shape)
        else:
            arrays[name] = np.zeros(shape)
    if "b_alpha" in arrays:
        arrays["b_alpha"] += INITIAL_GATE_BIAS[options.get("gate", getattr(cls, "gate", "sigmoid"))]
    arrays.update({name: np.zeros_like(arrays[name]) for name in cls.zero_arrays})
    return cls(**arrays, **options)


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
                loss_value = loss.item()
                _check_finite(architecture, module, loss_value, step, seed, lr)
                optimiser.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(module.parameters(), MAX_GRAD_NORM)
                optimiser.step()
                step += 1
                progress.update(1)
                out_of_time = seconds is not None and time.perf_counter() - start >= seconds
                if step % eval_every == 0 or step == steps or out_of_time:
                    _check_finite(architecture, module, loss_value, step, seed, lr)
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
