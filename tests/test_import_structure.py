"""The package's import structure, read with ``ast`` (nothing is imported):

* no import circle between modules (imports inside functions count: a lazy import still ties
  the two modules together);
* data flows one way: ``graph_import`` and ``hw_catalog`` import no other subpackage;
  ``training_data`` never imports ``predictor`` or ``app`` (a workload schema below both is
  shared); ``predictor`` never imports ``app`` (it may read ``training_data`` to train);
* every import of the project's own code goes through ``roofcast.`` (a bare ``import predictor``
  would load a second copy of a module from the checkout).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("graph_import", "hw_catalog", "predictor", "training_data", "app")
#: package -> the packages it must not import (the design's one-way data flow)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "graph_import": ("predictor", "app", "training_data", "hw_catalog"),
    "hw_catalog": ("predictor", "app", "training_data", "graph_import"),
    "training_data": ("predictor", "app"),
    "predictor": ("app",),
}


def module_files() -> dict[str, Path]:
    """Module name -> file for every module of the package (``roofcast.x.y``)."""
    out = {"roofcast": ROOT / "roofcast" / "__init__.py"}
    for path in (ROOT / "roofcast").rglob("*.py"):
        out[_name(path, ROOT)] = path
    for top in SUBPACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            out["roofcast." + _name(path, ROOT)] = path
    return out


def _name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(module: str, path: Path, modules: set[str]) -> set[str]:
    """The project modules ``module`` imports (resolved to existing modules)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")
                parent = parent if is_pkg else parent[:-1]
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph() -> nx.DiGraph:
    files = module_files()
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for module, path in files.items():
        for target in imports_of(module, path, set(files)):
            # importing a package runs its __init__, which is an edge only to that module
            g.add_edge(module, target)
    return g


def bare_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                 else [])
        bad += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                if n.split(".")[0] in SUBPACKAGES]
    return bad


def test_no_import_circle():
    g = import_graph()
    # a package __init__ importing its own submodules is not a circle of design
    cycles = [c for c in nx.simple_cycles(g) if len(c) > 1]
    assert cycles == [], "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles[:20])


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_data_flows_one_way(package):
    g = import_graph()
    bad = sorted(f"{m} -> {t}" for m, t in g.edges
                 if m.startswith(f"roofcast.{package}")
                 and any(t.startswith(f"roofcast.{f}") for f in FORBIDDEN[package]))
    assert bad == []


def test_every_own_import_goes_through_roofcast():
    files = [p for top in (*SUBPACKAGES, "roofcast", "tests", "benchmarks", "docs")
             for p in (ROOT / top).rglob("*.py")] + [ROOT / "setup.py"]
    bad = [b for p in files for b in bare_imports(p)]
    assert bad == []


def test_the_graph_sees_the_package():
    """Guards the checks above against walking nothing."""
    g = import_graph()
    assert len(g) > 100
    assert g.has_edge("roofcast.predictor.simulate", "roofcast.predictor.workload")
