"""The torch side of one `lab.train` step: the module it trains (`training_module`), its optimiser (`optimiser_for`),
the loss with its intermediate-hop targets (`hop_layers`), the learning-rate schedule (`learning_rate`), the step
itself (`training_step`), and the settings a run holds while it trains (`deterministic`: deterministic kernels, one
thread, torch's seed; `training_device`: where the module and batches live).

    module = training_module(network, training_device("cpu"))
    optimiser = optimiser_for(module, lr=3e-3)
    loss = training_step(module, optimiser, tokens, targets)

For a task answered by generated tokens the tokens are a teacher-forced transcript and `read` slices its read
positions (`lab.train.training_batch`, `lab.train.read_slice`).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from witness.errors import ParameterError
from witness.ir import Network
from lab.rates import check_device_name
from lab.torch import to_module

#: Gradient-norm clip per step (the usual 1.0): without layer norm a matrix-state layer's gradient is polynomial (up
#: to cubic) in its weights, and clipping keeps one spiking batch from dominating Adam's moment estimates. The
#: guard against divergence is still the trainer's finite check.
MAX_GRAD_NORM = 1.0


def training_device(device: str) -> torch.device:
    """The torch device `device` names (`lab.rates.DEVICES`), or a ParameterError in one line where it is "cuda"
    and torch sees no CUDA device here."""
    check_device_name(device)
    if device == "cuda":
        if not torch.cuda.is_available():
            why = "this torch build has no CUDA" if torch.version.cuda is None else "no CUDA device is visible"
            raise ParameterError(f"device cuda: torch.cuda.is_available() is False ({why}); train on cpu")
        # Deterministic mode refuses cuBLAS's matrix products unless cuBLAS has a fixed workspace, which it reads
        # when it first starts; a caller's own setting wins.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return torch.device(device)


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


@contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """Deterministic kernels, one CPU thread and torch seeded with `seed` while a run trains; the caller's
    determinism and thread count are restored after, whatever happens."""
    previous_determinism, previous_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    previous_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    use_deterministic_algorithms(True)
    # One thread: these matrices are tiny, so handing them between threads costs more than it saves, and the
    # result then cannot depend on how many cores the machine has.
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        yield
    finally:
        use_deterministic_algorithms(previous_determinism, warn_only=previous_warn_only)
        torch.set_num_threads(previous_threads)


def training_module(network: Network, device: torch.device | str = "cpu"):
    """The float32 module `train` trains, on `device`: `lab.torch.to_module(network)` with its softmax layers'
    pattern taken from `torch.softmax` (`MixerModule.fused_softmax`). That rounds differently from the executor's
    exp-and-divide, which only the weights' last bits can show; the accuracy `train` reports is still the float64
    executor's on the imported weights."""
    module = to_module(network, dtype=torch.float32).to(device)
    for layer in module.blocks:
        layer.attn.fused_softmax = True
    return module


class FusedAdamW:
    """AdamW by the kernel `torch.optim.AdamW(fused=True)` runs (`torch._fused_adamw_`: one elementwise pass over each
    parameter, so deterministic), with the same state and the same calls, so the same weights bit for bit
    (tests/lab/test_train_step.py). Called directly because building any `torch.optim` optimiser imports
    torch._dynamo, and with it torch._inductor (about 2.5 s in every process that trains), only to keep
    `torch.compile`, which the trainer never runs, out of its methods. `param_groups[0]["lr"]` is the rate the next
    `step` takes, as in torch.optim."""

    betas = (0.9, 0.999)  # torch.optim.AdamW's defaults
    eps = 1e-8

    def __init__(self, parameters, lr: float, weight_decay: float) -> None:
        self.parameters = list(parameters)
        self.param_groups = [{"lr": lr, "weight_decay": weight_decay}]
        self.state: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}  # step, exp_avg, exp_avg_sq

    def zero_grad(self) -> None:
        for parameter in self.parameters:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One AdamW step of every parameter that has a gradient; its state starts (zero moments, a float32 step
        count on its device) at its first gradient, as torch.optim's does."""
        stepped = [(index, parameter) for index, parameter in enumerate(self.parameters)
                   if parameter.grad is not None]
        if not stepped:
            return
        for index, parameter in stepped:
            if index not in self.state:
                self.state[index] = (torch.zeros((), dtype=torch.float32, device=parameter.device),
                                     torch.zeros_like(parameter, memory_format=torch.preserve_format),
                                     torch.zeros_like(parameter, memory_format=torch.preserve_format))
        steps, exp_avgs, exp_avg_sqs = (list(column) for column in zip(*(self.state[index] for index, _ in stepped)))
        torch._foreach_add_(steps, 1)
        group = self.param_groups[0]
        torch._fused_adamw_([parameter for _, parameter in stepped], [parameter.grad for _, parameter in stepped],
                            exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, lr=group["lr"], beta1=self.betas[0],
                            beta2=self.betas[1], weight_decay=group["weight_decay"], eps=self.eps, maximize=False,
                            grad_scale=None, found_inf=None)


