"""Per-op measurements of a whole model with ONNX Runtime's profiler (CPU by default).

``measure_model(source, dims, config)``: load safely and name every node, materialise random
weights and inputs, run one profiled ORT session (``warmup`` then ``repeats`` timed runs), map
the optimised kernels back to original nodes (``node_mapping``) and give one row per group:
median, p10 and p90 seconds over the timed runs. The summary (ms) splits end-to-end time into
kernels (``sum_ops_ms``), ORT's executor (``executor_ms``) and the Python binding
(``binding_ms``); ``sum_op_medians_ms`` is the robust figure under load.

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.collectors.ort_cpu).
"""

from __future__ import annotations

import math
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd

from roofcast.graph_import import import_model
from roofcast.graph_import.load import load_model
from roofcast.graph_import.types import Graph
from roofcast.training_data.collectors import rows as tidy
from roofcast.training_data.collectors.node_mapping import Mapping as NodeMap
from roofcast.training_data.collectors.node_mapping import map_optimized
from roofcast.training_data.collectors.ort_levels import OPT_LEVELS, graph_optimization_level
from roofcast.training_data.collectors.profile import ProfiledRun, parse_profile
from roofcast.training_data.collectors.random_inputs import (
    IntInputPlan,
    make_feeds,
    materialise_split,
)
from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.schema import COLUMNS

CPU_PROVIDER = "CPUExecutionProvider"
SCHEMA_COLUMNS = tuple(c.name for c in COLUMNS)


@dataclass(frozen=True)
class MeasureConfig:
    """How to run: threads, ORT graph optimisation level, repeats, provider, random seed."""

    threads_intra: int = 1
    threads_inter: int = 1
    opt_level: str = "all"
    repeats: int = 10
    warmup: int = 2
    provider: str = CPU_PROVIDER
    seed: int = 0

    def __post_init__(self) -> None:
        if self.opt_level not in OPT_LEVELS:
            raise MeasurementError(
                f"unknown optimisation level {self.opt_level!r}: use one of {', '.join(OPT_LEVELS)}"
            )
        for name in ("threads_intra", "threads_inter", "repeats"):
            if getattr(self, name) < 1:
                raise MeasurementError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise MeasurementError(f"warmup must be >= 0, got {self.warmup}")


@dataclass
class Measurement:
    """Rows (schema columns) plus a one-line summary and the kernels that joined no node."""

    rows: pd.DataFrame
    summary: dict[str, Any]
    unattributed: pd.DataFrame = field(default_factory=pd.DataFrame)
    int_inputs: list[IntInputPlan] = field(default_factory=list)


def name_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give every node a unique non-empty name, as ``graph_import.build`` names them."""
    from roofcast.graph_import.build import _unique_name

    used: set[str] = set()
    for index, node in enumerate(model.graph.node):
        node.name = _unique_name(node.name, node.op_type, index, used)
    return model


def load_named(source: Any) -> onnx.ModelProto:
    return name_nodes(load_model(source))


def import_for_costs(model: onnx.ModelProto, dims: Mapping[str, int], name: str) -> Graph:
    graph = import_model(model.SerializeToString(), dims=dims, name=name)
    if graph.unbound_dims:
        hint = " ".join(f"--dim {d}=N" for d in graph.unbound_dims)
        raise MeasurementError(
            f"{name}: symbolic dims not bound: {', '.join(graph.unbound_dims)}; bind them to "
            f"measure, e.g. {hint}")
    return graph


def session_options(config: MeasureConfig, workdir: Path, save_optimized: bool = True):
    """ORT session options: threads, optimisation level, profiler on, optimised graph saved."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = config.threads_intra
    so.inter_op_num_threads = config.threads_inter
    so.execution_mode = (ort.ExecutionMode.ORT_PARALLEL if config.threads_inter > 1
                         else ort.ExecutionMode.ORT_SEQUENTIAL)
    so.graph_optimization_level = graph_optimization_level(config.opt_level)
    so.enable_profiling = True
    so.profile_file_prefix = str(workdir / "profile")
    so.log_severity_level = 3  # the NCHWc "hardware specific" warning is expected here
    if save_optimized:
        so.optimized_model_filepath = str(workdir / "optimized.onnx")
        so.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", "optimized.bin")
        so.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    return so


