"""ONNX -> Graph: safe loading, concrete shapes, per-op costs.

    from roofcast.graph_import import import_model, ModelImportError
    graph = import_model("model.onnx", dims={"batch": 8, "sequence": 512})
"""

from __future__ import annotations

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
    from roofcast.graph_import.build import build_graph
    from roofcast.graph_import.load import DEFAULT_MAX_BYTES, load_model, skeleton
    from roofcast.graph_import.shapes import infer_concrete

    model = load_model(source, max_bytes=DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)
    shapes = infer_concrete(model, dims)
    graph = build_graph(model, shapes, name=name or _default_name(source, model))
    graph.skeleton = skeleton(model)
    return graph


def _default_name(source: Any, model: Any) -> str:
    import os

    if isinstance(source, str | os.PathLike):
        return os.path.splitext(os.path.basename(os.fspath(source)))[0]
    return model.graph.name or "model"