def optimiser_for(module, lr: float, weight_decay: float = 0.0) -> FusedAdamW:
    """The trainer's AdamW over `module`'s trainable parameters (`FusedAdamW`): several times faster on these small
    parameters than torch's default single-tensor loop on CPU, which rounds differently in the last place, so
    weights trained with the loop are not reproduced bit for bit; the same arguments still give the same weights on
    one torch build and device."""
    return FusedAdamW([parameter for parameter in module.parameters() if parameter.requires_grad], lr, weight_decay)


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
    construction has it. Tasks without hops have none, and neither has a task answered by generated tokens
    (composition_cot): every hop is one of its generated tokens, already a target of the teacher-forced loss."""
    if getattr(task, "generated_tokens", 0) or not hasattr(task, "hop_answers"):
        return {}
    hops = getattr(task, "L", 1)
    return {l: l * (layer_count - 1) // hops for l in range(1, hops)}


def logits_at(module, x: torch.Tensor, read: slice | None = None) -> torch.Tensor:
    """The logits the loss reads from the final residual stream x [batch, n, d_model]: at the module's own read
    positions (`read_from`) where `read` is None, else at the positions `read` slices (a teacher-forced transcript's
    read positions, `lab.train.read_slice`)."""
    return module.read_from(x) if read is None else module.unembed_stream(x[:, read])


def _losses(module, tokens: torch.Tensor, targets: torch.Tensor, hop_targets: torch.Tensor | None,
            hop_at: dict[int, int], hop_weight: float, read: slice | None = None) -> torch.Tensor:
    """Cross-entropy at the read positions (`logits_at`), plus hop_weight times the mean cross-entropy of each
    intermediate hop read through the unembedding after its layer (last position)."""
    wanted = {layer: hop for hop, layer in hop_at.items()} if hop_weight else {}
    hop_losses = []
    for depth, x in enumerate(module.residuals(tokens), start=-1):  # -1: the embedding
        if depth in wanted:  # read out while the forward pass is here: the gradient sums in the same order
            hop_losses.append(torch.nn.functional.cross_entropy(module.unembed_stream(x[:, -1]),
                                                                hop_targets[:, wanted[depth] - 1]))
    logits = logits_at(module, x, read)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    if hop_losses:
        loss = loss + hop_weight * torch.stack(hop_losses).mean()
    return loss


def training_step(module, optimiser, tokens: torch.Tensor, targets: torch.Tensor,
                  hop_targets: torch.Tensor | None = None, hop_at: dict[int, int] | None = None,
                  hop_weight: float = 0.0, read: slice | None = None) -> float:
    """One step of `train`: the loss (`_losses`; `read`: where its logits are read, `logits_at`), its gradient,
    clipped to MAX_GRAD_NORM, and an optimiser step; the loss before the step. A non-finite loss takes no step (the
    caller raises)."""
    loss = _losses(module, tokens, targets, hop_targets, hop_at or {}, hop_weight, read)
    loss_value = loss.item()
    if not math.isfinite(loss_value):
        return loss_value
    optimiser.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), MAX_GRAD_NORM, foreach=True)
    optimiser.step()
    return loss_value


__all__ = ["MAX_GRAD_NORM", "training_device", "use_deterministic_algorithms", "deterministic", "training_module",
           "FusedAdamW", "optimiser_for", "learning_rate", "hop_layers", "logits_at", "training_step"]
