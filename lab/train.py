"""Training under a budget: one generic, seeded, deterministic CPU trainer for any IR architecture on any task.

    arch = Architecture(H=1, d_head=32, d_model=32, layers=(LayerSpec(), LayerSpec()))
    network, report = train(arch, Composition(L=1, m=8), steps=4000, seed=0)

Each step draws a fresh batch of the task's random instances and takes one AdamW step (warm-up, then cosine decay)
on the cross-entropy of the logits at the read positions (torch, float32), plus intermediate-hop targets where the
task has hops; training always runs the given number of steps, so a seed fixes the result. The honest number is
`report.accuracy`: the trained weights are
imported back into the IR and run by witness's own float64 executor, on every input of the family when it is
small enough and otherwise on held-out random inputs from a separate seed; an input counts as correct only when
every read position's unique argmax is the answer (a tie is wrong). The search modules use this trainer.

torch is an optional extra; the core never imports this module.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

import numpy as np
import torch

from witness.errors import ParameterError, TrainingDiverged
from witness.arith import FLOAT64, Arithmetic
from witness.execute import run, unique_argmax
from witness.progress import bar
from witness.resources import require_memory
from witness.ir import MLP, READ_MODES, Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import MIXERS, RECURRENT_MIXERS
from witness.tasks import RECORDS
from witness.tasks.base import check_int
from lab.rates import check_rate
from lab.torch import from_module, to_module

#: Evaluate on every input when the family has at most this many, else on this many held-out random inputs.
EVAL_INPUTS = 4096
#: Gradient-norm clip per step (the usual 1.0): without layer norm a matrix-state layer's gradient is polynomial (up
#: to cubic) in its weights, and clipping keeps one spiking batch from dominating Adam's moment estimates. The
#: guard against divergence is still `_check_finite`.
MAX_GRAD_NORM = 1.0


@dataclass(frozen=True)
class LayerSpec:
    """One layer: a mixer, then a ReLU MLP of width `d_mlp` (None: no MLP). The mixer is causal (or bidirectional)
    softmax attention by default, or any kind in `witness.mixers.MIXERS` named by `mixer` (e.g. "deltanet"), with its
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
        allowed = set(MIXERS[self.mixer].block.option_names) - {"causal"}
        try:
            options = dict(self.options)
        except (TypeError, ValueError):
            options = None
        if options is None or set(options) - allowed:
            raise ParameterError(f"LayerSpec.options for {self.mixer!r} may set {sorted(allowed)}, got {self.options!r}")
        required = {f.name for f in fields(MIXERS[self.mixer].block) if f.name in allowed
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
            cls = MIXERS[spec.mixer].block
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
            mixer = MIXERS[spec.mixer]
            block = mixer.initial(mixer.block, dict(spec.options), causal=spec.causal, H=H, d_model=d, d_head=k,
                                  n_ctx=n_ctx, resid_scale=EMBED_RESID_SCALE * RESID_GROWTH ** depth, normal=normal)
            mlp = None
            if spec.d_mlp is not None:
                mlp = MLP(normal(d, d, spec.d_mlp), np.zeros(spec.d_mlp), normal(spec.d_mlp, spec.d_mlp, d), np.zeros(d))
            layers.append(Layer(block, mlp))
        embedding = Embedding(rng.normal(size=(vocab, d)), rng.normal(size=(n_ctx, d)))
        readout = Readout(normal(d, d, vocab), np.zeros(vocab), self.read)
        meta = Meta(task=task.name, params=task.params(), claimed_format="fp64")
        return Network(embedding, tuple(layers), readout, Basis(tuple(f"x[{i}]" for i in range(d))), meta)


#: The residual's entry scale (rms) a recurrent layer's initialisation plans for
#: (`witness.mixers.matrix_state.initial_matrix_state`): the embedding's entries are the sum of two unit normals
#: (W_E, W_pos), and every layer of a random stack grows it by a factor of about 1.3 (measured on the search's
#: hybrids, d_model 8), planned as 1.5.
EMBED_RESID_SCALE = math.sqrt(2)
RESID_GROWTH = 1.5


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
    input of the family), counted as correct only when every read position's unique argmax is the answer.
    `history` is the learning curve: (step, training loss, accuracy of the float32 torch model on CURVE_INPUTS
    held-out inputs). `seconds` is reported, never used to stop: the step count fixes the result."""

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluation_inputs(task, seed: int) -> tuple[np.ndarray, bool]:
    """Every input when the family is small, else EVAL_INPUTS random ones from a stream the training never uses."""
    if task.count() <= EVAL_INPUTS:
        return np.concatenate(list(task.enumerate_tokens(EVAL_INPUTS))), True
    return task.random_tokens(np.random.default_rng([seed, 1]), EVAL_INPUTS), False


def accuracy(network: Network, tokens: np.ndarray, arith: Arithmetic = FLOAT64) -> float:
    """Fraction of inputs whose every read position is the unique argmax of the right answer (the executor, by
    default in float64)."""
    expected = network.task.answers(tokens).reshape(len(tokens), -1)
    predicted = run(network, tokens, arith).predictions
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


def learning_rate(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up over `warmup` steps, then cosine decay to lr / 10 at the last step: warm-up keeps Adam's
    first, badly estimated moments from throwing a residual stream without layer norm into saturation; the decay
    lets the final steps settle the margins instead of bouncing around them."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def hop_layers(task, layer_count: int) -> dict[int, int]:
    """Intermediate targets: hop l (1 <= l < L) of a composition task is read out after layer floor(l (n-1) / L)
    of an n-layer stack, so that with the construction's L + 1 layers hop l is due after layer l, where the
    construction has it. Tasks without hops have none."""
    hops = getattr(task, "L", 1)
    return {l: l * (layer_count - 1) // hops for l in range(1, hops)} if hasattr(task, "hop_answers") else {}


def _losses(module, tokens: torch.Tensor, targets: torch.Tensor, hop_targets: torch.Tensor | None,
            hop_at: dict[int, int], hop_weight: float) -> torch.Tensor:
    """Cross-entropy at the read positions, plus hop_weight times the mean cross-entropy of each intermediate hop
    read through the unembedding after its layer (last position)."""
    wanted = {layer: hop for hop, layer in hop_at.items()} if hop_weight else {}
    hop_losses = []
    for depth, x in enumerate(module.residuals(tokens), start=-1):  # -1: the embedding
        if depth in wanted:  # read out while the forward pass is here: the gradient sums in the same order
            hop_losses.append(torch.nn.functional.cross_entropy(module.unembed_stream(x[:, -1]),
                                                                hop_targets[:, wanted[depth] - 1]))
    logits = module.read_from(x)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    if hop_losses:
        loss = loss + hop_weight * torch.stack(hop_losses).mean()
    return loss


def _torch_accuracy(module, tokens: torch.Tensor, expected: np.ndarray) -> float:
    """`accuracy`'s count on the float32 module's logits (the learning curve's cheap measurement)."""
    with torch.no_grad():
        logits = module.read_logits(tokens)
    return float((unique_argmax(logits.double().numpy()) == expected).all(axis=1).mean())


def training_module(network: Network):
    """The float32 module `train` trains: `lab.torch.to_module(network)` with its softmax layers' pattern taken
    from `torch.softmax` (`MixerModule.fused_softmax`). That rounds differently from the executor's
    exp-and-divide, which only the weights' last bits can show; the accuracy `train` reports is still the float64
    executor's on the imported weights."""
    module = to_module(network, dtype=torch.float32)
    for layer in module.blocks:
        layer.attn.fused_softmax = True
    return module


def optimiser_for(module, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """The trainer's AdamW over `module`'s parameters: torch's fused kernel (one pass over each parameter,
    elementwise, so deterministic) where this torch build has it for CPU tensors, else the multi-tensor (`foreach`)
    path; either is several times faster on these small parameters than torch's default single-tensor loop on CPU.
    The paths round differently in the last place, so weights trained with the loop are not reproduced bit for
    bit; the same arguments still give the same weights on one torch build."""
    parameters = [parameter for parameter in module.parameters() if parameter.requires_grad]
    try:
        return torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError, ValueError):  # no fused AdamW for these tensors in this build
        return torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay, foreach=True)


