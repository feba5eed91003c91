"""Kernel fusions a serving engine runs in its decoder layers, applied to a step's rows.

A profile lists them (``[serving] fused_kernels``); ``fuse(rows, names)`` applies each. Every
fusion works inside one layer group (same step and key prefix; ``count`` layers each):

* ``add-norm``: the residual ``Add`` runs inside the next RMSNorm/LayerNorm (vLLM's
  ``fused_add_rms_norm``, SGLang's and TensorRT-LLM's ``fused_add_rmsnorm``): one kernel reading
  both addends and writing the new residual and the normed output, so the sum is not read back:
  bytes read ``add_read + norm_read - add_written``, written ``add_written + norm_written``.
  ``residual1`` joins ``norm2``, ``residual2`` the next layer's ``norm1`` (the same row of a
  repeated layer; the last layer's joins the final norm, one kernel per step not modelled).
* ``rope-kv-in-attention``: rotary embedding and the KV-cache write run in the attention op's
  QKV preprocessing (TensorRT-LLM's attention op): their rows go; the attention kernel's time
  (its engine table, or the kernel model trained on them) already holds that work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError

_NORMS = ("RMSNormalization", "LayerNormalization")
#: residual Add -> the norm it joins (``add-norm``).
_ADD_INTO = {"residual1": "norm2", "residual2": "norm1"}


def _groups(rows: pd.DataFrame) -> dict[tuple[str, str], np.ndarray]:
    """(step, layer prefix) -> positions of that layer group's rows."""
    prefix = rows["node"].astype(str).str.extract(r"^(k\d+\.)?", expand=False).fillna("")
    pos = np.flatnonzero(rows["scope"].to_numpy(object) == "layer")
    keys = pd.Series(list(zip(rows["step"].astype(str), prefix, strict=True))).iloc[pos]
    return {k: pos[i] for k, i in keys.groupby(keys).indices.items()}


def add_norm(rows: pd.DataFrame) -> pd.DataFrame:
    """``add-norm`` (module docstring)."""
    drop, nodes = [], rows["node"].astype(str).to_numpy(object)
    read, written = rows["bytes_read"].to_numpy(float).copy(), \
        rows["bytes_written"].to_numpy(float).copy()
    flops = rows["flops"].to_numpy(float).copy()
    for (_, prefix), idx in _groups(rows).items():
        where = {str(nodes[i])[len(prefix):]: i for i in idx}
        for add, norm in _ADD_INTO.items():
            a, n = where.get(add), where.get(norm)
            if a is None or n is None or rows["op_type"].iat[n] not in _NORMS:
                continue
            read[n] += read[a] - written[a]
            written[n] += written[a]
            flops[n] += flops[a]
            drop.append(a)
    out = rows.assign(bytes_read=read, bytes_written=written, flops=flops)
    return out.drop(index=out.index[drop]).reset_index(drop=True)


def rope_kv_in_attention(rows: pd.DataFrame) -> pd.DataFrame:
    """``rope-kv-in-attention`` (module docstring): only in groups with a fused attention."""
    drop, nodes = [], rows["node"].astype(str).to_numpy(object)
    ops = rows["op_type"].to_numpy(object)
    for (_, prefix), idx in _groups(rows).items():
        if not (ops[idx] == "Attention").any():
            continue
        drop += [i for i in idx if str(nodes[i])[len(prefix):] in ("rotary", "kv_write")]
    return rows.drop(index=rows.index[drop]).reset_index(drop=True)


#: fusion name -> its row transform.
FUSIONS: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "add-norm": add_norm, "rope-kv-in-attention": rope_kv_in_attention}


def fuse(rows: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """``rows`` with the fusions ``names`` applied in order."""
    rows = rows.reset_index(drop=True)
    for name in names:
        if name not in FUSIONS:
            raise PredictionError(f"unknown serving fusion {name!r}; known: {sorted(FUSIONS)}")
        rows = FUSIONS[name](rows)
    return rows
