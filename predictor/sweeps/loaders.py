"""What a spec's texts name, loaded once per process and shared by the sweep families.

* ``model_source(model, root)``: an ``.onnx`` path (relative to the spec's folder ``root``) or a
  zoo name -> the file;
* ``llm_cache(model, root)``: an LLM text — a ``.json`` path (relative to ``root``),
  ``llm:NAME`` or a bundled name / HF id — -> its ``LLMArch`` (LRU);
* ``system_cache(hardware, devices)``: a ``system:ID`` entry (``devices`` None) -> its
  ``SystemSpec``, or ``devices`` of a device text -> the ad-hoc system
  (``hw_catalog.systems.resolve_system``) (LRU);
* ``system_device(hardware)``: the device id of a ``system:`` entry ("" when the system is
  unknown: that is the cell's error), the text itself for a device entry.

A Dask worker is one process: it loads each config and system once, whatever tasks it runs.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.load import load_llm
from roofcast.hw_catalog.systems import get_system, resolve_system
from roofcast.models import resolve_model_path
from roofcast.predictor.model_source import LLM_PREFIX
from roofcast.predictor.sweeps.types import SYSTEM_PREFIX

__all__ = ["LLM_PREFIX", "llm_cache", "model_source", "system_cache", "system_device"]

#: LLM configs kept per process (an ``LLMArch`` is a few kB)
ARCH_CACHE_SIZE = 64
#: systems kept per process ((hardware text, devices) -> SystemSpec)
SYSTEM_CACHE_SIZE = 1024


def _relative(path_text: str, root: str) -> Path:
    path = Path(path_text)
    return path if path.is_absolute() or not root else Path(root) / path


def model_source(model: str, root: str) -> Path:
    """A spec model: an ``.onnx`` path (relative to the spec's folder) or a zoo name."""
    if model.endswith(".onnx"):
        return _relative(model, root)
    return resolve_model_path(model)


@lru_cache(maxsize=ARCH_CACHE_SIZE)
def llm_cache(model: str, root: str) -> LLMArch:
    """The ``LLMArch`` of a spec's LLM text: ``.json`` (relative to ``root``), ``llm:NAME``
    or a bundled name (per-process cache)."""
    if model.endswith(".json"):
        return load_llm(_relative(model, root))
    return load_llm(model.removeprefix(LLM_PREFIX))


@lru_cache(maxsize=SYSTEM_CACHE_SIZE)
def system_cache(hardware: str, devices: int | None) -> Any:
    """The ``SystemSpec`` of a hardware entry: ``system:ID`` (``devices`` None) or ``devices``
    of a device text (``resolve_system``)."""
    if hardware.startswith(SYSTEM_PREFIX):
        return get_system(hardware.removeprefix(SYSTEM_PREFIX))
    return resolve_system(hw=hardware, devices=devices)


def system_device(hardware: str) -> str:
    """The ``device`` column of a cell on ``hardware`` (module docstring)."""
    if not hardware.startswith(SYSTEM_PREFIX):
        return hardware
    try:
        return system_cache(hardware, None).device
    except Exception:  # an unknown system: the cell's own error says so
        return ""
