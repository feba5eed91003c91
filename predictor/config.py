"""Execution configuration of a prediction: the third input beside the workload and the hardware.

``RunConfig`` says *how* a model is run (symbolic dims such as batch, numeric precision,
inference or training step, CPU threads, inter-op parallelism, fusion, optimizer and the
compute/memory overlap model). It is validated once at construction; a bad value raises
``PredictionError`` naming the field, the value and the allowed values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from roofcast.predictor.errors import PredictionError

PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
MODES: tuple[str, ...] = ("infer", "train")
OPTIMIZERS: tuple[str, ...] = ("adam", "sgd_momentum")
# "max": compute and memory overlap perfectly (roofline); "sum": they serialise (no-overlap).
OVERLAP_MODELS: tuple[str, ...] = ("max", "sum")


def _check_choice(field_name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise PredictionError(
            f"{field_name}={value!r} is not supported; choose one of: {', '.join(allowed)}"
        )


@dataclass(frozen=True)
class RunConfig:
    """How the model runs.

    dims: symbolic dim name -> size (e.g. ``{"batch": 8, "seq": 128}``), all >= 1.
    precision: compute precision (``PRECISIONS``); float tensors are rescaled to its width.
    mode: ``infer`` (forward only) or ``train`` (forward + backward + optimizer update).
    threads: CPU threads (None = all units of the device); ignored for GPUs/accelerators.
    inter_op: allow independent ops to run concurrently (critical-path timing).
    fusion: fuse elementwise/activation/normalisation chains into their producer.
    optimizer: optimizer of a training step (``OPTIMIZERS``).
    overlap: compute/memory overlap model (``OVERLAP_MODELS``).
    """

    dims: Mapping[str, int] = field(default_factory=dict)
    precision: str = "fp32"
    mode: str = "infer"
    threads: int | None = None
    inter_op: bool = False
    fusion: bool = False
    optimizer: str = "adam"
    overlap: str = "max"

    def __post_init__(self) -> None:
        if not isinstance(self.dims, Mapping):
            raise PredictionError(f"dims must be a mapping name -> size, got {type(self.dims).__name__}")
        clean: dict[str, int] = {}
        for name, size in self.dims.items():
            if not isinstance(name, str) or not name:
                raise PredictionError(f"dim names must be non-empty strings, got {name!r}")
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise PredictionError(
                    f"dim {name!r} must be a positive integer, got {size!r}; pass e.g. --dim {name}=1"
                )
            clean[name] = int(size)
        object.__setattr__(self, "dims", clean)  # a private copy; treat as read-only
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
        for flag in ("inter_op", "fusion"):
            if not isinstance(getattr(self, flag), bool):
                raise PredictionError(f"{flag} must be true or false, got {getattr(self, flag)!r}")

    def __hash__(self) -> int:
        return hash(
            (tuple(sorted(self.dims.items())), self.precision, self.mode, self.threads,
             self.inter_op, self.fusion, self.optimizer, self.overlap)
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunConfig):
            return NotImplemented
        return (
            dict(self.dims) == dict(other.dims) and self.precision == other.precision
            and self.mode == other.mode and self.threads == other.threads
            and self.inter_op == other.inter_op and self.fusion == other.fusion
            and self.optimizer == other.optimizer and self.overlap == other.overlap
        )

    @property
    def batch(self) -> int | None:
        """The ``batch`` dim when bound (convenience for reports)."""
        return self.dims.get("batch")
