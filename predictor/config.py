"""Execution configuration of a prediction: the third input beside the workload and the hardware.

``RunConfig`` says *how* a model is run (symbolic dims such as batch, numeric precision,
inference or training step, CPU threads, inter-op parallelism, fusion, optimizer and the
compute/memory overlap model). It is validated once at construction; a bad value raises
``PredictionError`` naming the field, the value and the allowed values. Its ``dims`` are a
``Dims`` (immutable, hashable), so the frozen dataclass's own ``__hash__``/``__eq__`` hold.
``run_config(graph, **settings)`` is the one factory the API, the CLI and the app use: the
dims come from the imported graph, where they were bound.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.runtimes.profile import PRECISIONS

if TYPE_CHECKING:
    from roofcast.graph_import.types import Graph
    from roofcast.predictor.runtimes import ExecutionProfile

MODES: tuple[str, ...] = ("infer", "train")
OPTIMIZERS: tuple[str, ...] = ("adam", "sgd_momentum")
# "max": compute and memory overlap perfectly (roofline); "sum": they serialise (no-overlap).
OVERLAP_MODELS: tuple[str, ...] = ("max", "sum")


def _check_choice(field_name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise PredictionError(
            f"{field_name}={value!r} is not supported; choose one of: {', '.join(allowed)}"
        )


class Dims(Mapping[str, int]):
    """An immutable, hashable mapping dim name -> size (sorted by name), so that a frozen
    ``RunConfig`` holding it gets its dataclass ``__hash__``/``__eq__`` for free. Equal to any
    mapping with the same items."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, int] | None = None) -> None:
        if items is not None and not isinstance(items, Mapping):
            raise PredictionError(
                f"dims must be a mapping name -> size, got {type(items).__name__}"
            )
        clean: dict[str, int] = {}
        for name, size in (items or {}).items():
            if not isinstance(name, str) or not name:
                raise PredictionError(f"dim names must be non-empty strings, got {name!r}")
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise PredictionError(
                    f"dim {name!r} must be a positive integer, got {size!r}; "
                    f"pass e.g. --dim {name}=1"
                )
            clean[name] = int(size)
        self._items: tuple[tuple[str, int], ...] = tuple(sorted(clean.items()))

    def __getitem__(self, name: str) -> int:
        for key, size in self._items:
            if key == name:
                return size
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dims):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return f"Dims({dict(self._items)!r})"


@dataclass(frozen=True)
class RunConfig:
    """How the model runs.

    dims: symbolic dim name -> size (e.g. ``{"batch": 8, "seq": 128}``), all >= 1.
    precision: compute precision (``PRECISIONS``); float tensors are rescaled to its width.
    mode: ``infer`` (forward only) or ``train`` (forward + backward + optimizer update).
    threads: CPU threads (None = all units of the device); ignored for GPUs/accelerators.
    inter_op: allow independent ops to run concurrently (critical-path timing).
    fusion: apply the runtime's graph-optimiser fusions (``ExecutionProfile.fusion_patterns``);
        None: the runtime's default (``fusion_default``: on for ONNX Runtime, whose default
        optimisation level fuses).
    runtime: the execution profile's name (``predictor.runtimes``) or an ``ExecutionProfile``
        object; None: the device kind's default (``onnxruntime-cpu`` on CPUs,
        ``pytorch-eager`` on GPUs).
    optimizer: optimizer of a training step (``OPTIMIZERS``).
    overlap: compute/memory overlap model (``OVERLAP_MODELS``).
    """

    dims: Mapping[str, int] = field(default_factory=Dims)
    precision: str = "fp32"
    mode: str = "infer"
    threads: int | None = None
    inter_op: bool = False
    fusion: bool | None = None
    optimizer: str = "adam"
    overlap: str = "max"
    runtime: str | ExecutionProfile | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.dims, Dims):
            object.__setattr__(self, "dims", Dims(self.dims))
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("mode", self.mode, MODES)
        _check_choice("optimizer", self.optimizer, OPTIMIZERS)
        _check_choice("overlap", self.overlap, OVERLAP_MODELS)
        if self.threads is not None and (
            isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1
        ):
            raise PredictionError(
                f"threads must be a positive integer or None (all cores), got {self.threads!r}"
            )
        if not isinstance(self.inter_op, bool):
            raise PredictionError(f"inter_op must be true or false, got {self.inter_op!r}")
        if self.fusion is not None and not isinstance(self.fusion, bool):
            raise PredictionError(f"fusion must be true, false or None (the runtime's default), "
                                  f"got {self.fusion!r}")
        if self.runtime is not None:
            from roofcast.predictor.runtimes import get_runtime

            get_runtime(self.runtime)  # unknown names: PredictionError listing the runtimes

    @property
    def batch(self) -> int | None:
        """The ``batch`` dim when bound (convenience for reports)."""
        return self.dims.get("batch")


def run_config(graph: Graph, **settings: object) -> RunConfig:
    """The one place a ``RunConfig`` is built for an imported graph: ``dims`` are the ones the
    import bound (``graph.dims``: ``roofcast.load_model`` / ``graph_import.import_model``), so a
    batch is given once, to the import; ``settings`` are the other fields (precision, mode,
    threads, inter_op, fusion, optimizer, overlap)."""
    if "dims" in settings:
        raise PredictionError("dims are bound when the model is imported (roofcast.load_model("
                              "MODEL, batch=8, ...)); re-import it instead of passing dims here")
    return RunConfig(dims=graph.dims, **settings)  # type: ignore[arg-type]
