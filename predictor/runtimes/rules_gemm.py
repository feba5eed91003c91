"""``bias-into-gemm``: a matmul with a 2-D weight followed by the Add of a constant bias runs as
one ``addmm`` kernel (PyTorch ``nn.Linear`` / HF ``Conv1D``: cuBLAS GEMM with the bias as its
C operand, ``beta = 1``). NeuSight's traces show ``addmm`` and no separate add for every linear
layer; the ONNX export splits it into ``MatMul`` + ``Add``. The same holds for a ``Gemm``
followed by an ``Add`` of a constant.

Rule: an ``Add`` whose one input is a constant with as many elements as the matmul output's last
dim (a bias row) and whose other input is the sole output use of a ``MatMul`` with a rank-2
weight (or a ``Gemm``), not a model output, joins that matmul's group. The bias add's flops and
the intermediate tensor's write and read leave the cost (``KernelPlan`` group pricing).
"""

from __future__ import annotations

import math

from roofcast.graph_import.types import Graph, OpNode
from roofcast.predictor.runtimes.patterns import KernelPlan, merge_each, register_pattern
from roofcast.predictor.runtimes.rules_graph import (
    consumers,
    is_constant,
    is_model_output,
    launches,
    producer,
)


def _weight_matmul(graph: Graph, n: OpNode) -> bool:
    if n.op_type == "Gemm":
        return True
    if n.op_type != "MatMul":
        return False
    w = n.input(1)
    return w is not None and len(w.shape) == 2 and is_constant(graph, n, w)


def _bias_matmul(graph: Graph, add: OpNode) -> OpNode | None:
    """The matmul whose output ``add`` adds a constant bias row to, else None."""
    if add.op_type != "Add" or not launches(add) or len(add.inputs) != 2:
        return None
    consts = [t for t in add.inputs if is_constant(graph, add, t)]
    acts = [t for t in add.inputs if not is_constant(graph, add, t)]
    if len(consts) != 1 or len(acts) != 1 or not acts[0].shape:
        return None
    if math.prod(consts[0].shape) != acts[0].shape[-1]:
        return None
    mm = producer(graph, add, acts[0])
    if mm is None or not _weight_matmul(graph, mm) or is_model_output(graph, mm):
        return None
    if [c.name for c in consumers(graph, mm.name)] != [add.name]:
        return None
    return mm


@register_pattern("bias-into-gemm")
def bias_into_gemm(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Group each matmul with its bias add (module docstring)."""
    pairs = ((_bias_matmul(graph, add), add) for add in graph.ops())
    return merge_each(graph, plan, (((mm.name, add.name), None) for mm, add in pairs
                                    if mm is not None), "bias adds in addmm")
