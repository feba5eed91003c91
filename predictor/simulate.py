"""Graph-level simulation: per-op times -> step time, critical path, breakdowns, memory.

``predict_graph(graph, hw, config, estimator)``: the runtime's execution profile for the device
kind (``resolve_runtime``), the kernel rows (``kernel_rows.step_rows``) timed by the estimator
(``kernel_rows.evaluate``), then
``total_s`` = sum of the rows' ``time_s`` (one stream, kernels back to back) and, with
``config.inter_op``, ``critical_path_s`` = the longest node-weighted path of the step DAG
(``step_dag``: forward edges, reversed backward edges after a virtual ``loss``, update rows after
the backward of their parameter's consumers; a dynamic programme over nodes x devices). The
critical path assumes unlimited streams (a lower bound); ``total_s`` is the upper bound.
``Prediction.time_s`` = ``critical_path_s`` with ``inter_op``, else ``total_s`` (seconds);
breakdowns by op type, bound and phase; ``memory_footprint`` in bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.graph_import.types import Graph
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import as_estimator
from roofcast.predictor.estimators.base import road_mix
from roofcast.predictor.kernel_rows import cell_sums, evaluate, step_rows
from roofcast.predictor.memory.graph import memory_footprint
from roofcast.predictor.memory.types import DeviceMemory
from roofcast.predictor.runtimes import ExecutionProfile, resolve_runtime
from roofcast.predictor.runtimes.patterns import KernelPlan, plan_summary
from roofcast.predictor.runtimes.profile import whatif_launch_notes
from roofcast.predictor.workload import kernel_plan

LOSS = ("loss", "")


@dataclass(frozen=True)
class Prediction:
    """A predicted run of one graph on one device (see module docstring).

    ``per_op``: one row per kernel (workload + device features + the estimator's explain
    columns: ``time_s``, ``compute_s``, ``memory_s``, ``overhead_s``, ``bound``, ``lower_s``,
    ``upper_s``; learned estimators add ``predictor``, ``ood``, ``ood_reason``).
    ``by_op_type`` / ``by_bound`` / ``by_phase``: ``breakdown`` tables (time_s, kernels, flops,
    bytes, share). ``memory``: the footprint (bytes). ``estimator``: the estimator's name.
    ``summary``: a learned estimator's end-to-end estimate, interval and model-level OOD flag
    (``LearnedModel.summarize``; empty for analytical estimators). ``runtime``: the name of
    the execution profile the kernels were mapped for (``predictor.runtimes``).
    """

    graph_name: str
    device: str
    config: RunConfig
    estimator: str
    per_op: pd.DataFrame
    total_s: float
    critical_path_s: float | None
    critical_path: tuple[str, ...]
    by_op_type: pd.DataFrame
    by_bound: pd.DataFrame
    by_phase: pd.DataFrame
    memory: DeviceMemory
    notes: tuple[str, ...] = field(default_factory=tuple)
    summary: Mapping[str, Any] = field(default_factory=dict)
    runtime: str = ""

    @property
    def road(self) -> str:
        """The road that timed the kernels, with per-source shares (``road_mix``)."""
        return road_mix(self.per_op, self.estimator)

    @property
    def time_s(self) -> float:
        """Step time: the critical path with inter-op parallelism, else the sequential sum."""
        return self.critical_path_s if self.critical_path_s is not None else self.total_s

    @property
    def total_ms(self) -> float:
        """The sequential sum of the kernels' times in milliseconds (``total_s * 1e3``)."""
        return self.total_s * 1e3

    @property
    def time_ms(self) -> float:
        """The step time (``time_s``) in milliseconds."""
        return self.time_s * 1e3

    @property
    def lower_s(self) -> float:
        """Lower end of the interval of ``total_s``: the sum of the per-op ``lower_s``."""
        return float(self.per_op["lower_s"].sum())

    @property
    def upper_s(self) -> float:
        """Upper end of the interval of ``total_s``: the sum of the per-op ``upper_s``."""
        return float(self.per_op["upper_s"].sum())

    @property
    def ood(self) -> bool:
        """Whether the learned estimator flagged the run out of distribution (False for the
        analytical estimators, which have no training range)."""
        return bool(self.summary.get("ood", False))

    @property
    def ood_ops(self) -> int:
        """How many kernels a learned estimator flagged out of distribution (0 otherwise)."""
        return int(self.per_op["ood"].sum()) if "ood" in self.per_op.columns else 0

    def speedup_over(self, other: Prediction) -> float:
        """other.time_s / self.time_s (> 1: this run is faster)."""
        return other.time_s / self.time_s


