"""Microbenchmarks: one-node ONNX graphs over grids of shapes, through the model profiler path.

Each case is a one-node model (``onnx.helper``): activations are random graph inputs, weights
absent external data filled by ``materialise`` as for zoo models (so ORT pre-packs them as in a
real model); ``ort_cpu.measure_prepared`` runs it, so rows have the same columns, costs and
node mapping. ``GRIDS`` (family -> ``quick`` and ``full`` cases): gemm (capped at
``MAX_GEMM_FLOPS``), conv (ResNet/MobileNet/VGG layers, dense and depthwise), elementwise,
softmax, layernorm, pooling and recurrent (one-layer LSTM).

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.collectors.microbench).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import onnx
import pandas as pd
from onnx import TensorProto, helper

from roofcast.training_data.collectors import rows as tidy
from roofcast.training_data.collectors.ort_cpu import MeasureConfig, measure_prepared, prepare
from roofcast.training_data.errors import MeasurementError

OPSET = 17
IR_VERSION = 8  # what ONNX Runtime releases of the last years all load
MAX_GEMM_FLOPS = 2.2e9
FLOAT = TensorProto.FLOAT


@dataclass(frozen=True)
class Case:
    """One microbenchmark: a label and the one-node model."""

    family: str
    label: str
    model: onnx.ModelProto


def _absent(name: str, dims: Iterable[int]) -> TensorProto:
    """An initializer with dims only (external data that does not exist: filled at run time)."""
    t = TensorProto(name=name, data_type=FLOAT, dims=list(dims))
    t.data_location = TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", "microbench-weights-not-stored"
    return t


def one_node_model(node: onnx.NodeProto, inputs: list[tuple[str, list[int]]],
                   outputs: list[str], weights: Iterable[TensorProto] = ()) -> onnx.ModelProto:
    """A model of ``node`` with float inputs of the given shapes; output shapes left to ORT."""
    graph = helper.make_graph(
        [node], node.name,
        [helper.make_tensor_value_info(n, FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, FLOAT, None) for n in outputs],
        initializer=list(weights))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             producer_name="roofcast-microbench", ir_version=IR_VERSION)


def gemm_case(m: int, n: int, k: int) -> Case:
    node = helper.make_node("MatMul", ["A", "B"], ["Y"], name=f"matmul_{m}x{n}x{k}")
    return Case("gemm", f"M={m} N={n} K={k}",
                one_node_model(node, [("A", [m, k])], ["Y"], [_absent("B", [k, n])]))


def conv_case(n: int, c: int, h: int, w: int, k: int, r: int, s: int, stride: int,
              groups: int) -> Case:
    pads = [r // 2, s // 2, r // 2, s // 2]
    node = helper.make_node("Conv", ["X", "W", "B"], ["Y"], name=f"conv_{n}_{c}_{h}_{k}_{r}",
                            kernel_shape=[r, s], strides=[stride, stride], pads=pads,
                            group=groups)
    weights = [_absent("W", [k, c // groups, r, s]), _absent("B", [k])]
    return Case("conv", f"N={n} C={c} H={h} W={w} K={k} R={r} S={s} stride={stride} g={groups}",
                one_node_model(node, [("X", [n, c, h, w])], ["Y"], weights))


def elementwise_case(op: str, numel: int) -> Case:
    binary = op in ("Add", "Mul")
    ins = ["X", "Z"] if binary else ["X"]
    node = helper.make_node(op, ins, ["Y"], name=f"{op.lower()}_{numel}")
    return Case("elementwise", f"{op} n={numel}",
                one_node_model(node, [(i, [numel]) for i in ins], ["Y"]))


def softmax_case(rows: int, cols: int) -> Case:
    node = helper.make_node("Softmax", ["X"], ["Y"], name=f"softmax_{rows}x{cols}", axis=-1)
    return Case("softmax", f"{rows}x{cols}", one_node_model(node, [("X", [rows, cols])], ["Y"]))


def layernorm_case(rows: int, cols: int) -> Case:
    node = helper.make_node("LayerNormalization", ["X", "G", "Bt"], ["Y"],
                            name=f"layernorm_{rows}x{cols}", axis=-1, epsilon=1e-5)
    return Case("layernorm", f"{rows}x{cols}",
                one_node_model(node, [("X", [rows, cols])], ["Y"],
                               [_absent("G", [cols]), _absent("Bt", [cols])]))


def pooling_case(op: str, n: int, c: int, hw: int) -> Case:
    attrs = {"MaxPool": {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
             "AveragePool": {"kernel_shape": [2, 2], "strides": [2, 2]},
             "GlobalAveragePool": {}}[op]
    node = helper.make_node(op, ["X"], ["Y"], name=f"{op.lower()}_{n}_{c}_{hw}", **attrs)
    return Case("pooling", f"{op} N={n} C={c} H=W={hw}",
                one_node_model(node, [("X", [n, c, hw, hw])], ["Y"]))


def lstm_case(steps: int, batch: int, hidden: int) -> Case:
    """One-layer LSTM, input size = hidden size, with biases (as language models use it)."""
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y"], hidden_size=hidden,
                            name=f"lstm_{steps}x{batch}x{hidden}")
    weights = [_absent("W", [1, 4 * hidden, hidden]), _absent("R", [1, 4 * hidden, hidden]),
               _absent("B", [1, 8 * hidden])]
    return Case("recurrent", f"LSTM S={steps} B={batch} H={hidden}",
                one_node_model(node, [("X", [steps, batch, hidden])], ["Y"], weights))


def _recurrent(quick: bool) -> list[Case]:
    grid = (((16,), (1, 8), (256,)) if quick
            else ((16, 64, 256), (1, 2, 4, 16), (128, 256, 384, 512, 768, 1024)))
    return [lstm_case(s, b, h) for s, b, h in itertools.product(*grid)]


def _gemm(quick: bool) -> list[Case]:
    ms = (1, 64, 512) if quick else (1, 16, 64, 256, 1024)
    nks = (256, 1024) if quick else (64, 256, 1024, 4096)
    return [gemm_case(m, n, k) for m, n, k in itertools.product(ms, nks, nks)
            if 2.0 * m * n * k <= MAX_GEMM_FLOPS]


CONV_SHAPES = (  # (C, H, K, R, stride, groups): ResNet, VGG, MobileNet layers
    (3, 224, 64, 7, 2, 1), (64, 56, 64, 3, 1, 1), (64, 56, 256, 1, 1, 1),
    (128, 28, 128, 3, 1, 1), (256, 14, 256, 3, 1, 1), (512, 7, 512, 3, 1, 1),
    (256, 56, 128, 1, 2, 1), (64, 112, 64, 3, 1, 1), (32, 112, 32, 3, 1, 32),
    (96, 56, 96, 3, 2, 96), (144, 28, 144, 5, 1, 144), (384, 14, 384, 3, 1, 384),
    (960, 7, 160, 1, 1, 1), (16, 112, 96, 1, 1, 1),
)


def _conv(quick: bool) -> list[Case]:
    shapes = CONV_SHAPES[::3] if quick else CONV_SHAPES
    batches = (1,) if quick else (1, 4, 16)
    return [conv_case(n, c, h, h, k, r, r, st, g) for n in batches for c, h, k, r, st, g in shapes]


def _elementwise(quick: bool) -> list[Case]:
    ops = ("Add", "Relu") if quick else ("Add", "Mul", "Relu", "Sigmoid", "Tanh", "Erf")
    sizes = (2**12, 2**18) if quick else tuple(2**e for e in range(10, 25, 2))
    return [elementwise_case(op, n) for op in ops for n in sizes]


def _rows_cols(quick: bool) -> list[tuple[int, int]]:
    rows = (16, 1024) if quick else (1, 16, 256, 2048)
    cols = (128, 1024) if quick else (64, 256, 1024, 4096)
    return list(itertools.product(rows, cols))


def _pooling(quick: bool) -> list[Case]:
    shapes = ((1, 64, 56),) if quick else ((1, 64, 112), (1, 64, 56), (4, 256, 28),
                                          (1, 512, 14), (1, 1280, 7))
    ops = ("MaxPool", "GlobalAveragePool") if quick else ("MaxPool", "AveragePool",
                                                           "GlobalAveragePool")
    return [pooling_case(op, *s) for op in ops for s in shapes]


GRIDS: dict[str, Callable[[bool], list[Case]]] = {
    "gemm": _gemm,
    "conv": _conv,
    "elementwise": _elementwise,
    "softmax": lambda quick: [softmax_case(r, c) for r, c in _rows_cols(quick)],
    "layernorm": lambda quick: [layernorm_case(r, c) for r, c in _rows_cols(quick)],
    "pooling": _pooling,
    "recurrent": _recurrent,
}


def cases(families: str | Iterable[str], quick: bool = False) -> list[Case]:
    """Cases of the named families (``all`` = every family)."""
    names = [families] if isinstance(families, str) else list(families)
    if "all" in names:
        names = list(GRIDS)
    unknown = [n for n in names if n not in GRIDS]
    if unknown:
        raise MeasurementError(
            f"unknown microbenchmark {', '.join(unknown)}: use one of {', '.join(GRIDS)} or all")
    return [c for n in names for c in GRIDS[n](quick)]


def run_cases(selected: Iterable[Case], configs: Iterable[MeasureConfig],
              progress: Callable[[str], None] | None = None
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Measure every case under every config: (rows, summary with one line per case/config)."""
    say = progress or (lambda _m: None)
    configs = list(configs)
    frames, summaries = [], []
    for case in selected:
        prep = prepare(case.model, {}, name="")
        for cfg in configs:
            m = measure_prepared(prep, cfg, source=tidy.SOURCE_MICRO)
            frames.append(m.rows)
            summaries.append({"family": case.family, "case": case.label, **m.summary})
            say(f"{case.family:12s} {case.label:48s} t={cfg.threads_intra} "
                f"{m.summary['sum_op_medians_ms']:9.3f} ms")
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return rows, pd.DataFrame(summaries)
