"""Dev-only scripts (they import torch or rewrite the bundled data) live in ``tools/``, outside
the wheel: the packages setup.py finds hold none of them, and no library module imports them or
a dependency only the exporters need."""

from __future__ import annotations

import ast
import runpy
from pathlib import Path

import pytest
import setuptools

ROOT = Path(__file__).resolve().parents[2]
DEV_SCRIPTS = ("export_zoo.py", "export_llm.py", "build_dataset.py", "torch_eager.py",
               "torch_llm_step.py", "cuda_timing.py")
#: needed by the zoo exporters only (torch itself is an optional probe of the GPU collector)
EXPORT_ONLY = {"torchvision", "transformers", "onnxscript"}


@pytest.fixture(scope="module")
def packaged_files() -> list[Path]:
    """Every .py file of the packages setup.py's discovery puts in the wheel."""
    real_setup = setuptools.setup
    setuptools.setup = lambda **_: None
    try:
        found = runpy.run_path(str(ROOT / "setup.py"))
    finally:
        setuptools.setup = real_setup
    files = []
    for package in found["PACKAGES"]:
        top, _, rest = package.removeprefix("roofcast.").partition(".")
        folder = ROOT / "roofcast" if package == "roofcast" else ROOT / top / rest.replace(".", "/")
        files += sorted(folder.glob("*.py"))
    return files


def test_the_dev_scripts_live_in_tools():
    assert all((ROOT / "tools").rglob(name) for name in DEV_SCRIPTS)
    assert sorted(p.name for p in (ROOT / "tools").rglob("*.py")) == sorted(DEV_SCRIPTS)


def test_the_wheel_holds_no_dev_script(packaged_files):
    assert len(packaged_files) > 100  # the discovery walked the package
    assert [p for p in packaged_files if p.name in DEV_SCRIPTS] == []


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_library_module_imports_a_dev_script_or_an_exporter_dependency(packaged_files):
    bad = sorted(f"{p.relative_to(ROOT)}: {name}" for p in packaged_files for name in _imported(p)
                 if name.split(".")[0] in EXPORT_ONLY or name.split(".")[0] == "tools"
                 or name.rpartition(".")[2] in {s.removesuffix(".py") for s in DEV_SCRIPTS})
    assert bad == []
