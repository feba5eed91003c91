"""A tiny ONNX model, spec files and a robustly torn-down Dask cluster for the sweep tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@contextlib.contextmanager
def local_cluster(**kwargs) -> Iterator[tuple[Any, Any]]:
    """A ``LocalCluster`` and its ``Client``, torn down robustly: each closed within
    ``dask_client.CLOSE_TIMEOUT_S`` (errors ignored), then every worker process it started that
    is still alive is killed, so a test that kills workers leaves no orphan and cannot hang
    in the teardown."""
    import psutil
    from distributed import Client, LocalCluster

    from roofcast.predictor.dask_client import close_quietly

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    cluster = LocalCluster(**kwargs)
    client = Client(cluster, set_as_default=False)
    try:
        yield cluster, client
    finally:
        close_quietly(client, cluster)
        for proc in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if proc.pid not in before and "resource_tracker" not in " ".join(proc.cmdline()):
                    proc.kill()
