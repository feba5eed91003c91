"""What ONNX Runtime's CPU provider does to a graph at optimisation level ``all``, as rules: the
fallback of ``ort-optimized`` (``ort_plan``) when ONNX Runtime cannot be asked.

* ``ort-pad-into-conv`` (``PadFusion``): a zero constant ``Pad`` on spatial axes whose one reader
  is a Conv/MaxPool with explicit pads is folded into that reader: no kernel;
* ``ort-layernorm`` (``LayerNormFusion``): the decomposed layer norm of pre-opset-17 exports
  runs as one ``LayerNormalization`` kernel;
* ``ort-nchwc-reorders`` (``NchwcTransformer``): 2-D convolutions and the layout-agnostic ops
  between them run blocked; a ``ReorderOutput`` / ``ReorderInput`` copy kernel is added where a
  tensor leaves or enters that region.
The shared rules complete it (``gelu-erf``, ``epilogue``).

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.runtimes.rules_ort).
"""

from __future__ import annotations

import numpy as np

from roofcast.graph_import.types import Graph, OpNode
from roofcast.predictor.runtimes.patterns import (
    ExtraKernel,
    Kernel,
    KernelPlan,
    merge_each,
    register_pattern,
)
from roofcast.predictor.runtimes.rules_graph import consumers, is_model_output, launches, producer

PAD_READERS: frozenset[str] = frozenset({"Conv", "MaxPool"})
NCHWC_BLOCK = 8  # channels per NCHWc block on AVX2 (16 on AVX-512); fewer input channels:
#                  the conv reads NCHW directly, no ReorderInput
#: ops that stay in the NCHWc layout between blocked convolutions (ORT's NCHWc transformer).
NCHWC_OPS: frozenset[str] = frozenset({
    "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Relu", "Clip", "Sigmoid",
    "HardSigmoid", "LeakyRelu", "Tanh", "Add", "Sum", "Mul", "BatchNormalization", "Concat",
    "Resize", "Upsample",
})
#: of ``NCHWC_OPS``, those that stay blocked only when their 4-D inputs have one shape (a
#: broadcast multiply, the squeeze-and-excitation gate, runs in NCHW).
SAME_SHAPE_OPS: frozenset[str] = frozenset({"Mul"})


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pad_values(n: OpNode) -> np.ndarray | None:
    """The constant ``pads`` of a Pad node (input 1, or the attribute before opset 11)."""
    if "pads" in n.attrs:
        return np.asarray(n.attrs["pads"])
    pads = n.input(1)
    if pads is None or pads.name not in n.const_inputs:
        return None
    return np.asarray(n.const_inputs[pads.name])


def foldable_pad(graph: Graph, n: OpNode) -> bool:
    """Whether ORT folds Pad node ``n`` into its reader (module docstring)."""
    if (
        n.op_type != "Pad"
        or not launches(n)
        or _text(n.attrs.get("mode", "constant")) != "constant"
    ):
        return False
    value = n.input(2)
    if value is not None and (value.name not in n.const_inputs
                              or np.any(np.asarray(n.const_inputs[value.name]) != 0)):
        return False
    if float(n.attrs.get("value", 0.0)) != 0.0 or n.input(3) is not None:  # opset<11 / axes
        return False
    pads = _pad_values(n)
    if pads is None or pads.size < 4 or pads.size % 2 or np.any(pads < 0):
        return False
    rank = pads.size // 2
    if np.any(pads[[0, 1, rank, rank + 1]] != 0):
        return False
    readers = consumers(graph, n.name)
    return (len(readers) == 1 and not is_model_output(graph, n)
            and readers[0].op_type in PAD_READERS
            and _text(readers[0].attrs.get("auto_pad", "NOTSET")) == "NOTSET")


def _only_reader(graph: Graph, n: OpNode, op_types: tuple[str, ...]) -> OpNode | None:
    readers = consumers(graph, n.name)
    if len(readers) != 1 or is_model_output(graph, n) or readers[0].op_type not in op_types:
        return None
    return readers[0]


def _reads(n: OpNode, t) -> bool:
    return any(i is not None and i.name == t.name for i in n.inputs)