@dataclass(frozen=True)
class StepDag:
    """The step's dependency DAG in a fixed topological order.

    ``nodes``: (kind, name) in topological order; kinds 'F', 'B', 'U', 'loss'.
    ``preds``: for each node, the indices of its predecessors.
    ``row_node``: for each workload row, the index of the DAG node carrying its time.
    """

    nodes: tuple[tuple[str, str], ...]
    preds: tuple[tuple[int, ...], ...]
    row_node: np.ndarray


def step_dag(graph: Graph, workload: pd.DataFrame) -> StepDag:
    """Build the DAG of module docstring point 4 for ``workload``'s rows."""
    g = nx.DiGraph()
    for n in graph.nx_graph.nodes:
        g.add_node(("F", n))
    g.add_edges_from((("F", u), ("F", v)) for u, v in graph.nx_graph.edges)
    phases = workload["phase"].to_numpy()
    if (phases != "forward").any():
        sinks = [n for n in graph.nx_graph.nodes if graph.nx_graph.out_degree(n) == 0]
        g.add_node(LOSS)
        for n in graph.nx_graph.nodes:
            g.add_edge(("F", n), ("B", n))
        g.add_edges_from((("B", v), ("B", u)) for u, v in graph.nx_graph.edges)
        for s in sinks:
            g.add_edge(("F", s), LOSS)
            g.add_edge(LOSS, ("B", s))
    keys = []
    kind_of = {"forward": "F", "backward": "B", "update": "U"}
    for phase, node, key, grad_of in zip(phases, workload["node"], workload["key"],
                                         workload["grad_of"], strict=True):
        kind = kind_of[phase]
        k = (kind, key if kind == "U" else node)
        if kind == "U":
            g.add_node(k)
            g.add_edges_from((("B", c), k) for c in grad_of.split("+") if c)
        elif k not in g:
            raise PredictionError(f"workload row for node {node!r} is not a node of the graph")
        keys.append(k)
    order = list(nx.topological_sort(g))
    index = {k: i for i, k in enumerate(order)}
    preds = tuple(tuple(index[p] for p in g.predecessors(k)) for k in order)
    return StepDag(tuple(order), preds, np.array([index[k] for k in keys], dtype=np.int64))


