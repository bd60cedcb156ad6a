"""Compile cost against prompt length, and executor throughput against the tests' plain numpy forward pass.

    .venv/bin/python benchmarks/compile.py [--quick]

Part 1 compiles the (L+1)-layer composition network (L = 2, prompt length 2 + m + m * n_1) from ~10^2 to
~10^6 tokens, writes it to an .npz and reads every array back with numpy. It prints the compile's wall time as a
ratio to that load (`x time`), and the compile's peak traced memory (tracemalloc, which numpy reports its buffers
to) as a ratio to the bytes of the network's arrays (`x memory`). Part 2 runs the same weights on the same inputs
through `witness.execute.run` and through tests/oracles/reference_forward.py (loaded by path), and prints inputs per
second and their ratio. Every ratio compares runs made in this process, so the numbers carry over between machines
better than seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np

import witness
from witness.execute import run
from timing import best_time  # benchmarks/timing.py: fastest of several runs

ROOT = Path(__file__).resolve().parent.parent

# (m, n_1) for L = 2: prompt lengths 102, 1,026, 10,002, 100,174, 1,000,002.
COMPILE_SIZES = [(10, 9), (32, 31), (100, 99), (316, 316), (1000, 999)]
# (L, m, n, inputs) for the throughput comparison.
THROUGHPUT_CASES = [(3, 4, [2, 4], 400), (2, 10, [9], 100)]


def load_reference_forward():
    spec = importlib.util.spec_from_file_location("reference_forward", ROOT / "tests" / "oracles" / "reference_forward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peak_memory(action) -> int:
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of an .npz, read by numpy alone: the baseline a compile is measured against."""
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def compile_scaling(sizes) -> None:
    print("compile: composition, L = 2, against numpy reading the written .npz back (best of 3, or 1 run above "
          "10^5 tokens); peak traced memory against the arrays' bytes")
    print(f"{'tokens':>10} {'d_model':>8} {'arrays MiB':>11} {'compile s':>10} {'load s':>8} {'x time':>7} "
          f"{'peak MiB':>9} {'x memory':>9}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "net.npz"
        for m, n_1 in sizes:
            def build(m=m, n_1=n_1):
                return witness.compile("composition", L=2, m=m, n=[n_1])

            repeats = 3 if (2 + m + m * n_1) < 10**5 else 1
            seconds, network = best_time(build, repeats)
            arrays = sum(array.nbytes for array in network.state_dict().values())
            network.save(path)
            tokens, d_model = network.n_ctx, network.d_model
            del network
            load_seconds, _ = best_time(lambda: load_arrays(path), repeats)
            peak = peak_memory(build)
            print(f"{tokens:>10,} {d_model:>8} {arrays / 2**20:>11.1f} {seconds:>10.4f} {load_seconds:>8.4f} "
                  f"{seconds / load_seconds:>7.2f} {peak / 2**20:>9.1f} {peak / arrays:>9.2f}")


def throughput(cases) -> None:
    reference_forward = load_reference_forward()
    print("\nexecutor vs tests/oracles/reference_forward.py, float64, same weights (read from the same .npz) and inputs")
    print(f"{'network':>28} {'tokens':>7} {'inputs':>7} {'executor/s':>11} {'reference/s':>12} {'ratio':>7} agree")
    with tempfile.TemporaryDirectory() as folder:
        for L, m, n, count in cases:
            network = witness.compile("composition", L=L, m=m, n=n)
            path = Path(folder) / "net.npz"
            network.save(path)
            tokens = network.task.random_tokens(seed=0, count=count)
            executed = run(network, tokens).predictions[:, 0]
            referenced = reference_forward.forward(path, tokens)[:, 0].argmax(axis=-1)
            ours, _ = best_time(lambda: run(network, tokens), 3)
            theirs, _ = best_time(lambda: reference_forward.forward(path, tokens), 1)
            agree = bool(np.array_equal(executed, referenced))
            name = f"L={L} m={m} n={n}"
            print(f"{name:>28} {network.n_ctx:>7} {count:>7} {count / ours:>11.0f} {count / theirs:>12.0f} "
                  f"{theirs / ours:>7.1f} {agree}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stop the compile sweep at ~10^4 tokens")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {platform.system()}, "
          f"python {platform.python_version()}, numpy {np.__version__}\n")
    compile_scaling(COMPILE_SIZES[:3] if args.quick else COMPILE_SIZES)
    throughput(THROUGHPUT_CASES)


if __name__ == "__main__":
    main()
