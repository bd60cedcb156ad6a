"""Each recurrent mixer against softmax attention of the same shape (time ratio), float64 and strict fp16.

    .venv/bin/python benchmarks/recurrent_mixers.py [--length 100 --batch 64 --H 1 --d-head 8 --d-model 16 --repeat 3]

The baseline is a one-layer network with a causal softmax-attention layer, run in this process on the same token
batch under the same semantics; every other row swaps that layer for a recurrent mixer of the same H and d_head
(the trainer's random initialisation) and reports its time as a ratio to the baseline. Each network reads every
position, so that its one layer computes every position (a last layer computes only what the readout reads:
docs/conventions.md §3). Each time is the best of --repeat runs.
"""

from __future__ import annotations

import argparse

import numpy as np

from witness.arith import FLOAT64, arithmetic
from witness.execute import run
from witness.ir import Network, Readout
from witness.mixers import RECURRENT_MIXERS
from witness.tasks import Composition
from lab.train import Architecture, LayerSpec
from timing import best_time  # benchmarks/timing.py: fastest of several runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=100, help="prompt length (a composition task near it)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--H", type=int, default=1)
    parser.add_argument("--d-head", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    task = Composition(1, args.length - 2)  # prompt length 2 + m
    tokens = task.random_tokens(np.random.default_rng(0), args.batch)
    kinds = ["attention"] + [cls.kind for cls in RECURRENT_MIXERS]
    networks = {kind: reading_every_position(Architecture(H=args.H, d_head=args.d_head, d_model=args.d_model,
                                                          layers=(LayerSpec(mixer=kind),)).initial_network(task, 0))
                for kind in kinds}
    print(f"one layer, prompt {task.prompt_length} tokens, batch {args.batch}, H {args.H}, d_head {args.d_head}, "
          f"d_model {args.d_model}; best of {args.repeat}")
    for name, arith in (("float64", FLOAT64), ("fp16 strict", arithmetic("fp16", "strict"))):
        baseline, _ = best_time(lambda: run(networks["attention"], tokens, arith), args.repeat)
        print(f"{name}: attention {baseline * 1e3:.1f} ms = 1.0")
        for kind in kinds[1:]:
            seconds, _ = best_time(lambda: run(networks[kind], tokens, arith), args.repeat)
            print(f"  {kind:>15}  {seconds * 1e3:9.1f} ms  ratio {seconds / baseline:6.2f}")


def reading_every_position(network: Network) -> Network:
    readout = Readout(network.readout.W_U, network.readout.b_U, read="all")
    return Network(network.embedding, network.layers, readout, network.basis, network.meta)


if __name__ == "__main__":
    main()
