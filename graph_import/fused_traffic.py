"""Traffic a fused kernel saves: the bytes of tensors passed between the members of a group.

Pure graph accounting, below both the predictor (which prices the groups it fuses) and the
data side (which records the groups ONNX Runtime fused), so both count the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from roofcast.graph_import.types import Engine, Graph, OpNode, TensorInfo


def _own_bytes(t: TensorInfo) -> float:
    return t.nbytes


def internal_traffic(graph: Graph, members: Sequence[str],
                     tensor_bytes: Callable[[TensorInfo], float] = _own_bytes
                     ) -> tuple[float, float]:
    """(read_saved, write_saved) bytes of a fused group of ``members`` (node names).

    A tensor produced by one member and read by another never touches memory inside a fused
    kernel: each inside read of it is saved, and its write is saved too unless a node outside
    the group or the model's outputs still need it. Free members (views: Reshape, Unsqueeze,
    ... — ``Engine.FREE`` or no cost) move no bytes, so they save none either: their outputs
    are aliases of their inputs, and a tensor read through a view is read by the view's
    readers (an ORT group MatMul+Add+Reshape+Unsqueeze writes its result once; counting the
    Reshape's read and the Add output's write as saved left it with zero bytes). A tensor
    weighs ``tensor_bytes(t)``: its own bytes by default; the predictor passes the bytes at the
    run's precision. Shared by ``predictor.fusion.fuse_rows`` (predicted groups) and the
    measurement collector (ONNX Runtime's groups), so a measured fused row and a predicted one
    count traffic the same way.
    """
    g = graph.nx_graph
    inside = set(members)
    views = {m for m in members if _moves_nothing(g.nodes[m]["op"])}
    model_outputs = {t.name for t in graph.outputs}
    read_saved = write_saved = 0.0
    for name in members:
        if name in views:
            continue
        for t in g.nodes[name]["op"].outputs:
            if t is None:
                continue
            size = tensor_bytes(t)
            inside_reads, read, outside = _uses(g, inside, views, model_outputs, name, t.name)
            read_saved += size * inside_reads
            if read and not outside:
                write_saved += size
    return read_saved, write_saved


def _uses(
    g, inside: set[str], views: set[str], model_outputs: set[str], name: str, tensor: str
) -> tuple[int, bool, bool]:
    """(reads by computing members, read at all, needed outside) of ``tensor`` (output of node
    ``name``) for the group ``inside`` with view members ``views``, following views inside the
    group."""
    inside_reads, read, outside = 0, False, tensor in model_outputs
    for c in g.successors(name):
        if not any(x is not None and x.name == tensor for x in g.nodes[c]["op"].inputs):
            continue
        read = True
        if c not in inside:
            outside = True
        elif c in views:
            for t in g.nodes[c]["op"].outputs:
                if t is not None:
                    n, r, o = _uses(g, inside, views, model_outputs, c, t.name)
                    inside_reads, read, outside = inside_reads + n, read or r, outside or o
        else:
            inside_reads += 1
    return inside_reads, read, outside


def _moves_nothing(node: OpNode) -> bool:
    return node.cost is None or node.cost.engine == Engine.FREE
