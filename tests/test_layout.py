"""The shape of the code (README "Layout", docs/layout.md), read with ast: which package may import which, no
import cycle inside a package, the core's inner layers, and the size of modules. The trusted checker's own rule
(the standard library, numpy, gmpy2, safetensors and itself only) is tested beside it, in
tests/verify/checker/test_numbers.py.

An import anywhere in a file counts for the rules between packages, inside functions too: a lazy import is
still an arrow. Inside the core, the layers are judged at module level, where an arrow makes a cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from tests import REPO

#: package -> the packages of the project it may import (besides itself).
ALLOWED = {
    "witness": set(),
    "constructions": {"witness"},
    "lab": {"witness"},
    "verify": {"witness", "constructions", "lab"},
    "experiments": {"witness", "constructions", "lab", "verify"},
    "cli": {"witness", "constructions", "lab", "verify", "experiments"},
}
#: One-release aliases left where a module used to live (docs/layout.md): module -> the modules it may import.
ALIASES = {
    "witness.cli": {"cli.main"},
    "witness.torch": {"lab.torch"},
    "witness.train": {"lab.train"},
    "witness.plots": {"lab.plots"},
    "witness.strategies": {"lab.strategies"},
    "witness.sweep": {"lab.sweep"},
    "verify.separation": {"experiments.separation"},
    "verify.capacity": {"experiments.capacity"},
    "verify.hierarchy": {"experiments.hierarchy"},
    "verify.search.bounds": {"verify.theorems"},
    "verify.search.architectures": {"lab.architectures"},
    "verify.search.margin": {"verify.check"},
    "verify.sweeps": {"verify.check", "lab.sweep"},
}
PROJECT = set(ALLOWED) | {"tests"}
#: The trusted checker is judged by its own size limit (issue 27); every other module stays readable in one go.
MAX_LINES = 450


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def imports(path: Path, module_level_only: bool = False) -> set[str]:
    """The project modules (and names) `path` imports: `from a.b import c` gives a.b and a.b.c."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if module_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.split(".")[0] in PROJECT}


def package_files(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_package_imports_only_what_lies_below_it(package):
    wrong = []
    for path in package_files(package):
        name = module_name(path)
        allowed = ALLOWED[package] | {package}
        for target in imports(path):
            if target.split(".")[0] in allowed or target in ALIASES.get(name, ()):
                continue
            wrong.append(f"{name} imports {target}")
    assert not wrong, wrong


def test_the_aliases_import_only_their_new_home_and_say_so():
    for name, targets in ALIASES.items():
        path = REPO / (name.replace(".", "/") + ".py")
        assert imports(path) == targets, name
        assert "DeprecationWarning" in path.read_text() and "next release" in path.read_text(), name


def test_an_alias_warns_in_a_fresh_process_where_warnings_are_errors():
    """In a fresh interpreter (no test has imported the alias before): a caller who turns warnings into errors
    hears of the move at import. `test_every_alias_hands_out_its_new_modules_names` checks what each hands out."""
    code = "import warnings; warnings.simplefilter('error'); import witness.strategies"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode != 0 and "moved to lab.strategies" in out.stderr


def module_graph(package: str) -> nx.DiGraph:
    """Module -> the modules of `package` it imports at module level."""
    modules = {module_name(path): path for path in package_files(package)}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, target) for target in imports(path, module_level_only=True) if target in modules)
    return graph


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_package_has_an_import_cycle(package):
    cycles = [cycle for cycle in nx.simple_cycles(module_graph(package)) if len(cycle) > 1]
    assert not cycles, cycles


def test_arith_imports_nothing_of_the_core_but_errors():
    for path in package_files("witness/arith"):
        outside = {name for name in imports(path) if not name.startswith(("witness.arith", "witness.errors"))}
        assert not outside, (path.name, outside)


def test_the_ir_and_the_mixers_sit_below_what_runs_networks():
    """The IR's four conveniences (`net.run` ...) import what runs a network when called; at module level the IR
    and every mixer kind sit below the executor, the files, the budget and the tasks."""
    graph = module_graph("witness")
    runners = {"witness.execute", "witness.io", "witness.budget", "witness.tasks", "witness.registry"}
    assert all(name.startswith(("witness.errors", "witness.storage"))
               for name in imports(REPO / "witness" / "ir.py", module_level_only=True))
    mixers = [n for n in graph if n == "witness.mixers" or n.startswith("witness.mixers.")]
    for module in ["witness.ir", *mixers]:
        assert not nx.descendants(graph, module) & runners, (module, nx.descendants(graph, module) & runners)
    kinds = {n for n in mixers if n not in ("witness.mixers", "witness.mixers.base", "witness.mixers.softmax",
                                            "witness.mixers.matrix_state", "witness.mixers.chunked")}
    assert kinds <= set(graph.successors("witness.mixers"))  # the registry reads every kind's module ...
    assert not any("witness.mixers" in nx.descendants(graph, module) for module in kinds)  # ... and not back


def test_the_core_imports_neither_torch_nor_hypothesis():
    """The mixer modules hold torch forward passes and the tasks Hypothesis strategies, each imported when used."""
    code = ("import sys, witness, witness.execute, witness.io, witness.budget, witness.mixers, witness.tasks; "
            "print(sorted(m for m in ('torch', 'hypothesis', 'matplotlib', 'dask') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_no_module_outside_the_checker_is_longer_than_the_limit():
    long = []
    for folder in [*ALLOWED, "scripts", "benchmarks", "examples", "tests"]:
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.is_relative_to(REPO / "verify" / "checker"):
                continue
            lines = len(path.read_text().splitlines())
            if lines > MAX_LINES:
                long.append(f"{path.relative_to(REPO)}: {lines} lines")
    assert not long, long


@pytest.mark.parametrize("alias", sorted(set(ALIASES) - {"verify.sweeps"}))
def test_every_alias_hands_out_its_new_modules_names(alias):
    import importlib

    (target,) = ALIASES[alias]
    sys.modules.pop(alias, None)
    with pytest.warns(DeprecationWarning, match=f"{alias} moved to {target}"):
        module = importlib.import_module(alias)
    moved = importlib.import_module(target)
    public = [name for name in vars(moved) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(moved, name) for name in public)


def test_the_chunked_exhaustive_alias_gives_the_checks_result():
    import importlib

    import witness
    from verify import check
    from witness.arith import arithmetic

    sys.modules.pop("verify.sweeps", None)
    with pytest.warns(DeprecationWarning, match="verify.sweeps.exhaustive moved"):
        sweeps = importlib.import_module("verify.sweeps")
    network, fp16 = witness.compile("composition", L=1, m=3), arithmetic("fp16", "strict")
    chunked, serial = sweeps.exhaustive(network, fp16, chunks=3), check.exhaustive(network, fp16)
    assert chunked.detail.pop("chunks") == 3 and chunked == serial and serial.status.value == "verified"
