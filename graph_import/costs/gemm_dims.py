"""GEMM view of matrix-engine ops: ``gemm_dims(node) -> (batch, M, N, K)`` or None.

The traffic estimator needs the GEMM a kernel really runs; each rule is named by its op's
registry entry (``register(..., gemm_dims=gemm_matmul)``), and None (no plain GEMM) sends the
row to the FLOPs/bytes roofline, never a guess. MatMul: ``Y[.., M, N] = A[.., M, K] @ B[.., K, N]``
(a 2-D weight folds the batch into M); Gemm: batch 1; Conv (implicit GEMM):
``M = N·prod(out), N = Cout/g, K = (C/g)·prod(kernel), batch = g``; ConvTranspose in col2im form;
LSTM/GRU/RNN: ``batch = D·S`` steps of ``M = B, N = G·H, K = I + H``; a two-operand Einsum
contraction by its index roles.

Rationale: ``docs/design/module-notes.md`` (roofcast.graph_import.costs.gemm_dims).
"""

from __future__ import annotations

import math

from roofcast.graph_import.costs.registry import GemmDims, apply_shape_rule, spec_of
from roofcast.graph_import.types import OpNode, TensorInfo


def gemm_dims(node: OpNode) -> GemmDims | None:
    """(batch, M, N, K) of the GEMM ``node`` runs, or None when it is not a plain GEMM."""
    entry = spec_of(node)
    dims = None if entry is None else apply_shape_rule(entry.gemm_dims, node)
    if dims is None or any(d <= 0 for d in dims):
        return None
    return tuple(float(d) for d in dims)  # type: ignore[return-value]


def _inp(node: OpNode, i: int) -> TensorInfo | None:
    return node.input(i)


def _matmul_like(node: OpNode, a_idx: int, b_idx: int) -> GemmDims | None:
    a, b, y = _inp(node, a_idx), _inp(node, b_idx), node.outputs[0] if node.outputs else None
    if a is None or b is None or y is None or not a.shape or not b.shape:
        return None
    trans_a = bool(node.attrs.get("transA", 0))
    trans_b = bool(node.attrs.get("transB", 0))
    k = a.shape[-2] if trans_a and len(a.shape) >= 2 else a.shape[-1]
    m = 1 if len(a.shape) == 1 else (a.shape[-1] if trans_a else a.shape[-2])
    n = 1 if len(b.shape) == 1 else (b.shape[-2] if trans_b else b.shape[-1])
    out_rank_mn = (len(a.shape) > 1) + (len(b.shape) > 1)
    batch = math.prod(y.shape[: len(y.shape) - out_rank_mn]) if len(y.shape) > out_rank_mn else 1
    if len(b.shape) <= 2 and len(a.shape) > 2:
        # B shared by every batch (a Linear layer): the kernel is one GEMM with M folded.
        return 1, batch * m, n, k
    return batch, m, n, k


def gemm_matmul(node: OpNode) -> GemmDims | None:
    return _matmul_like(node, 0, 1)


def gemm_qlinear_matmul(node: OpNode) -> GemmDims | None:
    return _matmul_like(node, 0, 3)


def gemm_gemm(node: OpNode) -> GemmDims | None:
    a, y = _inp(node, 0), node.outputs[0]
    if a is None or len(a.shape) != 2 or len(y.shape) != 2:
        return None
    k = a.shape[0] if node.attrs.get("transA", 0) else a.shape[1]
    return 1, y.shape[0], y.shape[1], k


def _conv_like(node: OpNode, x_idx: int, w_idx: int) -> GemmDims | None:
    x, w, y = _inp(node, x_idx), _inp(node, w_idx), node.outputs[0]
    if x is None or w is None or len(x.shape) < 3 or len(w.shape) != len(x.shape):
        return None
    g = int(node.attrs.get("group", 1))
    n, c = x.shape[0], x.shape[1]
    cout = w.shape[0]
    return g, n * math.prod(y.shape[2:]), cout / g, (c / g) * math.prod(w.shape[2:])


def gemm_conv(node: OpNode) -> GemmDims | None:
    return _conv_like(node, 0, 1)


def gemm_qlinear_conv(node: OpNode) -> GemmDims | None:
    return _conv_like(node, 0, 3)


def gemm_conv_transpose(node: OpNode) -> GemmDims | None:
    x, w = _inp(node, 0), _inp(node, 1)
    if x is None or w is None or len(x.shape) < 3 or len(w.shape) != len(x.shape):
        return None
    g = int(node.attrs.get("group", 1))
    n, c = x.shape[0], x.shape[1]
    cout_per_group = w.shape[1]
    return g, cout_per_group * math.prod(w.shape[2:]), n * math.prod(x.shape[2:]), c / g


def gemm_recurrent(node: OpNode) -> GemmDims | None:
    x, w, r = _inp(node, 0), _inp(node, 1), _inp(node, 2)
    if x is None or w is None or r is None or len(x.shape) != 3 or len(w.shape) != 3:
        return None
    steps, batch = ((x.shape[1], x.shape[0]) if node.attrs.get("layout", 0)
                    else (x.shape[0], x.shape[1]))
    directions, gates_hidden, inputs = w.shape
    return directions * steps, batch, gates_hidden, inputs + r.shape[-1]


def _expand_ellipsis(term: str, rank: int, ell_letters: str) -> str | None:
    if "..." not in term:
        return term if len(term) == rank else None
    n_ell = rank - (len(term) - 3)
    if n_ell < 0 or n_ell > len(ell_letters):
        return None
    return term.replace("...", ell_letters[len(ell_letters) - n_ell:] if n_ell else "")


def gemm_einsum(node: OpNode) -> GemmDims | None:
    raw = node.attrs.get("equation", "")
    eq = (raw.decode() if isinstance(raw, bytes) else str(raw)).replace(" ", "")
    if "->" not in eq:
        return None
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    ins = [t for t in node.inputs if t is not None]
    if len(terms) != 2 or len(ins) != 2:
        return None
    ell = "".join(chr(c) for c in range(0x3B1, 0x3B1 + 8))  # Greek letters never used by ONNX
    ta = _expand_ellipsis(terms[0], len(ins[0].shape), ell)
    tb = _expand_ellipsis(terms[1], len(ins[1].shape), ell)
    to = _expand_ellipsis(out, len(node.outputs[0].shape), ell) if "..." in out else out
    if ta is None or tb is None or to is None:
        return None
    if len(set(ta)) != len(ta) or len(set(tb)) != len(tb) or len(set(to)) != len(to):
        return None
    size: dict[str, int] = {}
    for term, t in ((ta, ins[0]), (tb, ins[1])):
        for idx, d in zip(term, t.shape, strict=True):
            size[idx] = max(size.get(idx, 1), d)
    sa, sb, so = set(ta), set(tb), set(to)
    if (sa - sb - so) or (sb - sa - so) or (so - sa - sb):
        return None  # an index summed away inside one operand: not a plain contraction
    batch = math.prod(size[i] for i in sa & sb & so)
    m = math.prod(size[i] for i in (sa & so) - sb)
    n = math.prod(size[i] for i in (sb & so) - sa)
    k = math.prod(size[i] for i in (sa & sb) - so)
    return batch, m, n, k
