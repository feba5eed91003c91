"""``gelu-erf``: the exported erf GELU ``0.5 * x * (1 + erf(x / sqrt(2)))`` — five nodes
``Div`` (or ``Mul`` by 1/sqrt(2)) -> ``Erf`` -> ``Add 1`` -> ``Mul x`` -> ``Mul 0.5``, in any
order of the two final multiplications — runs as one elementwise kernel in PyTorch
(``F.gelu``, ``GeluCUDAKernelImpl``); opset-20 ``Gelu`` is one node already.

Not for the tanh GELU (``gelu_new``, GPT-2): HF implements it in Python as
``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` and NeuSight's eager traces show
it as 8 kernels (mul, pow, mul, add, mul, tanh, add, mul; 0.30-0.45 ms each for 2x2048x12288
fp32 on an A100), so eager prices it node by node; torch.compile fuses it (``inductor-chains``).
"""

from __future__ import annotations

from roofcast.graph_import.types import Graph, OpNode
from roofcast.predictor.runtimes.patterns import KernelPlan, merge_each, register_pattern
from roofcast.predictor.runtimes.rules_graph import (
    consumers,
    is_constant,
    is_model_output,
    launches,
    producer,
)


def _const_operand(graph: Graph, n: OpNode) -> tuple[str, str] | None:
    """(activation input name, constant input name) of a binary node, else None."""
    if len(n.inputs) != 2 or any(t is None for t in n.inputs):
        return None
    a, b = n.inputs
    if is_constant(graph, n, b) and not is_constant(graph, n, a):
        return a.name, b.name
    if is_constant(graph, n, a) and not is_constant(graph, n, b) and n.op_type != "Div":
        return b.name, a.name
    return None


def _only_reader(graph: Graph, n: OpNode) -> OpNode | None:
    cs = consumers(graph, n.name)
    return cs[0] if len(cs) == 1 and not is_model_output(graph, n) else None


def erf_gelu(graph: Graph, erf: OpNode) -> list[str] | None:
    """Member names of the erf-GELU chain around ``erf`` (topological order), or None."""
    pre = producer(graph, erf, erf.input(0))
    if pre is None or pre.op_type not in ("Div", "Mul") or _const_operand(graph, pre) is None:
        return None
    if _only_reader(graph, pre) is not erf:
        return None
    x = _const_operand(graph, pre)[0]
    add = _only_reader(graph, erf)
    if add is None or add.op_type != "Add" or _const_operand(graph, add) is None:
        return None
    members = [pre, erf, add]
    cur, used_x = add, False
    for _ in range(2):
        nxt = _only_reader(graph, cur) if cur is not add or not used_x else None
        if nxt is None or nxt.op_type != "Mul" or len(nxt.inputs) != 2:
            break
        other = next((t for t in nxt.inputs if t is not None and t.name != cur.outputs[0].name),
                     None)
        if other is None:
            break
        half_x = producer(graph, nxt, other)
        if other.name == x:
            used_x = True
        elif is_constant(graph, nxt, other):
            pass
        elif (half_x is not None and half_x.op_type == "Mul"
              and (_const_operand(graph, half_x) or ("",))[0] == x
              and _only_reader(graph, half_x) is nxt):
            members.append(half_x)
            used_x = True
        else:
            break
        members.append(nxt)
        cur = nxt
    if not used_x or not all(launches(m) for m in members):
        return None
    return [m.name for m in members]


@register_pattern("gelu-erf")
def gelu_erf(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Group each erf-GELU chain into one elementwise kernel (module docstring)."""
    chains = (erf_gelu(graph, n) for n in graph.ops() if n.op_type == "Erf")
    return merge_each(graph, plan, ((m, None) for m in chains if m is not None),
                      "erf-GELU chains as one kernel")