def training_step(module, optimiser, tokens: torch.Tensor, targets: torch.Tensor,
                  hop_targets: torch.Tensor | None = None, hop_at: dict[int, int] | None = None,
                  hop_weight: float = 0.0) -> float:
    """One step of `train`: the loss (`_losses`), its gradient, clipped to MAX_GRAD_NORM, and an optimiser step;
    the loss before the step. A non-finite loss takes no step (the caller raises)."""
    loss = _losses(module, tokens, targets, hop_targets, hop_at or {}, hop_weight)
    loss_value = loss.item()
    if not math.isfinite(loss_value):
        return loss_value
    optimiser.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), MAX_GRAD_NORM, foreach=True)
    optimiser.step()
    return loss_value


def use_deterministic_algorithms(mode: bool, warn_only: bool = False) -> None:
    """`torch.use_deterministic_algorithms`, without the import of `torch._inductor.config` it makes to set
    Inductor's own switch (about 2 CPU-seconds, on every `train` and every capacity job): that switch is read only by
    `torch.compile`, which witness never calls, and the kernels' switch set here is the same. Where Inductor is
    already loaded, the public call sets both."""
    native = getattr(torch._C, "_set_deterministic_algorithms", None)
    if native is None or "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        native(mode, warn_only=warn_only)


