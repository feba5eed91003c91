"""Hand-built Graph objects for the graph-level tests (costs given explicitly, so expected values
are plain arithmetic independent of the cost rules)."""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from roofcast.graph_import.types import Engine, Graph, OpCost, OpNode, TensorInfo


def t(name: str, *shape: int, dtype: str = "float") -> TensorInfo:
    return TensorInfo(name, tuple(shape), dtype)


def op(name: str, op_type: str, inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo],
       flops: float = 0.0, engine: Engine = Engine.VECTOR, weights: Sequence[str] = (),
       cost: OpCost | None = None) -> OpNode:
    """An OpNode whose cost is: ``flops``, all distinct inputs read, all outputs written."""
    if cost is None:
        ins = {x.name: x for x in inputs}
        read = float(sum(x.nbytes for x in ins.values()))
        wb = float(sum(x.nbytes for x in ins.values() if x.name in weights))
        cost = OpCost(float(flops), read, float(sum(x.nbytes for x in outputs)), wb, engine)
    return OpNode(name=name, op_type=op_type, domain="", inputs=tuple(inputs),
                  outputs=tuple(outputs), cost=cost, weight_inputs=frozenset(weights))


def graph(nodes: Sequence[OpNode], inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo],
          name: str = "g", dims: dict[str, int] | None = None) -> Graph:
    g = nx.DiGraph()
    producer = {}
    for n in nodes:
        g.add_node(n.name, op=n)
        for o in n.outputs:
            producer[o.name] = n.name
    for n in nodes:
        for x in n.inputs:
            if x is not None and x.name in producer:
                g.add_edge(producer[x.name], n.name, tensor=x)
    weights = {w for n in nodes for w in n.weight_inputs}
    wts = {x.name: x for n in nodes for x in n.inputs if x is not None and x.name in weights}
    return Graph(name=name, nx_graph=g, inputs=tuple(inputs), outputs=tuple(outputs),
                 params=sum(x.numel for x in wts.values()),
                 weight_bytes=sum(x.nbytes for x in wts.values()), opset=17, dims=dims or {})


def toy_device(id: str = "toy", vector_flops: float = 1e9, matrix_flops: float | None = None,
               bw_Bps: float = 1e9, overhead_s: float = 1e-6, capacity_bytes: float = 2.0**30,
               price_usd: float | None = None, tdp_W: float | None = None):
    """A HardwareSpec with round numbers: fp32 vector peak, optional fp32 matrix peak."""
    from roofcast.hw_catalog.spec import HardwareSpec

    peaks = {("vector", "fp32"): vector_flops, ("vector", "fp16"): 2 * vector_flops}
    if matrix_flops is not None:
        peaks[("matrix", "fp32")] = matrix_flops
    return HardwareSpec(
        id=id, name=f"toy device {id}", vendor="test", kind="gpu", architecture="toy",
        peak_flops=peaks, mem_bw_Bps=bw_Bps, mem_capacity_bytes=capacity_bytes,
        l2_bytes=2.0**20, units=10, unit_name="SM", clock_Hz=1e9, launch_overhead_s=overhead_s,
        memory_type="toy", price_usd=price_usd, tdp_W=tdp_W,
    )


def priced_devices() -> list:
    """Three toy devices for sweeps and comparisons: 'slow' and 'fast' with a list price and TDP,
    'noprice' with neither and 4.05e6 B of memory (batched_chain at batch 8 does not fit)."""
    return [
        toy_device("slow", vector_flops=1e9, matrix_flops=2e9, bw_Bps=1e9, price_usd=1000.0,
                   tdp_W=100.0),
        toy_device("fast", vector_flops=4e9, matrix_flops=1e10, bw_Bps=3e9, overhead_s=2e-6,
                   price_usd=5000.0, tdp_W=250.0),
        toy_device("noprice", vector_flops=2e9, bw_Bps=2e9, capacity_bytes=4.05e6),
    ]


def branched_graph(n: int = 1000) -> Graph:
    """x -> a (Relu) -> {b (Exp, 20 FLOP/elem), c (Sigmoid)} -> d (Add) -> y; float32[n] tensors.

    On ``toy_device()`` (1 GFLOP/s, 1 GB/s) with the roofline: a = max(n, 8n)/1e9 s,
    b = max(20n, 8n)/1e9, c = max(n, 8n)/1e9, d = max(n, 12n)/1e9.
    """
    x, a, b, c, y = (t(s, n) for s in ("x", "a", "b", "c", "y"))
    nodes = [
        op("a", "Relu", [x], [a], flops=n),
        op("b", "Exp", [a], [b], flops=20 * n),
        op("c", "Sigmoid", [a], [c], flops=n),
        op("d", "Add", [b, c], [y], flops=n),
    ]
    return graph(nodes, [x], [y])


def batched_chain(batch: int):
    """x[b,1000] @ w[1000,1000] -> h[b,1000] -> Relu -> y[b,1000] (float32)."""
    x, w, h, y = t("x", batch, 1000), t("w", 1000, 1000), t("h", batch, 1000), t("y", batch, 1000)
    return graph([op("mm", "MatMul", [x, w], [h], engine=Engine.MATRIX, weights=["w"]),
                  op("relu", "Relu", [h], [y])], [x], [y], dims={"batch": batch})


def _as_written():
    from roofcast.predictor.config import PRECISIONS
    from roofcast.predictor.runtimes import ExecutionProfile

    return ExecutionProfile(
        name="as-written", description="one kernel per costed node; epilogue fusion when on",
        device_kinds=("gpu", "cpu", "accelerator"), fusion_patterns=("epilogue",),
        precisions=PRECISIONS)


#: A test profile: the graph as written (one kernel per costed node, the device's own launch
#: overhead), the ``epilogue`` fusion when the run's ``fusion`` is on: what the workload meant
#: before execution profiles, so tests of the cost arithmetic keep their expected values.
AS_WRITTEN = _as_written()
