"""Load a repository script that is no package module (``benchmarks/*.py``, ``tools/**.py``) as
a module, by its path: entered in ``sys.modules`` under its name first, since its dataclasses
look their module up there."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
TOOLS = ROOT / "tools"


def load_file(path: Path, name: str) -> ModuleType:
    """``path`` run afresh as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` run afresh as the module ``name``."""
    return load_file(BENCHMARKS / f"{name}.py", name)


def load_script(relative: str) -> ModuleType:
    """The module of ``tools/<relative>``, run once and cached in ``sys.modules``."""
    path = TOOLS / relative
    name = "roofcast_tools_" + path.with_suffix("").name
    return sys.modules.get(name) or load_file(path, name)
