"""The shape of the code: no import cycle among verify's modules (module-level imports, read with ast)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent


def module_graph(package: str) -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        graph.add_node(name)
        for node in ast.parse(path.read_text()).body:  # module level only: a lazy import inside a function is not
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package):
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.startswith(package)]
            else:
                continue
            graph.add_edges_from((name, target) for target in targets)
    return graph.subgraph([n for n in graph if n.startswith(package)]).copy()


def test_verify_has_no_import_cycle():
    graph = module_graph("verify")
    graph.remove_nodes_from([n for n in list(graph) if not (ROOT / (n.replace(".", "/") + ".py")).exists()
                             and not (ROOT / n.replace(".", "/") / "__init__.py").exists()])
    cycles = [cycle for cycle in nx.simple_cycles(graph) if len(cycle) > 1]
    assert not cycles, cycles
