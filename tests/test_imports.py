"""The shape of the code: module-level imports, read with ast. No import cycle among verify's modules or among
witness's, and witness's core in layers: `witness.arith` above nothing of witness but `witness.errors`, the IR
above nothing that runs networks, the mixer kinds above the IR (README, "Layout of the code")."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent


def module_graph(package: str) -> nx.DiGraph:
    """Module -> the modules of `package` it imports at module level (a lazy import inside a function is not an
    edge). Names that are not modules (`from witness.ir import Network`'s `witness.ir.Network`) are dropped."""
    graph = nx.DiGraph()
    for path in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        graph.add_node(name)
        for node in ast.parse(path.read_text()).body:  # module level only
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package):
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.startswith(package)]
            else:
                continue
            graph.add_edges_from((name, target) for target in targets)
    modules = [n for n in graph if n.startswith(package) and ((ROOT / (n.replace(".", "/") + ".py")).exists()
                                                             or (ROOT / n.replace(".", "/") / "__init__.py").exists())]
    return graph.subgraph(modules).copy()


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    return [cycle for cycle in nx.simple_cycles(graph) if len(cycle) > 1]


def above(graph: nx.DiGraph, module: str) -> set[str]:
    """Every module `module` imports, directly or through others."""
    return nx.descendants(graph, module)


def test_verify_has_no_import_cycle():
    assert not cycles(module_graph("verify")), cycles(module_graph("verify"))


def test_witness_has_no_import_cycle():
    assert not cycles(module_graph("witness")), cycles(module_graph("witness"))


def every_import(path: Path) -> set[str]:
    """The witness modules a file imports anywhere, inside functions too."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
    return {name for name in imported if name.split(".")[0] == "witness"}


def test_arith_imports_nothing_of_witness_but_errors():
    for path in sorted((ROOT / "witness" / "arith").rglob("*.py")):
        outside = {name for name in every_import(path) if not name.startswith("witness.arith")}
        assert outside <= {"witness.errors"}, (path.name, outside)


def test_the_ir_imports_nothing_above_it():
    assert every_import(ROOT / "witness" / "ir.py") <= {"witness.errors", "witness.storage"}


def test_the_ir_and_the_mixers_sit_below_what_runs_networks():
    graph = module_graph("witness")
    runners = {"witness.execute", "witness.reference", "witness.io", "witness.budget", "witness.network",
               "witness.tasks", "witness.torch", "witness.train", "witness.strategies", "witness.registry"}
    assert not above(graph, "witness.ir") & (runners | {"witness.mixers"}), above(graph, "witness.ir")
    mixers = [n for n in graph if n == "witness.mixers" or n.startswith("witness.mixers.")]
    for module in mixers:
        assert not above(graph, module) & runners, (module, above(graph, module) & runners)
    # the registry reads every kind's module, and the kinds do not read the registry
    kinds = {n for n in mixers if n not in ("witness.mixers", "witness.mixers.base", "witness.mixers.softmax",
                                            "witness.mixers.matrix_state", "witness.mixers.chunked")}
    assert kinds <= set(graph.successors("witness.mixers"))
    assert not any("witness.mixers" in above(graph, module) for module in kinds)


def test_the_core_imports_neither_torch_nor_hypothesis():
    """The mixer modules hold torch forward passes and Hypothesis options, each imported only when it is used."""
    import subprocess
    import sys

    code = ("import sys, witness, witness.execute, witness.reference, witness.network, witness.mixers; "
            "print(sorted(m for m in ('torch', 'hypothesis') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
