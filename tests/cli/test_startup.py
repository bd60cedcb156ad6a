"""Commands that start at once: `witness --help`, building the parser and a small compile import none of the heavy
libraries (sympy, numba, hypothesis, networkx, torch, dask, matplotlib), each of which costs a tenth of a
CPU-second to seconds; the command that needs one imports it. Which modules are imported is checked here, in a
fresh interpreter (`python -X importtime` lists every one); how long it takes is measured by
benchmarks/startup.py, not asserted."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Never imported by `witness --help` or by building the parser.
HEAVY = ("sympy", "numba", "llvmlite", "hypothesis", "networkx", "torch", "dask", "distributed", "matplotlib")
#: A compile rounds nothing and proves nothing: the same list.
NOT_FOR_COMPILE = HEAVY


def imported(argv: list[str], cwd) -> set[str]:
    """Every module a fresh `python -X importtime -m cli.main ARGV` imports (top-level package names too)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "cli.main", *argv], capture_output=True,
                          text=True, timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names |= {name, name.split(".")[0]}
    assert "cli.main" in names or "witness" in names, done.stderr[-2000:]
    return names


def loaded(names: set[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(module for module in names if module.split(".")[0] in heavy or module == "torch._inductor")


def test_help_imports_nothing_heavy(tmp_path):
    names = imported(["--help"], tmp_path)
    assert not loaded(names, HEAVY), loaded(names, HEAVY)


def test_building_the_parser_imports_nothing_heavy():
    code = ("import sys; import cli.main as cli; cli.build_parser(); "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("command", [["compile", "--help"], ["min-precision", "--help"], ["search", "hybrid", "--help"],
                                     ["verify", "--help"]])
def test_command_help_imports_nothing_heavy(tmp_path, command):
    """A command's own help shows its defaults and choices (verify.defaults), not the modules that use them."""
    names = imported(command, tmp_path)
    assert not loaded(names, HEAVY), loaded(names, HEAVY)


def test_a_small_compile_imports_nothing_heavy(tmp_path):
    names = imported(["compile", "composition", "--L", "1", "--m", "4", "-o", str(tmp_path / "x.npz")], tmp_path)
    assert (tmp_path / "x.npz").is_file()
    assert not loaded(names, NOT_FOR_COMPILE), loaded(names, NOT_FOR_COMPILE)


def test_importing_witness_still_gives_every_network_its_methods():
    """`witness` stays light but still attaches run/budget/save/task to Network (witness.network), so a network
    built by hand from `witness.ir` has them, and the documented API is all there."""
    code = ("import sys, witness, witness.ir; "
            "assert all(hasattr(witness.ir.Network, name) for name in ('run', 'budget', 'save', 'task')); "
            "assert all(hasattr(witness, name) for name in witness.__all__); "
            "net = witness.compile('composition', L=2, m=2, n=[2]); t = net.task.random_tokens(seed=0, count=1)[0]; "
            "assert net.run(t) == net.task.answers(t)[0]; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_parser_shows_the_same_defaults_its_commands_use():
    """verify.defaults is the one source: the modules that use each value read it from there."""
    from verify import check, defaults, precision
    from verify.search import probes

    assert check.DEFAULT_MAX_EXAMPLES is defaults.DEFAULT_MAX_EXAMPLES
    assert sorted(precision.FAMILIES) == sorted(defaults.FAMILY_SPLITS) and precision.METHODS is defaults.METHODS
    assert probes.SAMPLES == defaults.SEARCH_SAMPLES and probes.PAIR_PREFIXES == defaults.PAIR_PREFIXES
