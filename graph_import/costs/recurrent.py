"""Recurrent layers: LSTM, GRU, RNN (ONNX semantics, default activations). Engine: MATRIX.

With D directions, S steps, B batch, I input size, H hidden size and G gates
(W: [D, G·H, I], R: [D, G·H, H]):

    FLOPs = D · S · B · (2 · (I + H) · G · H  +  (elementwise + bias) · H)

Elementwise FLOPs per hidden unit per step (``RECURRENT_ELEMENTWISE``): LSTM 22 (+8 bias,
+6 peepholes), GRU 17 (+6 bias), RNN 2 (+2 bias). Every sequence is costed at the full S steps.
Bytes: X, weights and initial states read once, Y, Y_h, Y_c written once.

Rationale: ``docs/design/module-notes.md`` (roofcast.graph_import.costs.recurrent).
"""

from __future__ import annotations

from roofcast.graph_import.costs._common import (
    CostRuleError,
    attr_int,
    io_cost,
    need_input,
    need_output,
)
from roofcast.graph_import.costs.gemm_dims import gemm_recurrent
from roofcast.graph_import.costs.registry import register
from roofcast.graph_import.types import Engine, OpCost, OpNode

#: op -> (gates G, elementwise FLOPs per hidden unit and step, bias FLOPs per unit and step)
RECURRENT_ELEMENTWISE: dict[str, tuple[int, int, int]] = {
    "LSTM": (4, 22, 8),
    "GRU": (3, 17, 6),
    "RNN": (1, 2, 2),
}
LSTM_PEEPHOLE_FLOPS_PER_UNIT = 6


def _recurrent(node: OpNode, extra_per_unit: int) -> OpCost:
    x = need_input(node, 0, "X")
    w = need_input(node, 1, "W")
    r = need_input(node, 2, "R")
    need_output(node, 0)
    if len(x.shape) != 3 or len(w.shape) != 3 or len(r.shape) != 3:
        raise CostRuleError(
            f"{node.op_type} node {node.name!r}: X, W and R must be rank 3 "
            f"(got {x.shape}, {w.shape}, {r.shape})"
        )
    gates, elementwise, bias = RECURRENT_ELEMENTWISE[node.op_type]
    directions, _, input_size = w.shape
    hidden = r.shape[-1]
    if attr_int(node, "layout", 0):
        batch, steps = x.shape[0], x.shape[1]
    else:
        steps, batch = x.shape[0], x.shape[1]
    per_unit = elementwise + (bias if node.input(3) is not None else 0) + extra_per_unit
    per_step = 2 * (input_size + hidden) * gates * hidden + per_unit * hidden
    return io_cost(node, directions * steps * batch * per_step, Engine.MATRIX)


@register("GRU", "RNN", family="recurrent", backward="whole_layer", gemm_dims=gemm_recurrent)
def cost_gru_rnn(node: OpNode) -> OpCost:
    """GRU/RNN(X, W, R, B?, sequence_lens?, initial_h?):
    ``D·S·B·(2·(I + H)·G·H + (elementwise + bias)·H)`` per RECURRENT_ELEMENTWISE; layout 0
    means X = [S, B, I], layout 1 means X = [B, S, I]."""
    return _recurrent(node, 0)


@register("LSTM", family="recurrent", backward="whole_layer", gemm_dims=gemm_recurrent)
def cost_LSTM(node: OpNode) -> OpCost:
    """LSTM(X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P?): as GRU/RNN with G = 4,
    22 elementwise FLOPs per unit-step (+8 bias, +6 peepholes when P is given)."""
    peephole = LSTM_PEEPHOLE_FLOPS_PER_UNIT if node.input(7) is not None else 0
    return _recurrent(node, peephole)