def require_trainable(task) -> None:
    """A ParameterError unless `task` is a registered task answered by one forward pass: the trainer fits the logits
    of one run, so a task answered by generated tokens (chain of thought) is not one it trains (yet)."""
    if not isinstance(task, tuple(record.task for record in RECORDS.values())):
        raise ParameterError(f"train needs a task ({', '.join(RECORDS)}), got {type(task).__name__}")
    if getattr(task, "generated_tokens", 0):
        raise ParameterError(f"{task.name} is answered by {task.generated_tokens} generated tokens; the trainer fits "
                             "one forward pass (train composition, or compile the construction)")


def train(architecture: Architecture, task, steps: int = DEFAULT_STEPS, seed: int = 0, lr: float = DEFAULT_LR,
          batch_size: int = 64, warmup: int | None = None, hop_weight: float | None = None, weight_decay: float = 0.0,
          eval_every: int | None = None) -> tuple[Network, TrainReport]:
    """Train `architecture` on `task` for exactly `steps` AdamW steps from its seeded random initialisation.

    Each step draws a fresh batch (stream [seed, 0]) and minimises the cross-entropy at the read positions, plus
    `hop_weight` times that of the intermediate hops (`hop_layers`; composition with L >= 2 only; default
    DEFAULT_HOP_WEIGHT where the task has hops, else 0), under the
    `learning_rate` schedule (warm-up: `warmup` steps, default steps / 20). Deterministic: the same arguments
    give the same weights bit for bit (torch.manual_seed, deterministic algorithms, one thread), on any machine
    with the same torch build. The learning curve is measured every `eval_every` steps (default steps / 20)."""
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
    if hop_weight and not hop_at:
        raise ParameterError(f"hop_weight needs intermediate hops (composition with L >= 2); {task} has none")
    expected_read = (task.prompt_length - 1,) if architecture.read == "last" else tuple(range(task.prompt_length))
    if tuple(task.read_positions) != expected_read:
        raise ParameterError(f"architecture reads {architecture.read!r} positions but task {task.name} is read at "
                             f"{len(task.read_positions)} positions")

    eval_tokens, exhaustive = evaluation_inputs(task, seed)
    curve_tokens = torch.as_tensor(eval_tokens[:CURVE_INPUTS])
    curve_expected = task.answers(eval_tokens[:CURVE_INPUTS]).reshape(len(curve_tokens), -1)
    data_rng = np.random.default_rng([seed, 0])
    previous_determinism, previous_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    previous_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    use_deterministic_algorithms(True)
    # One thread: these matrices are tiny, so handing them between threads costs more than it saves, and the
    # result then cannot depend on how many cores the machine has.
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        module = training_module(architecture.initial_network(task, seed))
        optimiser = optimiser_for(module, lr, weight_decay)
        history: list[tuple[int, float, float]] = []
        start = time.perf_counter()
        loss_value = math.nan
        with bar(total=steps, desc="train", unit="step") as progress:
            for step in range(steps):
                for group in optimiser.param_groups:
                    group["lr"] = learning_rate(step, steps, lr, warmup)
                tokens = task.random_tokens(data_rng, batch_size)
                targets = torch.as_tensor(task.answers(tokens).reshape(batch_size, -1))
                hop_targets = torch.as_tensor(task.hop_answers(tokens)) if hop_weight else None
                loss_value = training_step(module, optimiser, torch.as_tensor(tokens), targets, hop_targets, hop_at,
                                           hop_weight)
                if not math.isfinite(loss_value):
                    _check_finite(architecture, module, loss_value, step, seed, lr)
                progress.update(1)
                if (step + 1) % eval_every == 0 or step + 1 == steps:
                    _check_finite(architecture, module, loss_value, step + 1, seed, lr)
                    history.append((step + 1, loss_value, _torch_accuracy(module, curve_tokens, curve_expected)))
                    progress.set_postfix(loss=f"{loss_value:.3f}", acc=f"{history[-1][2]:.3f}", refresh=False)
        elapsed = time.perf_counter() - start
    finally:
        use_deterministic_algorithms(previous_determinism, warn_only=previous_warn_only)
        torch.set_num_threads(previous_threads)

    trained = from_module(module)
    score = accuracy(trained, eval_tokens)
    report = TrainReport(accuracy=score, eval_inputs=len(eval_tokens), exhaustive=exhaustive, steps=steps,
                         seconds=elapsed, final_loss=loss_value, seed=seed, lr=lr, batch_size=batch_size,
                         warmup=warmup, hop_weight=hop_weight, history=tuple(history))
    notes = {"trained": {"seed": seed, "steps": steps, "lr": lr, "batch_size": batch_size, "warmup": warmup,
                         "hop_weight": hop_weight, "accuracy": score, "eval_inputs": len(eval_tokens),
                         "exhaustive": exhaustive}}
    meta = Meta(task=task.name, params=task.params(), construction=None, claimed_format="fp64", notes=notes)
    return Network(trained.embedding, trained.layers, trained.readout, trained.basis, meta), report


@dataclass(frozen=True)
class SweepReport:
    """`sweep_lr`'s choice: each tried lr with the float32 accuracy it reached after `steps` steps on held-out
    inputs (stream [seed, 2], which neither training nor the final evaluation uses), and the chosen one."""

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
    validation_answers = task.answers(validation).reshape(len(validation), -1)
    tried = []
    for lr in lrs:
        network, _ = train(architecture, task, steps=steps, seed=seed, lr=lr, **options)
        predicted = run(network, validation).predictions
        tried.append((lr, float((predicted == validation_answers).all(axis=1).mean())))
    best = max(tried, key=lambda entry: (entry[1], -entry[0]))
    return SweepReport(lr=best[0], steps=steps, tried=tuple(tried))


__all__ = ["Architecture", "LayerSpec", "TrainReport", "SweepReport", "train", "require_trainable", "sweep_lr",
           "accuracy", "learning_rate", "hop_layers", "training_module", "optimiser_for", "training_step"]