def run_profiled(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], config: MeasureConfig,
                 workdir: Path, weights: Mapping[str, np.ndarray] | None = None
                 ) -> tuple[list[ProfiledRun], list[float], onnx.ModelProto]:
    """Run ``warmup + repeats`` times; returns the timed runs' profiles, their wall times (s)
    and the optimised graph ORT ran (initializer values not loaded). ``weights``: initializers
    declared external in ``model`` whose values are given in memory."""
    import onnxruntime as ort

    so = session_options(config, workdir)
    if weights:
        values = [ort.OrtValue.ortvalue_from_numpy(a) for a in weights.values()]
        so.add_external_initializers(list(weights), values)
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=[config.provider])
    except Exception as exc:  # ORT raises its own Fail/InvalidGraph types
        raise MeasurementError(
            f"ONNX Runtime cannot load the model ({type(exc).__name__}: "
            f"{str(exc).strip()[:300]})") from None
    wall: list[float] = []
    try:
        for _ in range(config.warmup + config.repeats):
            t0 = time.perf_counter()
            sess.run(None, dict(feeds))
            wall.append(time.perf_counter() - t0)
    except Exception as exc:
        raise MeasurementError(
            f"ONNX Runtime failed running the model on random inputs ({type(exc).__name__}: "
            f"{str(exc).strip()[:300]})") from None
    finally:
        profile_path = sess.end_profiling()
    runs = parse_profile(profile_path)
    if len(runs) != len(wall):
        raise MeasurementError(
            f"profiler recorded {len(runs)} runs for {len(wall)} calls; cannot pair them")
    optimized = onnx.load(str(workdir / "optimized.onnx"), load_external_data=False)
    return runs[config.warmup:], wall[config.warmup:], optimized


@dataclass
class Prepared:
    """A model ready to measure: named original graph, costed Graph, runnable copy, inputs."""

    name: str
    dims: dict[str, int]
    model: onnx.ModelProto
    graph: Graph
    runnable: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    plans: list[IntInputPlan]
    weights: dict[str, np.ndarray] = field(default_factory=dict)  # big ones, kept out of the proto


def prepare(source: Any, dims: Mapping[str, int] | None = None, name: str | None = None,
            seed: int = 0) -> Prepared:
    """Load, name, cost and materialise ``source`` (path, bytes or ModelProto) once."""
    dims = dict(dims or {})
    if isinstance(source, onnx.ModelProto):
        model = load_named(source.SerializeToString())
    else:
        model = load_named(source)
    if name is None:
        name = Path(source).stem if isinstance(source, str | Path) else (model.graph.name
                                                                        or "model")
    graph = import_for_costs(model, dims, name or "model")
    runnable, weights = materialise_split(model, dims, seed=seed)
    feeds, plans = make_feeds(runnable, np.random.default_rng(seed))
    return Prepared(name, dims, model, graph, runnable, feeds, plans, weights)


def prepare_dims(prep: Prepared, dims: Mapping[str, int], seed: int = 0) -> Prepared:
    """``prepare(prep.model, dims, name=prep.name, seed=seed)`` without drawing the weights
    again: the drawn initializers (inline and big) do not depend on the dims, so the runnable
    copy keeps them and only its graph inputs, outputs and value_info are re-bound from the
    original model. For a model of a billion random weights that saves the draw per batch size
    (``advise --verify`` measures several); the result equals a fresh ``prepare`` (tested)."""
    from roofcast.graph_import.shapes import bind_dims

    dims = dict(dims)
    runnable = onnx.ModelProto()
    runnable.CopyFrom(prep.runnable)
    for field_name in ("input", "output", "value_info"):
        target = getattr(runnable.graph, field_name)
        del target[:]
        target.extend(getattr(prep.model.graph, field_name))
    if dims:
        bind_dims(runnable.graph, dims)
    graph = import_for_costs(prep.model, dims, prep.name)
    feeds, plans = make_feeds(runnable, np.random.default_rng(seed))
    return Prepared(prep.name, dims, prep.model, graph, runnable, feeds, plans, prep.weights)


