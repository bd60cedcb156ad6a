"""Quickstart: compile the 4-layer network for 3-step composition, run it, save and reload it, print its budget.

    .venv/bin/python examples/quickstart.py [folder]

The weights file goes to `folder` (default: a temporary folder, removed at the end).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import witness
from verify import check


def main(folder: Path) -> None:
    # L = 3 steps, seed range m = 4, query ranges n = (2, 4): domains N = (4, 8, 32), a prompt of 46 tokens.
    net = witness.compile("composition", L=3, m=4, n=[2, 4])
    task = net.task
    print(f"{task}: prompt {task.prompt_length} tokens, vocabulary {task.vocab_size}, {len(net.layers)} layers")

    tokens = task.random_tokens(seed=0, count=1)[0]
    instance = task.instance(tokens)
    print(f"seed z_0 = {instance.z0}, query w = {instance.w}")
    print(f"network says {net.run(tokens)}, the task says {task.answer(instance)}")

    path = folder / "composition.npz"
    net.save(path)
    again = witness.load(path)
    print(f"saved and reloaded {path.name}: same output {again.run(tokens) == net.run(tokens)}")

    result = check.sampled(again, count=1000, seed=1)
    print(f"{result.checked - result.failures}/{result.checked} random inputs correct ({result.status.value}: "
          "a sample is not a proof)")
    print("budget at fp64:")
    print(net.budget(bits=64).table())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as temporary:
            main(Path(temporary))
