"""The package's import structure, read with ``ast`` (nothing is imported):

* no import circle between modules (imports inside functions count: a lazy import still ties
  the two modules together; importing ``a.b.c`` counts as importing the package ``a.b`` too,
  whose ``__init__`` runs first);
* data flows one way: ``graph_import`` and ``hw_catalog`` import no other subpackage;
  ``training_data`` never imports ``predictor`` or ``app`` (a workload schema below both is
  shared); ``predictor`` never imports ``app`` (it may read ``training_data`` to train);
* every import of the project's own code goes through ``roofcast.`` (a bare ``import predictor``
  would load a second copy of a module from the checkout).
"""

from __future__ import annotations

import ast
import functools
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


@functools.lru_cache(maxsize=1)
def import_graph() -> nx.DiGraph:
    """The project's import graph, built once per worker and frozen (tests only read it)."""
    files = module_files()
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for module, path in files.items():
        for target in imports_of(module, path, set(files)):
            g.add_edge(module, target)
            # importing a.b.c first runs the __init__ of a.b (and of a) unless the importer is
            # inside that package (then it is initialised already): an edge to each such package
            for parent in _parents(target):
                if parent in files and not (module == parent or module.startswith(parent + ".")):
                    g.add_edge(module, parent)
    return nx.freeze(g)


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


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


#: Streamlit scripts (they draw a page when imported)
NOT_IMPORTABLE_ALONE = ("roofcast.app.views.", "roofcast.app.streamlit_app")

ISOLATED_IMPORTS = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "roofcast" or m.startswith("roofcast.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


def test_every_module_imports_first():
    """Each module imported first, in a fresh ``roofcast`` (third-party libraries stay loaded):
    catches a circle the static walk misses."""
    import subprocess
    import sys

    names = sorted(m for m in module_files() if not m.startswith(NOT_IMPORTABLE_ALONE))
    out = subprocess.run([sys.executable, "-c", ISOLATED_IMPORTS, *names], capture_output=True,
                         text=True, timeout=600, cwd=ROOT, check=True).stdout.strip()
    assert out == ""
    assert len(names) > 100


# --- the bottom modules (issue 25): roofcast.defaults and roofcast.dtypes sit below every package
BOTTOM = ("roofcast.defaults", "roofcast.dtypes", "roofcast.disk_cache")


def test_bottom_modules_import_nothing_of_the_project():
    g = import_graph()
    assert all(m in g for m in BOTTOM)
    assert {m: sorted(g.successors(m)) for m in BOTTOM} == {m: [] for m in BOTTOM}


@pytest.mark.parametrize("package", ["graph_import", "hw_catalog"])
def test_lower_packages_import_only_the_bottom_modules(package):
    """Of roofcast's own top-level modules (``roofcast/*.py``), graph_import and hw_catalog may
    import only the bottom ones."""
    top = {m for m in module_files() if m.count(".") <= 1
           and m.rpartition(".")[2] not in SUBPACKAGES}
    g = import_graph()
    bad = sorted(f"{m} -> {t}" for m, t in g.edges
                 if (m + ".").startswith(f"roofcast.{package}.") and t in top - set(BOTTOM))
    assert bad == []
    assert "roofcast.api" in top


# ----------------------------------------------------------------------------- layers
#: the API layer (``roofcast.api`` and what it re-exports) sits above the library
API_LAYER = ("roofcast", "roofcast.api", "roofcast.parallel_api")
#: the library's entry points the API wraps: a CLI command calls the API instead of rebuilding
#: its chain from these
API_ROADS = ("roofcast.predictor.simulate", "roofcast.predictor.sweep",
             "roofcast.predictor.compare", "roofcast.predictor.advisor",
             "roofcast.predictor.parallel.engine", "roofcast.predictor.parallel.search",
             "roofcast.predictor.llm.serving", "roofcast.predictor.llm.serving_plan")


def test_the_library_never_imports_the_api_above_it():
    """``predictor`` (sweeps included) calls the library below the API, never the API."""
    g = import_graph()
    bad = sorted(f"{m} -> {t}" for m, t in g.edges
                 if m.startswith("roofcast.predictor") and t in API_LAYER)
    assert bad == []


def test_cli_commands_call_the_api():
    """``app/commands/*`` reach predictions through ``roofcast.api`` / ``roofcast.parallel_api``."""
    g = import_graph()
    bad = sorted(f"{m} -> {t}" for m, t in g.edges
                 if m.startswith("roofcast.app.commands") and t in API_ROADS)
    assert bad == []
    assert g.has_edge("roofcast.app.commands.predict", "roofcast.api")
