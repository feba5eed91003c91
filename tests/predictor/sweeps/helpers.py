"""A tiny ONNX model and spec files for the sweep tests (fast: no zoo import)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GPU, GPU2, CPU = "h100-sxm", "a100-80gb-sxm", "epyc-9654"


def write_mlp(path: Path) -> Path:
    """x[batch, 64] @ w[64, 32] + b -> Relu: a model that imports in milliseconds."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.zeros((64, 32), np.float32), "w")
    b = numpy_helper.from_array(np.zeros(32, np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["z"], name="bias"),
             helper.make_node("Relu", ["z"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "mlp", [x], [y], initializer=[w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


def write_spec(folder: Path, body: str, name: str = "spec.toml") -> Path:
    """``folder/name`` holding ``body`` (TOML), with ``mlp.onnx`` beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "mlp.onnx").exists():
        write_mlp(folder / "mlp.onnx")
    path = folder / name
    path.write_text(body)
    return path


SMALL = f"""
[sweep]
name = "small"
models = ["mlp.onnx"]
devices = ["{GPU}", "{GPU2}", "{CPU}", "no-such-device"]
batches = [1, 4]
precisions = ["fp32", "fp16"]
"""
