"""Budgets of an ONNX import, checked *before* the work they bound is done.

A model file of a few hundred bytes can describe tensors of 2**120 elements or functions that
inline to 2**30 nodes. Each budget caps what the input may *describe*, checked as soon as the
number is known; a refusal names the cap and its environment variable ``ROOFCAST_MAX_*``:
TENSOR_ELEMS (elements of one tensor, 2**40), GRAPH_BYTES (sum of elements x itemsize over all
tensors, 2**50), DIM (a user dim, 2**24), NESTING (function/subgraph depth, 16), NODES (nodes
once inlined, 2**18); and what a user *asks* for (``roofcast.api_checks``, sweep specs): BATCH
(2**20; also the ``batch`` dim), TOKENS (2**24), DEVICES (2**20), SYSTEM_NODES (2**17),
GLOBAL_BATCH (2**24), THREADS (CPU threads, 2**16). The defaults sit far above any real model
and keep every import within seconds and 2 GB.
``DATA_PROP_MAX_ELEMS`` (not a setting): a constant generator with more elements goes to ONNX
shape inference as a shape without values. The table and rationale: docs/design/module-notes.md.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roofcast.graph_import.errors import ModelImportError

if TYPE_CHECKING:
    from onnx import GraphProto, ModelProto

DATA_PROP_MAX_ELEMS = 1 << 16  # = fold.MAX_FOLD_ELEMENTS: values above this are never folded


@dataclass(frozen=True)
class Limit:
    """One budget: its environment variable, default and what it caps (for messages)."""

    env: str
    default: int
    what: str

    def value(self) -> int:
        """The cap in force: the environment variable when set (a positive integer), else the
        default. A bad setting is itself refused, naming the variable."""
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        try:
            value = int(raw.replace("_", ""))
        except ValueError:
            value = 0
        if value < 1:
            raise ModelImportError(
                f"{self.env}={raw!r} is not a positive integer: set it to a number such as "
                f"{self.default} (the default) or unset it"
            )
        return value

    def check(self, value: int, found: str, error: type[Exception] = ValueError) -> int:
        """``value`` if it is at most the cap, else ``error``: ``found`` (the flag or key with
        the value, e.g. ``"--batch 5000000"``), the allowed range and the variable that raises
        it. The one check of a count a user asks for (CLI flags, API arguments, sweep specs)."""
        cap = self.value()
        if value > cap:
            raise error(f"{found} is over the limit of {cap} {self.what} (allowed: 1 to {cap}); "
                        f"if this is intended, raise it with the environment variable {self.env}")
        return value

    def refuse(self, found: str) -> ModelImportError:
        """The error for ``found`` (a phrase with the offending number) exceeding this cap."""
        cap = self.value()
        return ModelImportError(
            f"{found}, over the limit of {cap} {self.what}: the model or the --dim values "
            f"describe more than roofcast analyses; if this is intended, raise the limit with "
            f"the environment variable {self.env} (e.g. {self.env}={cap * 16})"
        )


TENSOR_ELEMS = Limit("ROOFCAST_MAX_TENSOR_ELEMS", 2**40, "elements per tensor")
GRAPH_BYTES = Limit("ROOFCAST_MAX_GRAPH_BYTES", 2**50, "bytes of tensors in one graph")
USER_DIM = Limit("ROOFCAST_MAX_DIM", 2**24, "per --dim value")
NESTING = Limit("ROOFCAST_MAX_NESTING", 16, "levels of nested functions/subgraphs")
NODES = Limit("ROOFCAST_MAX_NODES", 2**18, "nodes (local functions inlined)")
BATCH = Limit("ROOFCAST_MAX_BATCH", 2**20, "samples per batch")
TOKENS = Limit("ROOFCAST_MAX_TOKENS", 2**24, "tokens per request or sample")
DEVICES = Limit("ROOFCAST_MAX_DEVICES", 2**20, "devices")
SYSTEM_NODES = Limit("ROOFCAST_MAX_SYSTEM_NODES", 2**17, "nodes per system")
GLOBAL_BATCH = Limit("ROOFCAST_MAX_GLOBAL_BATCH", 2**24, "samples per global batch")
THREADS = Limit("ROOFCAST_MAX_THREADS", 2**16, "CPU threads")


def check_tensor_elems(label: str, numel: int, dims: object = None) -> None:
    """Refuse a tensor of more than ``ROOFCAST_MAX_TENSOR_ELEMS`` elements."""
    if numel > TENSOR_ELEMS.value():
        shape = f" (dims {list(dims)})" if dims is not None else ""  # type: ignore[call-overload]
        raise TENSOR_ELEMS.refuse(f"{label} has {numel} elements{shape}")


def check_graph_bytes(total_bytes: int) -> None:
    """Refuse a graph whose tensors add up to more than ``ROOFCAST_MAX_GRAPH_BYTES``."""
    if total_bytes > GRAPH_BYTES.value():
        raise GRAPH_BYTES.refuse(f"the graph's tensors add up to {total_bytes} bytes")


def check_described_shapes(graph: GraphProto) -> None:
    """Element cap on every concretely typed tensor of ``graph`` (inputs, value_info, outputs,
    initializers) and the graph-bytes cap on their sum; run after each inference round."""
    total = 0
    for label, elem, dims in _typed(graph):
        numel = math.prod(dims)
        check_tensor_elems(f"tensor {label!r}", numel, dims)
        total += numel * _itemsize(elem)
    check_graph_bytes(total)


def _typed(graph: GraphProto) -> Iterator[tuple[str, int, list[int]]]:
    for vi in (*graph.input, *graph.value_info, *graph.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            dims = [d.dim_value for d in tt.shape.dim]
            if all(d.HasField("dim_value") for d in tt.shape.dim):
                yield vi.name, tt.elem_type, dims
    for init in graph.initializer:
        yield init.name, init.data_type, list(init.dims)


@functools.cache
def _itemsize(elem: int) -> int:
    import onnx

    try:
        return max(onnx.helper.tensor_dtype_to_np_dtype(elem).itemsize, 1)
    except (KeyError, ValueError, TypeError):
        return 1


def check_user_dims(dims: Mapping[str, int]) -> None:
    """Refuse a user dim binding above ``ROOFCAST_MAX_DIM``, the ``batch`` dim (``--batch``)
    above ``ROOFCAST_MAX_BATCH`` (before anything is bound)."""
    cap = USER_DIM.value()
    for key, value in dims.items():
        if key == "batch":  # = dims.BATCH_DIM (dims imports this module)
            BATCH.check(value, f"--batch {value}", ModelImportError)
        elif value > cap:
            raise USER_DIM.refuse(f"--dim {key}={value} is too large")


def check_nesting(model: ModelProto) -> None:
    """Refuse functions/subgraphs nested deeper than ``ROOFCAST_MAX_NESTING``, recursive local
    functions, and models that inline to more than ``ROOFCAST_MAX_NODES`` nodes. Nothing is
    inlined here: node counts of each function are added up once (memoised), so a 2**30-node
    expansion costs as many steps as the file has nodes."""
    max_depth, max_nodes = NESTING.value(), NODES.value()
    functions = {(f.domain, f.name): f for f in model.functions}
    memo: dict[tuple[str, str], tuple[int, int]] = {}  # function -> (nodes, levels below)
    active: set[tuple[str, str]] = set()

    def walk(nodes, depth: int) -> tuple[int, int]:
        """(nodes once inlined, nesting levels below) of a node list at ``depth``."""
        if depth > max_depth:
            raise NESTING.refuse(f"the model nests functions/subgraphs {depth} levels deep")
        total, height = 0, 0
        for node in nodes:
            inner = [walk(sub.node, depth + 1) for sub in _subgraphs(node)]
            key = (node.domain, node.op_type)
            if key in functions:
                inner.append(call(key, depth + 1))
            else:
                total += 1
            for n, h in inner:
                total += n
                height = max(height, h + 1)
            if depth + height > max_depth:
                raise NESTING.refuse(
                    f"the model nests functions/subgraphs {depth + height} levels deep"
                )
            if total > max_nodes:
                raise NODES.refuse(
                    f"the model has at least {total} nodes once functions are inlined")
        return total, height

    def call(key: tuple[str, str], depth: int) -> tuple[int, int]:
        if key not in memo:
            if key in active:
                raise ModelImportError(
                    f"local function {key[1]!r} calls itself (directly or through others): ONNX "
                    "functions cannot recurse; the file is corrupt or hostile; re-export it"
                )
            active.add(key)
            memo[key] = walk(functions[key].node, depth)
            active.discard(key)
        return memo[key]

    walk(model.graph.node, 0)


def _subgraphs(node) -> Iterator[GraphProto]:
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs
