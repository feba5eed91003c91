"""Load a dev script of ``tools/`` (not a package, not in the wheel) as a module, by its path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def load_script(relative: str) -> ModuleType:
    """The module of ``tools/<relative>``, run once and cached in ``sys.modules``."""
    path = TOOLS / relative
    name = "roofcast_tools_" + path.with_suffix("").name
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
