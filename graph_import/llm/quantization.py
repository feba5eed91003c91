"""A ``config.json``'s ``quantization_config`` -> the dtype its weights are stored in.

One reader per ``quant_method`` (``QUANT_METHODS``): ``fp8`` (``weight_block_size``: the
block-scaled ``fp8_block``), ``mxfp4`` (gpt-oss), ``modelopt`` (NVIDIA ModelOpt:
``quant_algo`` FP8 / NVFP4), ``compressed-tensors`` (vLLM llm-compressor: its first config
group's weights, 8-bit float -> fp8, 4-bit float -> nvfp4, 4/8-bit int -> int4/int8),
``awq`` and ``gptq`` (``bits`` 4 / 8). An unknown method is refused in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from roofcast.graph_import.errors import LLMConfigError

Method = Callable[[Mapping[str, Any]], str | None]


def _fp8(q: Mapping[str, Any]) -> str:
    return "fp8_block" if q.get("weight_block_size") else "fp8"


def _modelopt(q: Mapping[str, Any]) -> str | None:
    return {"FP8": "fp8", "NVFP4": "nvfp4", "W4A16_AWQ": "int4"}.get(
        str(q.get("quant_algo", "")).upper())


def _bits(q: Mapping[str, Any]) -> str | None:
    return {4: "int4", 8: "int8"}.get(q.get("bits", q.get("w_bit")))


def _compressed(q: Mapping[str, Any]) -> str | None:
    if "nvfp4" in str(q.get("format", "")):
        return "nvfp4"
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        return None
    w = next(iter(groups.values()))
    w = w.get("weights") if isinstance(w, Mapping) else None
    if not isinstance(w, Mapping):
        return None
    return {("float", 8): "fp8", ("float", 4): "nvfp4", ("int", 4): "int4",
            ("int", 8): "int8"}.get((w.get("type"), w.get("num_bits")))


QUANT_METHODS: dict[str, Method] = {
    "fp8": _fp8, "mxfp4": lambda q: "mxfp4", "modelopt": _modelopt,
    "compressed-tensors": _compressed, "awq": _bits, "gptq": _bits,
}


def weight_dtype(config: Mapping[str, Any], where: str) -> tuple[str, str]:
    """(weight dtype, note) of ``config``'s ``quantization_config``; ("", "") without one."""
    q = config.get("quantization_config")
    if q is None:
        return "", ""
    method = q.get("quant_method") if isinstance(q, Mapping) else None
    fn = QUANT_METHODS.get(method) if isinstance(method, str) else None
    dtype = fn(q) if fn is not None and isinstance(q, Mapping) else None
    if dtype is None:
        shown = repr(method)[:40]
        raise LLMConfigError(
            f"{where}: quantization_config {shown} is not a weight format roofcast models "
            f"(known: {', '.join(QUANT_METHODS)}); remove it and pass --weights instead")
    return dtype, (f"weights stored as {dtype} (quantization_config {method}); predictions "
                   "use it unless --weights says otherwise")