def measure_prepared(prep: Prepared, config: MeasureConfig,
                     source: str = tidy.SOURCE_ORT_CPU) -> Measurement:
    """Run and profile a prepared model under ``config``."""
    with tempfile.TemporaryDirectory(prefix="roofcast-measure-") as tmp:
        runs, wall, optimized = run_profiled(prep.runnable, prep.feeds, config, Path(tmp),
                                             prep.weights)
    mapping = map_optimized(prep.model, optimized)
    return assemble(prep.graph, mapping, runs, wall, config, prep.dims, prep.plans,
                    model_name=prep.name, source=source)


def measure_model(source: Any, dims: Mapping[str, int] | None = None,
                  config: MeasureConfig | None = None, name: str | None = None) -> Measurement:
    """Measure every op of a model (module docstring). ``source``: path, bytes or ModelProto."""
    return measure_prepared(prepare(source, dims, name, (config or MeasureConfig()).seed),
                            config or MeasureConfig())


def assemble(graph: Graph, mapping: NodeMap, runs: Sequence[ProfiledRun],
             wall: Sequence[float], config: MeasureConfig, dims: Mapping[str, int],
             plans: Sequence[IntInputPlan] = (), model_name: str = "",
             source: str = tidy.SOURCE_ORT_CPU) -> Measurement:
    """Rows and summary from parsed runs (see module docstring)."""
    n = len(runs)
    group_times, other = _kernel_times(mapping, runs)
    e2e = float(np.median(wall))
    run_id = uuid.uuid4().hex[:16]
    common = {
        "model": model_name,
        "device_id": "local",
        "cpu_model": _cpu_model(),
        "machine": tidy.machine_id(),
        "threads_intra": config.threads_intra,
        "threads_inter": config.threads_inter,
        "batch": dims.get("batch", math.nan),
        "opt_level": config.opt_level,
        "mode": "infer",
        "provider": config.provider,
        "runtime": tidy.RUNTIME_OF_PROVIDER.get(config.provider, ""),
        "repeats": n,
        "e2e_latency_s": e2e,
        "run_id": run_id,
        "source": source,
        "software": tidy.canonical_json(tidy.software_versions()),
        "timestamp": tidy.now_iso(),
        "direction": "fwd",
        "notes": "dims " + ",".join(f"{k}={v}" for k, v in sorted(dims.items())) if dims else "",
    }
    records = _group_records(graph, mapping, runs, group_times, common)
    frame = pd.DataFrame.from_records(records, columns=list(SCHEMA_COLUMNS))
    unattributed = pd.DataFrame(
        [{"kernel": k, "op_name": op, "latency_s": float(np.median(t))}
         for (k, op), t in other.items()], columns=["kernel", "op_name", "latency_s"])
    summary = {
        "model": model_name, "dims": ",".join(f"{k}={v}" for k, v in sorted(dims.items())),
        "threads_intra": config.threads_intra, "threads_inter": config.threads_inter,
        "opt_level": config.opt_level, "repeats": n,
        **_run_summary(runs, wall, group_times, other, frame),
        "rows": len(frame),
        "groups_fused": int(sum(len(g.nodes) > 1 for g in mapping.groups)),
        "nodes_folded": len(mapping.folded),
        "nodes_eliminated": len(mapping.uncovered) - len(mapping.folded),
        "run_id": run_id,
    }
    return Measurement(frame, summary, unattributed, list(plans))


