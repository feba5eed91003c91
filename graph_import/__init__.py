"""ONNX -> Graph: safe loading, concrete shapes, per-op costs.

    from roofcast.graph_import import import_model, ModelImportError
    graph = import_model("model.onnx", dims={"batch": 8, "sequence": 512})
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.types import Graph

__all__ = ["Graph", "ModelImportError", "import_model"]


def import_model(
    source: Any,
    dims: Mapping[str, int] | None = None,
    name: str | None = None,
    *,
    max_bytes: int | None = None,
) -> Graph:
    """Load ``source`` (path, bytes or binary file object) safely, make shapes concrete with
    ``dims`` (``{"batch": 8, "input_ids:1": 128}``), and cost every node.

    Never raises for unbound symbolic dims: they are listed in ``Graph.unbound_dims`` and the
    nodes depending on them in ``Graph.unresolved``. Raises ModelImportError for bad input,
    and for input over a budget (tensor elements, graph bytes, --dim values, nesting, nodes;
    ``graph_import.budgets``, raised with ``ROOFCAST_MAX_*`` environment variables).
    """
    from roofcast.graph_import import graph_cache
    from roofcast.graph_import.source import DEFAULT_MAX_BYTES, read_source

    cap = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    if not isinstance(source, str | os.PathLike):  # uploads and file objects: not cached
        return _import(read_source(source, cap), dims, name or None, cap)
    data = read_source(source, cap)
    name = name or _path_name(source)
    if graph_cache.folder() is None:
        return _import(data, dims, name, cap)
    entry = graph_cache.key(data, dims, name, cap)
    graph = graph_cache.read(entry)
    if graph is None:
        graph = _import(data, dims, name, cap)
        graph_cache.write(entry, graph)
    return graph


def _import(data: bytes | bytearray, dims: Mapping[str, int] | None, name: str | None,
            cap: int) -> Graph:
    """Parse, shape-infer and cost the model ``data``."""
    from roofcast.graph_import.build import build_graph
    from roofcast.graph_import.load import load_model, skeleton
    from roofcast.graph_import.shapes import infer_concrete

    model = load_model(data, max_bytes=cap)
    shapes = infer_concrete(model, dims)
    graph = build_graph(model, shapes, name=name or model.graph.name or "model")
    graph.skeleton = skeleton(model)
    return graph


def _path_name(source: str | os.PathLike) -> str:
    return os.path.splitext(os.path.basename(os.fspath(source)))[0]
