"""Float64 executor throughput against the exported torch module's forward pass, same weights, same inputs.

    .venv/bin/python benchmarks/torch_vs_executor.py [--quick]

For each network, `witness.execute.run` (numpy, float64) and `lab.torch.to_module(network).read_logits`
(torch, float64, no autograd) run the same batch of token sequences; the table prints inputs per second for both
and the ratio torch / executor (above 1: the torch module is faster). Both use every core the machine gives them
(torch's default thread count, numpy's BLAS threads). Before timing, the two outputs are compared: bit for bit
for the compiled construction (its readout logits are small integers), to float64 rounding for the trained-shape
random network (BLAS summation order differs). Every ratio compares runs made in this process.
"""

from __future__ import annotations

import argparse
import platform

import numpy as np
import torch

import witness
from witness.execute import run
from witness.tasks import Composition
from lab.torch import to_module
from lab.train import Architecture, LayerSpec
from timing import best_time  # benchmarks/timing.py: fastest of several runs


def cases(quick: bool):
    yield "composition L=3 m=4 n=(2,4) (compiled)", witness.compile("composition", L=3, m=4, n=[2, 4]), True
    if not quick:
        yield "composition L=2 m=16 n=(4,) (compiled)", witness.compile("composition", L=2, m=16, n=[4]), True
    task = Composition(L=2, m=4, n=(2,))
    architecture = Architecture(H=4, d_head=16, d_model=64, layers=(LayerSpec(d_mlp=256),) * 3)
    yield "random H=4 d_model=64 3 layers, L=2 m=4 n=(2,)", architecture.initial_network(task, seed=0), False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one compiled network, smaller batches")
    args = parser.parse_args()
    batch = 256 if args.quick else 2048
    repeats = 3 if args.quick else 5
    print(f"{platform.processor() or platform.machine()}, numpy {np.__version__}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads); batch {batch}, best of {repeats}")
    print(f"{'network':<48} {'n':>4} {'d_model':>7} {'executor in/s':>13} {'torch in/s':>11} {'torch/exec':>10}")
    for name, network, exact in cases(args.quick):
        tokens = network.task.random_tokens(0, batch)
        module = to_module(network)
        tensor = torch.as_tensor(tokens)
        with torch.no_grad():
            module_logits = module.read_logits(tensor).numpy()
            expected = run(network, tokens).logits
            if exact:
                assert np.array_equal(module_logits, expected), name
            else:
                assert np.abs(module_logits - expected).max() <= 1e-9 * (1 + np.abs(expected).max()), name
            executor_s, _ = best_time(lambda: run(network, tokens), repeats)
            torch_s, _ = best_time(lambda: module.read_logits(tensor), repeats)
        print(f"{name:<48} {tokens.shape[1]:>4} {network.d_model:>7} {batch / executor_s:>13.0f} "
              f"{batch / torch_s:>11.0f} {executor_s / torch_s:>10.2f}")


if __name__ == "__main__":
    main()
