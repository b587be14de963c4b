"""The package's imports run one way: no module reaches, at the top or inside a function, a module that reaches it
back. Checked over the source, every import counted (a function-level import is as much a dependency as a top one).

And they sit at the top of their modules, but for two kinds of lazy import: the CLI's commands import their code
inside their bodies (so `mage-tune --help` and `mage-tune CMD --help` stay instant), and heavy optional libraries
load on first use, the GPU ones (cupy, torch, the Triton reference kernels) all through mage_tune/gpu.py.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from mage_tune.cli import COMMANDS

PACKAGE = Path(__file__).resolve().parents[1] / "mage_tune"
GPU_LIBRARIES = PACKAGE / "gpu.py"  # the one module that imports cupy and torch
CLI = PACKAGE / "cli"
# Not loaded by `mage-tune --help` or `mage-tune CMD --help`: each takes from a tenth of a second to a second.
HEAVY = ("optuna", "torch", "cupy", "triton", "sklearn", "matplotlib", "scipy", "sqlalchemy", "numpy")
# The package's own lazy attributes (PEP 562): `mage_tune.census` and `mage_tune.compare` import on first use, so the
# `import mage_tune` every module and every `mage-tune` run makes stays light.
LAZY_ATTRIBUTES = {(PACKAGE / "__init__.py", "__getattr__")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted names an import statement names (`from a.b import c`: a.b.c and a.b; relative imports: none)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level or not node.module:
        return []
    return [node.module, *(f"{node.module}.{a.name}" for a in node.names)]


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
            # Importing a.b.c runs the packages' a/b/__init__.py first: from outside a.b, that is a dependency too
            # (the top package's own, whose lazy attributes import nothing at import time, aside).
            parents = [
                ".".join(t.split(".")[:i])
                for t in targets
                for i in range(2, t.count(".") + 1)
                if not name.startswith(".".join(t.split(".")[:i]) + ".")
            ]
            graph.add_edges_from((name, t) for t in [*targets, *parents] if t in modules and t != name)
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


# --- imports at the top ------------------------------------------------------------------------------------------


def _function_level_imports(path: Path):
    """(function name, import node) for every import not among the module's top-level statements (those under a
    top-level `if` or `try` count as top-level: TYPE_CHECKING, an optional library)."""
    tree = ast.parse(path.read_text(), str(path))
    top: set[int] = set()

    def mark(body):
        for node in body:
            top.add(id(node))
            if isinstance(node, ast.If | ast.Try):
                handlers = [h.body for h in getattr(node, "handlers", [])]
                for block in (node.body, node.orelse, getattr(node, "finalbody", []), *handlers):
                    mark(block)

    mark(tree.body)

    def walk(node, function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and id(child) not in top:
                yield function, child
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            yield from walk(child, inner)

    yield from walk(tree, "")


def test_modules_import_the_package_at_the_top():
    """Outside the CLI's command bodies and the GPU-library module, a mage_tune module imports mage_tune modules at
    its top only (heavy third-party libraries may load lazily; each such module says why at its top)."""
    inside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(CLI) or path == GPU_LIBRARIES:
            continue
        for function, node in _function_level_imports(path):
            if (path, function) in LAZY_ATTRIBUTES:
                continue
            if any(name == "mage_tune" or name.startswith("mage_tune.") for name in _imported(node)):
                inside.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} in {function}(): {ast.unparse(node)}")
    assert not inside, "function-level imports of mage_tune modules:\n" + "\n".join(inside)


def test_only_the_gpu_library_module_imports_cupy_and_torch():
    importers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if any(name.split(".")[0] in ("cupy", "torch") for name in _imported(node)) and path != GPU_LIBRARIES:
                importers.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not importers, "cupy or torch imported outside mage_tune/gpu.py:\n" + "\n".join(importers)


HELP_RUN = """
import json, sys
sys.argv = ["mage-tune", *json.loads(sys.argv[1])]
from mage_tune.cli import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


@pytest.mark.parametrize("args", [["--help"], *([name, "--help"] for name in COMMANDS)], ids=" ".join)
def test_help_loads_no_heavy_library(args):
    done = subprocess.run(
        [sys.executable, "-c", HELP_RUN, json.dumps(args)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "Usage:" in done.stdout
    assert not [name for name in HEAVY if name in loaded], f"mage-tune {' '.join(args)} loaded heavy libraries"


def test_the_cpu_path_imports_without_the_gpu_libraries():
    """Every module but the Triton kernels' (triton itself) and the PyTorch operators' (mage_tune.torch: torch
    itself) imports where cupy and torch will not (None in sys.modules makes `import torch` fail), and none of them
    loads either where they would."""
    names = sorted(
        _module_name(p)
        for p in PACKAGE.rglob("*.py")
        if p.stem not in ("__main__", "triton_kernels") and not _module_name(p).startswith("mage_tune.torch")
    )
    blocked = "import sys\nsys.modules['torch'] = sys.modules['cupy'] = None\n"
    for setup in (blocked, "import sys\n"):
        code = (
            setup
            + "".join(f"import {name}\n" for name in names)
            + "print('torch' in sys.modules, 'cupy' in sys.modules)"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        if setup != blocked:
            assert done.stdout.split() == ["False", "False"]


def test_the_pytorch_operators_without_torch_say_how_to_get_it():
    code = "import sys\nsys.modules['torch'] = None\nimport mage_tune.torch\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "NoDeviceError: torch will not import" in done.stderr and "gpu" in done.stderr
