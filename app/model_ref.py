"""Resolve the MODEL argument of every command: a path to an ONNX file or a zoo model name.

``--batch N`` is shorthand for ``--dim batch=N`` (the zoo's and the common exporters' name for
the batch dim); a model that names it otherwise is bound with ``--dim NAME=N``. Without either,
a model with a ``batch`` dim runs at batch 1. A ``--dim`` name that is none of the model's dims
is an error listing them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from roofcast.graph_import import import_model
from roofcast.graph_import.dims import check_dim_names, parse_dim_specs, with_default_batch
from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.types import Graph
from roofcast.training_data import zoo


def resolve_model_path(model: str) -> Path:
    """A path that exists wins; otherwise a zoo name (``resnet50``, ``zoo:resnet50``)."""
    path = Path(model)
    if path.is_file():
        return path
    if path.exists():
        raise ModelImportError(f"{model} is not a file: give the path of an .onnx file")
    name = model.removeprefix("zoo:")
    if name in zoo.list_models():
        return zoo.model_path(name)
    raise ModelImportError(
        f"no file {model!r} and no zoo model of that name; give an .onnx path or one of: "
        + ", ".join(zoo.list_models())
    )


def bind_dims(dim_specs: Sequence[str] = (), batch: int | None = None) -> dict[str, int]:
    """Merge ``--dim`` specs and ``--batch`` into the dims mapping of ``import_model``."""
    dims = parse_dim_specs(dim_specs)
    if batch is not None:
        if "batch" in dims and dims["batch"] != batch:
            raise ModelImportError(
                f"--batch {batch} contradicts --dim batch={dims['batch']}; give one of them"
            )
        dims.update(parse_dim_specs([f"batch={batch}"]))
    return dims


def load_graph(model: str, dim_specs: Sequence[str] = (), batch: int | None = None) -> Graph:
    """Import MODEL (path or zoo name) with the user's ``dim_specs`` (each name must be one of
    the model's dims) and ``batch`` (bound where the model has a dim named batch; default 1)."""
    path = resolve_model_path(model)
    graph = import_model(path, dims=with_default_batch(bind_dims(dim_specs, batch)),
                         name=path.stem)
    check_dim_names(parse_dim_specs(dim_specs), graph)
    return graph
