"""ONNX Runtime's graph-optimisation levels by the names roofcast's measurements use.

``OPT_LEVELS`` are the names (``MeasureConfig.opt_level``, ``roofcast measure --opt-level``);
``graph_optimization_level(name)`` is ORT's enum for one. onnxruntime is imported only by that
call, so the CLI can list the names without loading it.
"""

from __future__ import annotations

from typing import Any

#: level name -> ``onnxruntime.GraphOptimizationLevel`` member.
_ORT_MEMBERS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
                "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
OPT_LEVELS: tuple[str, ...] = tuple(_ORT_MEMBERS)


def graph_optimization_level(name: str) -> Any:
    """ORT's ``GraphOptimizationLevel`` for a level name of ``OPT_LEVELS``."""
    import onnxruntime as ort

    return getattr(ort.GraphOptimizationLevel, _ORT_MEMBERS[name])
