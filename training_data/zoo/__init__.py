"""The bundled model zoo: weightless ONNX graphs of real architectures plus their metadata.

Each model ``NAME`` is a pair of package-data files beside this module: ``NAME.onnx`` (the graph;
initializers above 1024 elements declare external data in ``NAME.weights.bin``, which is never
shipped, so only their dims are known) and ``NAME.json`` (provenance, export shapes, symbolic
dims, ``params`` = sum of torch parameter elements, ``forward_flops`` from
``torch.utils.flop_counter.FlopCounterMode`` at ``forward_flops_at``, and a
``param_reconciliation`` explaining how the ONNX initializer count differs). The same models
exported by the other torch exporter live in ``alt_exporter/``. ``tools/zoo/export_zoo.py``
regenerates everything (needs the ``[zoo]`` extra; nothing here imports torch).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from roofcast.graph_import.errors import ModelImportError

ZOO_DIR = pathlib.Path(__file__).resolve().parent
ALT_EXPORTER_DIR = ZOO_DIR / "alt_exporter"

__all__ = [
    "ALT_EXPORTER_DIR",
    "ZOO_DIR",
    "alt_exporter_models",
    "alt_model_meta",
    "alt_model_path",
    "list_models",
    "model_meta",
    "model_path",
]


def _names(folder: pathlib.Path) -> list[str]:
    """Models with both NAME.onnx and NAME.json in ``folder``, sorted."""
    return sorted(p.stem for p in folder.glob("*.onnx") if p.with_suffix(".json").is_file())


def _find(folder: pathlib.Path, name: str, suffix: str, what: str) -> pathlib.Path:
    available = _names(folder)
    if name not in available:
        raise ModelImportError(
            f"no {what} model named {name!r}; available: {', '.join(available) or '(none)'}. "
            "Pass one of these names, or a path to your own .onnx file."
        )
    return folder / f"{name}{suffix}"


def list_models() -> list[str]:
    """Names of the bundled zoo models (exported with the zoo's main exporter)."""
    return _names(ZOO_DIR)


def model_path(name: str) -> pathlib.Path:
    """Path of the zoo model's ``.onnx`` file; ModelImportError listing the names on a miss."""
    return _find(ZOO_DIR, name, ".onnx", "zoo")


def model_meta(name: str) -> dict[str, Any]:
    """The zoo model's metadata (the parsed ``NAME.json``)."""
    return json.loads(_find(ZOO_DIR, name, ".json", "zoo").read_text())


def alt_exporter_models() -> list[str]:
    """Names of the models also exported by the other torch exporter (``alt_exporter/``)."""
    return _names(ALT_EXPORTER_DIR)


def alt_model_path(name: str) -> pathlib.Path:
    """Path of the other exporter's ``.onnx`` for ``name``; ModelImportError on a miss."""
    return _find(ALT_EXPORTER_DIR, name, ".onnx", "alt-exporter zoo")


def alt_model_meta(name: str) -> dict[str, Any]:
    """Metadata of the other exporter's export of ``name``."""
    return json.loads(_find(ALT_EXPORTER_DIR, name, ".json", "alt-exporter zoo").read_text())
