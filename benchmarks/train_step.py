"""One training step of `lab.train` against the same model written plainly in torch: a full-attention control and
a DeltaNet hybrid.

    .venv/bin/python benchmarks/train_step.py [--quick] [--lengths 10 64 --batch 64 --repeat 5 --steps 20]
                                              [--device cpu|cuda]

The models: two layers, each a mixer (H 1, d_head 16) and a ReLU MLP (d_mlp 64), d_model 32, on a composition task
of the given prompt length (L = 1, m = length - 2; m = 8 is 10 tokens); the mixer is causal softmax attention (the
control, `full`) or DeltaNet (the hybrid's recurrent layer, `deltanet`). One step is forward, cross-entropy at the
last position, backward, gradient-norm clipping and an AdamW step, in float32 on one thread, batch 64. Per mixer,
three modules hold the same weights:

  plain     the baseline: `PlainNetwork` below, what a practitioner writes (nn.Linear projections, fused q/k/v;
            attention by torch.softmax over the causally masked scores, DeltaNet by the chunked WY delta rule of
            Yang et al. 2024), with no IR behind it, trained by torch.optim.AdamW on its multi-tensor path
            (`foreach=True`; torch's CPU default is the slower single-tensor loop), as issue 30 sets the bar;
  witness   `lab.train.training_module(network)` (the module `lab.train.train` trains: `lab.torch.to_module`'s
            parallel forms, softmax by torch.softmax), trained by `lab.train.training_step` and
            `lab.train.optimiser_for`: exactly the trainer's step;
  loop      (deltanet only) `lab.torch.to_module(network, parallel=False)`: the step-by-step reference recurrence,
            trained by the trainer's step.

With `--device cuda` (where torch sees a GPU) every module and tensor lives there and each timed run ends by waiting
for the GPU; the baseline is then the plain module on the same GPU. Before timing, the modules are checked to compute
the same logits. Each time is the best of --repeat runs of
--steps steps, the models' runs interleaved; the ratios are against `plain` of the same mixer, measured in this
process.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch import nn

import lab.torch as wt
from witness.mixers.chunked import CHUNK_SIZE as CHUNK
from witness.tasks import Composition
from lab.rates import DEVICES
from lab.train import (MAX_GRAD_NORM, Architecture, LayerSpec, optimiser_for, training_device, training_module,
                       training_step, use_deterministic_algorithms)
from timing import best_time  # benchmarks/timing.py: fastest of several runs

D_MODEL, D_HEAD, D_MLP, LAYERS = 32, 16, 64, 2


def plain_delta_rule(q, k, v, beta):
    """DeltaNet's S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t, chunked: within a
    chunk the pseudo-values U = T (beta V - beta K S) solve a unit lower-triangular system, across chunks the
    state is carried. q, k, v [batch, n, d], beta [batch, n, 1] -> [batch, n, d]."""
    batch, length, d = q.shape
    size = min(CHUNK, length)
    padding = -length % size
    q, k, v, beta = (nn.functional.pad(t, (0, 0, 0, padding)).unflatten(1, (-1, size)) for t in (q, k, v, beta))
    system = torch.tril(beta * (k @ k.transpose(-1, -2)), diagonal=-1)
    solved = torch.linalg.solve_triangular(system, torch.cat([beta * v, beta * k], -1), upper=False,
                                           unitriangular=True)
    free_values, key_weights = solved.split([d, d], -1)
    scores = torch.tril(q @ k.transpose(-1, -2))
    if q.shape[1] == 1:
        return (scores @ free_values)[:, 0, :length]
    state = q.new_zeros(batch, d, d)
    outputs = []
    for c in range(q.shape[1]):
        values = free_values[:, c] - key_weights[:, c] @ state
        outputs.append(scores[:, c] @ values + q[:, c] @ state)
        state = state + k[:, c].transpose(-1, -2) @ values
    return torch.stack(outputs, 1).flatten(1, 2)[:, :length]


def plain_attention(q, k, v):
    """Causal softmax attention with no score scale (as the IR's): q, k, v [batch, n, d] -> [batch, n, d]."""
    scores = q @ k.transpose(-1, -2)
    mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
    return torch.softmax(scores.masked_fill(mask, -torch.inf), dim=-1) @ v


class PlainNetwork(nn.Module):
    """The benchmark's model written directly in torch: embeddings, LAYERS x (mixer + MLP), unembedding; the mixer
    is causal attention or DeltaNet."""

    def __init__(self, vocab: int, length: int, mixer: str) -> None:
        super().__init__()
        self.mixer = mixer
        self.embed = nn.Embedding(vocab, D_MODEL)
        self.pos = nn.Parameter(torch.zeros(length, D_MODEL))
        self.qkv = nn.ModuleList(nn.Linear(D_MODEL, 3 * D_HEAD) for _ in range(LAYERS))
        self.beta = nn.ModuleList(nn.Linear(D_MODEL, 1) for _ in range(LAYERS))
        self.out = nn.ModuleList(nn.Linear(D_HEAD, D_MODEL) for _ in range(LAYERS))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(D_MODEL, D_MLP), nn.ReLU(), nn.Linear(D_MLP, D_MODEL))
                                 for _ in range(LAYERS))
        self.unembed = nn.Linear(D_MODEL, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for qkv, beta, out, mlp in zip(self.qkv, self.beta, self.out, self.mlp):
            q, k, v = qkv(x).chunk(3, dim=-1)
            mixed = plain_attention(q, k, v) if self.mixer == "attention" else plain_delta_rule(
                q, k, v, torch.sigmoid(beta(x)))
            x = x + out(mixed)
            x = x + mlp(x)
        return self.unembed(x)

    @torch.no_grad()
    def load(self, module: wt.NetworkModule) -> PlainNetwork:
        """Copy a witness module's weights (nn.Linear holds W^T)."""
        self.embed.weight.copy_(module.embed.W_E)
        self.pos.copy_(module.pos_embed.W_pos)
        for l, layer in enumerate(module.blocks):
            mixer, mlp = layer.attn, layer.mlp
            self.qkv[l].weight.copy_(torch.cat([mixer.W_Q[0], mixer.W_K[0], mixer.W_V[0]], 1).T)
            self.qkv[l].bias.copy_(torch.cat([mixer.b_Q[0], mixer.b_K[0], mixer.b_V[0]]))
            if self.mixer == "deltanet":
                self.beta[l].weight.copy_(mixer.W_beta[0].T)
                self.beta[l].bias.copy_(mixer.b_beta[0])
            self.out[l].weight.copy_(mixer.W_O[0].T)
            self.out[l].bias.copy_(mixer.b_O)
            self.mlp[l][0].weight.copy_(mlp.W_in.T)
            self.mlp[l][0].bias.copy_(mlp.b_in)
            self.mlp[l][2].weight.copy_(mlp.W_out.T)
            self.mlp[l][2].bias.copy_(mlp.b_out)
        self.unembed.weight.copy_(module.unembed.W_U.T)
        self.unembed.bias.copy_(module.unembed.b_U)
        return self


def plain_steps(model: nn.Module, tokens: torch.Tensor, targets: torch.Tensor, steps: int):
    """A function running `steps` plain training steps (forward, loss at the last position, backward, clipping,
    multi-tensor AdamW)."""
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)

    def run() -> None:
        for _ in range(steps):
            loss = nn.functional.cross_entropy(model(tokens)[:, -1], targets)
            optimiser.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
            optimiser.step()
        if tokens.is_cuda:  # the steps above only queue work on the GPU
            torch.cuda.synchronize()
    return run


