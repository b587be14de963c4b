"""The package's imports run one way: no module reaches, at the top or inside a function, a module that reaches it
back. Checked over the source, every import counted (a function-level import is as much a dependency as a top one).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "mage_tune"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> nx.DiGraph:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                # `from a.b import c`: the module a.b.c where c is one, else a.b
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                    for a in node.names
                ]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph.add_edges_from((name, t) for t in targets if t in modules and t != name)
    return graph


def test_no_import_circles():
    cycles = [" -> ".join([*c, c[0]]) for c in nx.simple_cycles(import_graph())]
    assert not cycles, "import circles:\n" + "\n".join(sorted(cycles, key=len)[:20])


def test_search_stands_above_tuning_and_records_below_both():
    graph = import_graph()

    def package_of(module: str) -> str:
        return module.split(".")[1] if module.count(".") >= 1 else ""

    upward = [
        (a, b)
        for a, b in graph.edges
        if (package_of(a), package_of(b)) in {("tuning", "search"), ("records", "search"), ("records", "tuning")}
    ]
    assert not upward, upward
