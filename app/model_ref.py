"""The CLI's MODEL argument and ``--dim``/``--batch`` flags, resolved by the library's
``roofcast.models.load_model`` (the one place dims are bound).

``--batch N`` is shorthand for ``--dim batch=N`` (the zoo's and the common exporters' name for
the batch dim); a model that names it otherwise is bound with ``--dim NAME=N``. Without either,
a model with a ``batch`` dim runs at batch 1. A ``--dim`` name that is none of the model's dims
is an error listing them.
"""

from __future__ import annotations

from collections.abc import Sequence

from roofcast.graph_import.dims import parse_dim_specs
from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.types import Graph
from roofcast.models import load_model, resolve_model_path

__all__ = ["bind_dims", "load_graph", "resolve_model_path"]


def bind_dims(dim_specs: Sequence[str] = (), batch: int | None = None) -> dict[str, int]:
    """Merge ``--dim`` specs and ``--batch`` into one dims mapping."""
    dims = parse_dim_specs(dim_specs)
    if batch is not None:
        if "batch" in dims and dims["batch"] != batch:
            raise ModelImportError(
                f"--batch {batch} contradicts --dim batch={dims['batch']}; give one of them"
            )
        dims.update(parse_dim_specs([f"batch={batch}"]))
    return dims


def load_graph(model: str, dim_specs: Sequence[str] = (), batch: int | None = None) -> Graph:
    """Import MODEL (path or zoo name) with the user's dim bindings (``load_model``)."""
    return load_model(model, bind_dims(dim_specs, batch)).graph
