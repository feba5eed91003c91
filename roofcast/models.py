"""Load a model: an ONNX path, ONNX bytes or a bundled zoo name, with its dims bound.

``load_model(source, dims=None, /, **named_dims) -> Model`` is the one place dims are bound:
the API, the CLI (``app/model_ref``), the app and the benchmarks all import models through it,
and ``predictor.config.run_config`` takes the run's dims from the imported graph.

* ``source``: a path to an ``.onnx`` file, a zoo name (``resnet50`` or ``zoo:resnet50``; a file
  of that name wins), the model's bytes, a ``Model`` (re-bound with the given dims) or an
  imported ``Graph`` (used as is: its dims cannot be re-bound);
* dims: by name (``batch=8``, ``sequence=128``) or, for names that are not Python identifiers,
  in the positional mapping (``{"input_ids:1": 128}``). ``batch`` defaults to 1 where the model
  has a dim of that name; a dim the caller names that the model lacks is an error listing the
  model's dims (``graph_import.dims.check_dim_names``).

``Model.at(batch=16)`` re-imports the same source at other dims (sweeps, comparisons, advisor).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofcast.graph_import import import_model
from roofcast.graph_import.dims import check_dim_names, check_dims, with_default_batch
from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.types import Graph
from roofcast.training_data import zoo


@dataclass(frozen=True, eq=False)
class Model:
    """An imported model: ``graph`` (costed ``Graph``), the ``source`` it came from (a path,
    bytes, or None for a Graph given as is), ``requested`` (the dims asked for, defaults
    included) and ``name``."""

    graph: Graph
    source: Path | bytes | None
    requested: Mapping[str, int] = field(default_factory=dict)
    name: str = "model"

    @property
    def dims(self) -> Mapping[str, int]:
        """The dims the import bound (``graph.dims``; a requested dim the model lacks is absent)."""
        return self.graph.dims

    @property
    def batch(self) -> int | None:
        """The bound ``batch`` dim, None when the model has no dim of that name."""
        return self.graph.dims.get("batch")

    def at(self, dims: Mapping[str, int] | None = None, /, **named_dims: int) -> Model:
        """The same model with some dims changed (re-imported; ``self`` when nothing changes)."""
        wanted = {**self.requested, **check_dims({**(dims or {}), **named_dims})}
        if wanted == dict(self.requested):
            return self
        if self.source is None:
            raise ModelImportError(
                f"model {self.name!r} was given as an imported Graph, so its dims cannot be "
                f"re-bound ({dict(wanted)}); load it with roofcast.load_model(PATH, ...) instead")
        return _import(self.source, wanted, self.name)

    def graph_at(self, batch: int) -> Graph:
        """The graph at ``batch`` (a ``GraphSource`` for ``sweep``/``compare``/``advise``)."""
        return self.at(batch=batch).graph


def resolve_model_path(model: str | Path) -> Path:
    """A path that exists wins; otherwise a zoo name (``resnet50``, ``zoo:resnet50``)."""
    path = Path(model)
    if path.is_file():
        return path
    if path.exists():
        raise ModelImportError(f"{model} is not a file: give the path of an .onnx file")
    name = str(model).removeprefix("zoo:")
    if name in zoo.list_models():
        return zoo.model_path(name)
    raise ModelImportError(
        f"no file {str(model)!r} and no zoo model of that name; give an .onnx path or one of: "
        + ", ".join(zoo.list_models())
    )


def load_model(source: Any, dims: Mapping[str, int] | None = None, /,
               **named_dims: int) -> Model:
    """Import ``source`` with its dims bound (module docstring); raises ModelImportError for a
    bad file, an unknown zoo name or a bad dim value."""
    given = check_dims({**(dims or {}), **named_dims})
    if isinstance(source, Model):
        return source.at(given)
    if isinstance(source, Graph):
        return Model(graph=source, source=None, requested=dict(source.dims),
                     name=source.name).at(given)
    wanted = with_default_batch(given)
    if isinstance(source, bytes | bytearray):
        model = _import(bytes(source), wanted, "model")
    elif isinstance(source, str | Path):
        path = resolve_model_path(source)
        model = _import(path, wanted, path.stem)
    else:
            raise ModelImportError(f"cannot load a model from a {type(source).__name__}: give an "
                                   ".onnx path, a zoo name (roofcast.zoo_models()) or the "
                                   "model's bytes")
    check_dim_names(given, model.graph)  # a dim the caller named must be one of the model's
    return model


def _import(source: Path | bytes, dims: Mapping[str, int], name: str) -> Model:
    graph = import_model(source, dims=dict(dims), name=name)
    return Model(graph=graph, source=source, requested=dict(dims), name=graph.name)


def zoo_models() -> list[str]:
    """Names of the bundled zoo models ``load_model`` accepts."""
    return list(zoo.list_models())