def critical_path_times(dag: StepDag, row_times: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Longest path lengths for one or more time vectors.

    ``row_times``: (rows,) or (rows, cells). Returns (lengths (cells,), path of the first
    cell as DAG node indices).
    """
    times = row_times.reshape(len(row_times), -1)
    weights = np.zeros((len(dag.nodes), times.shape[1]))
    np.add.at(weights, dag.row_node, times)
    finish = np.zeros_like(weights)
    best_pred = np.full(len(dag.nodes), -1, dtype=np.int64)
    for i, preds in enumerate(dag.preds):
        if preds:
            p = np.asarray(preds)
            cand = finish[p]
            finish[i] = weights[i] + cand.max(axis=0)
            best_pred[i] = p[int(np.argmax(cand[:, 0]))]
        else:
            finish[i] = weights[i]
    end = int(np.argmax(finish[:, 0]))
    path = []
    while end >= 0:
        path.append(end)
        end = int(best_pred[end])
    return finish.max(axis=0), path[::-1]


def breakdown(per_op: pd.DataFrame, by: str) -> pd.DataFrame:
    """Time, count, FLOPs and bytes per value of column ``by``, largest time first, with share."""
    df = per_op.assign(bytes=per_op["bytes_read"] + per_op["bytes_written"])
    out = (df.groupby(by, sort=False)
             .agg(time_s=("time_s", "sum"), kernels=("time_s", "size"), flops=("flops", "sum"),
                  bytes=("bytes", "sum"))
             .reset_index()
             .sort_values("time_s", ascending=False, kind="stable"))
    total = float(per_op["time_s"].sum())
    out["share"] = out["time_s"] / total if total > 0 else 0.0
    return out.reset_index(drop=True)


def runtime_notes(profile: ExecutionProfile, plan: KernelPlan, config: RunConfig
                  ) -> tuple[str, ...]:
    """The runtime's kernel mapping in one line, and a word when ``fusion`` asks for nothing
    the runtime has."""
    notes = [plan_summary(profile.name, plan)]
    if config.fusion and not profile.fusion_patterns:
        notes.append(f"fusion on: {profile.name} has no graph-optimiser fusions beyond its "
                     "kernel mapping, so it changes nothing")
    return tuple(notes)


def _notes(per_op: pd.DataFrame, config: RunConfig) -> tuple[str, ...]:
    notes = []
    if "peak_note" in per_op:
        for note in sorted(set(per_op["peak_note"].dropna().astype(str)) - {""}):
            if "no compute peak" not in note:
                notes.append(note)
    other = sorted(set(per_op.loc[per_op["family"] == "other", "op_type"]))
    if other:
        notes.append(f"op types of family 'other' ({', '.join(other)}): generic estimates")
    if config.mode == "train":
        notes.append("training step: backward and optimizer rows derived per op family "
                     "(predictor/training.py); BatchNorm training-mode statistics, loss and "
                     "mixed-precision casts not modelled")
    return tuple(notes)


def predict_graph(graph: Graph, hw, config: RunConfig, estimator: Any = GRAPH_ESTIMATOR,
                  allow_incomplete: bool = False) -> Prediction:
    """Predict one run of ``graph`` on ``hw`` (a HardwareSpec or a catalog id / what-if spec)
    under ``config`` (see module docstring). ``estimator``: a name or an estimator object."""
    hw = get_device(hw)
    est = as_estimator(estimator)
    profile = resolve_runtime(config.runtime, hw.kind)
    plan = kernel_plan(graph, config, profile)
    workload = step_rows(graph, config, profile, allow_incomplete=allow_incomplete, plan=plan)
    per_op = evaluate(workload, hw, config, est, profile)
    summary = est.summarize(per_op, hw.kind) if hasattr(est, "summarize") else {}
    times = per_op["time_s"].to_numpy(float)
    crit_s: float | None = None
    crit_path: tuple[str, ...] = ()
    if config.inter_op:
        dag = step_dag(graph, per_op)
        lengths, path = critical_path_times(dag, times)
        crit_s = float(lengths[0])
        crit_path = tuple(f"{dag.nodes[i][0]}:{dag.nodes[i][1]}" for i in path
                          if dag.nodes[i] != LOSS)
    return Prediction(
        graph_name=graph.name, device=hw.id, config=config, estimator=est.name, per_op=per_op,
        total_s=float(cell_sums(per_op, [len(per_op)])["time_s"][0]),
        critical_path_s=crit_s, critical_path=crit_path,
        by_op_type=breakdown(per_op, "op_type"), by_bound=breakdown(per_op, "bound"),
        by_phase=breakdown(per_op, "phase"),
        memory=memory_footprint(graph, config, plan, float(hw.mem_capacity_bytes)),
        notes=(_incomplete_notes(graph) + runtime_notes(profile, plan, config)
               + whatif_launch_notes(profile, hw) + _notes(per_op, config)
               + tuple(summary.get("fallbacks", ()))),
        summary=summary,
        runtime=profile.name,
    )


def _incomplete_notes(graph: Graph) -> tuple[str, ...]:
    """A loud note when some nodes could not be costed (only with ``allow_incomplete``)."""
    missing = len(graph.unresolved) + sum(graph.unsupported.values())
    if not missing:
        return ()
    return (f"INCOMPLETE: {missing} of {len(graph)} nodes are not costed (unresolved or "
            "unsupported); times and memory are lower bounds. Bind the model's dims "
            f"({', '.join(graph.unbound_dims) or 'see roofcast inspect'}) for a full prediction",)


def speedups(predictions: Sequence[Prediction], baseline: Prediction) -> list[float]:
    """Each prediction's speedup over ``baseline``."""
    return [p.speedup_over(baseline) for p in predictions]