def _kernel_times(mapping: NodeMap, runs: Sequence[ProfiledRun]
                  ) -> tuple[np.ndarray, dict[tuple[str, str], np.ndarray]]:
    """(seconds per (group, run), seconds per run of each (kernel, op) in no group)."""
    n = len(runs)
    group_times = np.zeros((len(mapping.groups), n))
    other: dict[tuple[str, str], np.ndarray] = {}
    for r, run in enumerate(runs):
        for k in run.kernels:
            gi = mapping.group_of.get(k.node)
            if gi is None:
                other.setdefault((k.node, k.op_name), np.zeros(n))[r] += k.dur_s
            else:
                group_times[gi, r] += k.dur_s
    return group_times, other


def _group_records(graph: Graph, mapping: NodeMap, runs: Sequence[ProfiledRun],
                   group_times: np.ndarray, common: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One schema row per group that ran: its work, ORT kernels and latency statistics."""
    kernel_ops = {k.node: k.op_name for run in runs for k in run.kernels}
    records = []
    for gi, group in enumerate(mapping.groups):
        times = group_times[gi]
        if not np.any(times > 0):
            continue  # kernels that never ran in the timed runs (nested or skipped)
        nodes = [graph.nx_graph.nodes[nm]["op"] for nm in group.nodes]
        work = tidy.group_work(nodes, graph)
        attrs = work.pop("_attrs")
        attrs["ort_kernels"] = sorted({kernel_ops.get(k, "") for k in group.kernels} - {""})
        records.append({**work, "attrs": tidy.canonical_json(attrs), "precision": work["dtype"],
                        **tidy.latency_stats(times), **common})
    return records


def _run_summary(runs: Sequence[ProfiledRun], wall: Sequence[float], group_times: np.ndarray,
                 other: Mapping[tuple[str, str], np.ndarray],
                 frame: pd.DataFrame) -> dict[str, float]:
    """Where a run's time went: end to end, inside ORT, in kernels, joined or not."""
    n = len(runs)
    e2e = float(np.median(wall))
    joined_per_run = group_times.sum(axis=0)
    other_per_run = np.sum(list(other.values()), axis=0) if other else np.zeros(n)
    kernel_per_run = joined_per_run + other_per_run
    wall_arr = np.asarray(wall, dtype=float)
    run_arr = np.asarray([r.run_s for r in runs], dtype=float)
    total_kernel = float(kernel_per_run.sum())
    return {
        "e2e_ms": e2e * 1e3,
        "e2e_p10_ms": float(np.percentile(wall_arr, 10)) * 1e3,
        "e2e_p90_ms": float(np.percentile(wall_arr, 90)) * 1e3,
        "ort_run_ms": float(np.median([r.run_s for r in runs])) * 1e3,
        "sum_ops_ms": float(np.median(kernel_per_run)) * 1e3,
        "binding_ms": float(np.median(wall_arr - run_arr)) * 1e3,
        "executor_ms": float(np.median(run_arr - kernel_per_run)) * 1e3,
        "ops_over_e2e": float(np.median(kernel_per_run / wall_arr)),
        "sum_op_medians_ms": float(frame["latency_s"].sum()) * 1e3 if len(frame) else 0.0,
        "sum_op_p10_ms": float(frame["latency_p10_s"].sum()) * 1e3 if len(frame) else 0.0,
        "unattributed_ms": float(np.median(other_per_run)) * 1e3,
        "joined_fraction": (float(joined_per_run.sum()) / total_kernel if total_kernel > 0
                            else math.nan),
    }


def _cpu_model() -> str:
    from roofcast.hw_catalog.calibrate import cpu_model

    return cpu_model()


def with_threads(config: MeasureConfig, intra: int, inter: int) -> MeasureConfig:
    return replace(config, threads_intra=intra, threads_inter=inter)