def trainer_steps(module: wt.NetworkModule, tokens: torch.Tensor, targets: torch.Tensor, steps: int):
    """A function running `steps` steps of `lab.train`'s own step on `module`."""
    optimiser = optimiser_for(module, 1e-3)

    def run() -> None:
        for _ in range(steps):
            training_step(module, optimiser, tokens, targets[:, None])
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 64], help="prompt lengths (>= 3)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed run")
    parser.add_argument("--device", choices=DEVICES, default="cpu", help="where every model trains")
    args = parser.parse_args()
    device = training_device(args.device)
    repeat, steps = (3, 10) if args.quick else (args.repeat, args.steps)
    torch.set_num_threads(1)
    use_deterministic_algorithms(True)  # as lab.train runs
    torch.manual_seed(0)
    print(f"{LAYERS} x (mixer H 1 d_head {D_HEAD} + MLP {D_MLP}), d_model {D_MODEL}, float32, batch {args.batch}, "
          f"one thread, chunk {CHUNK}, on {args.device}; ms per step (forward + backward + clip + AdamW), best of {repeat} x {steps} "
          "steps")
    print(f"{'prompt':>6}  {'mixer':<9} {'model':<8} {'ms/step':>8} {'x time':>7}")
    for length in args.lengths:
        task = Composition(1, length - 2)
        tokens = torch.as_tensor(task.random_tokens(np.random.default_rng(0), args.batch))
        targets = torch.as_tensor(task.answers(tokens.numpy()).reshape(args.batch, -1)[:, -1]).to(device)
        tokens = tokens.to(device)
        for mixer in ("attention", "deltanet"):
            architecture = Architecture(H=1, d_head=D_HEAD, d_model=D_MODEL,
                                        layers=(LayerSpec(mixer=mixer, d_mlp=D_MLP),) * LAYERS)
            network = architecture.initial_network(task, seed=0)
            models = {"witness": training_module(network, device)}
            if mixer == "deltanet":
                models["loop"] = wt.to_module(network, torch.float32, parallel=False).to(device)
            models = {"plain": PlainNetwork(task.vocab_size, length, mixer).to(device).load(models["witness"]),
                      **models}
            with torch.no_grad():
                logits = {name: model(tokens) for name, model in models.items()}
            for name in models:
                torch.testing.assert_close(logits[name], logits["plain"], rtol=1e-4, atol=1e-4)
            runs = {name: (plain_steps if name == "plain" else trainer_steps)(model, tokens, targets, steps)
                    for name, model in models.items()}
            best = dict.fromkeys(runs, float("inf"))
            for _ in range(repeat):  # interleaved, so that a burst of load on the machine slows every model alike
                for name, run in runs.items():
                    best[name] = min(best[name], best_time(run, 1)[0])
            label = "full" if mixer == "attention" else mixer
            for name, seconds in best.items():
                print(f"{length:>6}  {label:<9} {name:<8} {seconds / steps * 1e3:>8.2f} "
                      f"{seconds / best['plain']:>7.2f}")


if __name__ == "__main__":
    main()