def decomposed_layernorm(graph: Graph, mean: OpNode) -> list[str] | None:
    """Member names of the decomposed layer norm starting at ReduceMean ``mean``, or None."""
    if mean.op_type != "ReduceMean" or not launches(mean) or mean.input(0) is None:
        return None
    x = mean.input(0)
    subs = [c for c in consumers(graph, mean.name) if c.op_type == "Sub" and _reads(c, x)]
    if len(subs) != 1 or len(consumers(graph, mean.name)) != 1 or is_model_output(graph, mean):
        return None
    sub = subs[0]
    d = sub.outputs[0]
    readers = consumers(graph, sub.name)
    square = next((r for r in readers if r.op_type == "Pow"
                   or (r.op_type == "Mul" and r.input(0) is not None and r.input(1) is not None
                       and r.input(0).name == r.input(1).name == d.name)), None)
    div = next((r for r in readers if r.op_type == "Div"), None)
    if square is None or div is None or len(readers) != 2:
        return None
    chain = [square]
    for op_types in (("ReduceMean",), ("Add",), ("Sqrt",), ("Div",)):
        nxt = _only_reader(graph, chain[-1], op_types)
        if nxt is None:
            return None
        chain.append(nxt)
    if chain[-1] is not div:
        return None
    members = [mean, sub, *chain]
    scale = _only_reader(graph, div, ("Mul",))
    if scale is not None:
        members.append(scale)
        shift = _only_reader(graph, scale, ("Add",))
        if shift is not None:
            members.append(shift)
    if not all(launches(m) for m in members):
        return None
    return [m.name for m in members]


@register_pattern("ort-layernorm")
def layernorm(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Each decomposed layer norm as one kernel (module docstring)."""
    norms = (decomposed_layernorm(graph, n) for n in graph.ops() if n.op_type == "ReduceMean")
    return merge_each(graph, plan, ((m, None) for m in norms if m),
                      "decomposed layer norms as one kernel")


@register_pattern("ort-pad-into-conv")
def pad_into_conv(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Constant zero Pads folded into the Conv / MaxPool reading them (module docstring)."""
    names = [n.name for n in graph.ops() if foldable_pad(graph, n)]
    if not names:
        return plan
    return plan.with_free(names).with_note(f"{len(names)} Pads folded into the next Conv")


def _channels(n: OpNode, i: int, out: bool = False) -> int | None:
    t = n.outputs[i] if out else n.input(i)
    if t is None or len(t.shape) != 4 or not t.is_concrete:
        return None
    return int(t.shape[1])


def blocked_conv(n: OpNode) -> bool:
    """A 2-D Conv ORT runs in NCHWc: a plain conv or a depthwise one."""
    if n.op_type != "Conv" or not launches(n):
        return False
    cin, cout = _channels(n, 0), _channels(n, 0, out=True)
    if cin is None or cout is None:
        return False
    group = int(n.attrs.get("group", 1))
    return group == 1 or (group == cin == cout)


def _source(graph: Graph, n: OpNode, t, free: frozenset[str]) -> OpNode | None:
    """The producer of input ``t`` of ``n``, looking back through nodes launching no kernel
    (a Pad folded into its conv)."""
    p = producer(graph, n, t)
    while p is not None and p.name in free:
        p = producer(graph, p, p.input(0))
    return p


def nchwc_region(graph: Graph, free: frozenset[str] = frozenset()) -> set[str]:
    """Blocked convs plus the NCHWc-capable 4-D ops fed only from inside the region
    (``free`` nodes are looked through)."""
    region: set[str] = set()
    for n in graph.ops():
        if blocked_conv(n):
            region.add(n.name)
            continue
        if n.op_type not in NCHWC_OPS or not launches(n) or not n.outputs:
            continue
        if len(n.outputs[0].shape) != 4:
            continue
        four_d = [t for t in n.inputs if t is not None and len(t.shape) == 4]
        if n.op_type in SAME_SHAPE_OPS and len({t.shape for t in four_d}) > 1:
            continue
        srcs = [_source(graph, n, t, free) for t in four_d]
        if srcs and all(s is not None and s.name in region for s in srcs):
            region.add(n.name)
    return region


def _copy(after: str, label: str, t) -> ExtraKernel:
    size = float(t.nbytes)
    return ExtraKernel(after=after, label=label, kernel=Kernel(
        op_type=label.split(".")[0], family="data_movement", engine="data", flops=0.0,
        bytes_read=size, bytes_written=size, dtype=t.dtype))


@register_pattern("ort-nchwc-reorders")
def nchwc_reorders(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """ReorderInput / ReorderOutput copies at the NCHWc region's borders (module docstring)."""
    region = nchwc_region(graph, plan.free)
    extra: list[ExtraKernel] = []
    for n in graph.ops():
        if n.name in region:
            outside = [c for c in consumers(graph, n.name)
                       if c.name not in region and c.name not in plan.free]
            if (outside or is_model_output(graph, n)) and n.outputs[0].is_concrete:
                extra.append(_copy(n.name, f"ReorderOutput.{n.name}", n.outputs[0]))
            if blocked_conv(n) and (_channels(n, 0) or 0) >= NCHWC_BLOCK:
                src = _source(graph, n, n.input(0), plan.free)
                if src is None or src.name not in region:
                    extra.append(_copy(n.name, f"ReorderInput.{n.name}", n.input(0)))
    if not extra:
        return plan
    return plan.with_extra(extra).with_note(f"{len(extra)} NCHWc layout reorders")
