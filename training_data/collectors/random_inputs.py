"""Make a weightless ONNX model runnable in memory: random weights, bound dims, random inputs.

* ``materialise(model, dims, seed)`` returns a copy whose initializers without inline data
  (external data, whose files roofcast never reads) are filled with random values of their
  declared dims and dtype, and whose graph inputs carry the bound dims. Nothing is read from
  disk: the external ``location`` is dropped, never opened.

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.collectors.random_inputs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper

from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.load import tensor_has_inline_data
from roofcast.graph_import.shapes import bind_dims

# ops that pass integer values through unchanged (indices keep their range)
_PASS_THROUGH = frozenset({"Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity",
                           "Expand", "Slice", "Transpose"})
# consumer op -> index of the input that holds indices, axis attribute (default) of the table
_INDEX_CONSUMERS: Mapping[str, tuple[int, str, int]] = {
    "Gather": (1, "axis", 0),
    "GatherElements": (1, "axis", 0),
}


@dataclass(frozen=True)
class IntInputPlan:
    """How one integer graph input is filled: ``kind`` is ``index`` (uniform in ``[0, high)``,
    ``high`` from the dim of the table it indexes), ``mask`` (all ones), ``position``
    (``arange`` over the last axis) or ``ones`` (no consumer tells the range; 1 is valid for
    masks, token type ids and any index into a non-empty table). ``reason`` says why."""

    name: str
    kind: str
    high: int
    reason: str


IN_MEMORY_LOCATION = "roofcast-in-memory"
INLINE_MAX_BYTES = 1 << 20


def materialise(model: ModelProto, dims: Mapping[str, int] | None = None,
                seed: int = 0) -> ModelProto:
    """A copy of ``model`` with every initializer lacking inline data filled with random values
    (module docstring) and ``dims`` bound in its inputs/outputs. The original is untouched."""
    out, big = materialise_split(model, dims, seed, inline_max_bytes=None)
    assert not big
    return out


def materialise_split(model: ModelProto, dims: Mapping[str, int] | None = None, seed: int = 0,
                      inline_max_bytes: int | None = INLINE_MAX_BYTES
                      ) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """Like ``materialise``, but random tensors above ``inline_max_bytes`` stay declared as
    external data (location ``roofcast-in-memory``, never a file) and are returned as arrays,
    for ``SessionOptions.add_external_initializers``: a model whose weights exceed protobuf's
    2 GB limit still runs, and nothing big is serialised. ``None`` inlines everything."""
    out = ModelProto()
    out.CopyFrom(model)
    rng = np.random.default_rng(seed)
    big: dict[str, np.ndarray] = {}
    for t in out.graph.initializer:
        if tensor_has_inline_data(t):
            continue
        arr = random_tensor(tuple(int(d) for d in t.dims), t.data_type, rng)
        t.ClearField("external_data")
        if inline_max_bytes is not None and arr.nbytes > inline_max_bytes:
            big[t.name] = arr
            t.data_location = TensorProto.EXTERNAL
            entry = t.external_data.add()
            entry.key, entry.value = "location", IN_MEMORY_LOCATION
            continue
        t.data_location = TensorProto.DEFAULT
        t.raw_data = numpy_helper.from_array(arr, t.name).raw_data
    if dims:
        bind_dims(out.graph, dims)
    return out, big


def external_initializers(model: ModelProto) -> list[str]:
    """Names of initializers whose values are not in the model (absent external data)."""
    return [t.name for t in model.graph.initializer if not tensor_has_inline_data(t)]


def random_tensor(shape: tuple[int, ...], data_type: int, rng: np.random.Generator) -> np.ndarray:
    """Random values for one absent initializer (rule in the module docstring)."""
    try:
        np_dtype = helper.tensor_dtype_to_np_dtype(data_type)
    except KeyError as exc:
        raise ModelImportError(
            f"cannot make random values of ONNX dtype {data_type}: export the model with float "
            "or integer weights") from exc
    if np.issubdtype(np_dtype, np.floating):
        if len(shape) >= 2:
            fan_in = max(1, math.prod(shape[1:]))
            bound = 1.0 / math.sqrt(fan_in)
            arr = rng.uniform(-bound, bound, size=shape)
        else:
            arr = rng.uniform(0.5, 1.5, size=shape)
        return arr.astype(np_dtype)
    if np_dtype == np.bool_:
        return np.zeros(shape, dtype=np.bool_)
    if np.issubdtype(np_dtype, np.integer) and np.dtype(np_dtype).itemsize == 1:
        info = np.iinfo(np_dtype)  # int8/uint8 quantised weights: the full range
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(np_dtype)
    return np.zeros(shape, dtype=np_dtype)


def _tensor_dims(model: ModelProto) -> dict[str, tuple[int, ...]]:
    """Concrete dims of initializers and of tensors whose inferred shape is concrete."""
    known: dict[str, tuple[int, ...]] = {t.name: tuple(int(d) for d in t.dims)
                                         for t in model.graph.initializer}
    for vi in (*model.graph.value_info, *model.graph.input, *model.graph.output):
        shape = vi.type.tensor_type.shape
        if vi.name in known or not vi.type.HasField("tensor_type"):
            continue
        if all(d.HasField("dim_value") for d in shape.dim):
            known[vi.name] = tuple(int(d.dim_value) for d in shape.dim)
    return known


def int_input_plan(model: ModelProto, name: str) -> IntInputPlan:
    """Decide how to fill the integer input ``name``.

    1. Follow the tensor through pass-through ops (Cast, Unsqueeze, Reshape, ...) to a node
       that uses it as indices (Gather, GatherElements): values uniform in ``[0, d)`` with
       ``d`` the table's dim on the gather axis (e.g. the vocabulary of an embedding). With
       several such tables the smallest dim wins (valid for all).
    2. Else a name containing ``mask`` -> ones; containing ``position`` -> ``arange``.
    3. Else ones (the reason records that no consumer gave a range).
    """
    highs = _index_table_dims(model, name)
    lowered = name.lower()
    if highs:
        return IntInputPlan(name, "index", min(highs),
                            f"indexes a table of {min(highs)} rows (Gather)")
    if "mask" in lowered:
        return IntInputPlan(name, "mask", 2, "name says mask: all ones")
    if "position" in lowered:
        return IntInputPlan(name, "position", 0, "name says position ids: arange")
    return IntInputPlan(name, "ones", 2, "no Gather consumes it; filled with ones")


def _index_table_dims(model: ModelProto, name: str) -> list[int]:
    """The gathered-axis dim of every table that ``name`` (through pass-through ops) indexes."""
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for t in node.input:
            consumers.setdefault(t, []).append(node)
    dims = _tensor_dims(model)
    highs: list[int] = []
    frontier, seen = [name], {name}
    while frontier:
        tensor = frontier.pop()
        for node in consumers.get(tensor, []):
            spec = _INDEX_CONSUMERS.get(node.op_type)
            if spec is not None and len(node.input) > spec[0] and node.input[spec[0]] == tensor:
                high = _gathered_dim(node, spec, dims)
                if high is not None:
                    highs.append(high)
            elif node.op_type in _PASS_THROUGH and node.input and node.input[0] == tensor:
                for o in node.output:
                    if o and o not in seen:
                        seen.add(o)
                        frontier.append(o)
    return highs


def _gathered_dim(node: onnx.NodeProto, spec, dims) -> int | None:
    """The dim of the table ``node`` gathers from on its gather axis, when known."""
    table = dims.get(node.input[0])
    axis = next((a.i for a in node.attribute if a.name == spec[1]), spec[2])
    if table and -len(table) <= axis < len(table):
        return table[axis]
    return None


def make_feeds(model: ModelProto, rng: np.random.Generator | None = None
               ) -> tuple[dict[str, np.ndarray], list[IntInputPlan]]:
    """One random array per graph input (dims must be bound) and the plans of integer inputs.

    Raises ModelImportError naming the input and dim when a shape is not concrete."""
    rng = rng or np.random.default_rng(0)
    init_names = {t.name for t in model.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    plans: list[IntInputPlan] = []
    for vi in model.graph.input:
        if vi.name in init_names:
            continue
        tt = vi.type.tensor_type
        shape = []
        for axis, d in enumerate(tt.shape.dim):
            if not d.HasField("dim_value"):
                label = d.dim_param or "?"
                raise ModelImportError(
                    f"input {vi.name!r} axis {axis} ({label}) has no size: bind it with "
                    f"--dim {d.dim_param or f'{vi.name}:{axis}'}=N")
            shape.append(int(d.dim_value))
        np_dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(np_dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(np_dtype)
        elif np_dtype == np.bool_:
            feeds[vi.name] = np.ones(shape, dtype=np.bool_)
        else:
            plan = int_input_plan(model, vi.name)
            plans.append(plan)
            feeds[vi.name] = _int_values(plan, tuple(shape), np_dtype, rng)
    return feeds, plans


def _int_values(plan: IntInputPlan, shape: tuple[int, ...], np_dtype, rng) -> np.ndarray:
    if plan.kind == "index":
        return rng.integers(0, plan.high, size=shape).astype(np_dtype)
    if plan.kind == "position":
        last = shape[-1] if shape else 1
        return np.broadcast_to(np.arange(last), shape).astype(np_dtype).copy()
    return np.ones(shape, dtype=np_dtype)
