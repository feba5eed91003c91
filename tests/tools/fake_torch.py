"""A stand-in ``torch`` for loading the GPU collectors on a machine without CUDA.

It keeps one GPU clock in milliseconds: an eager call of a ``kernel(ms)`` costs ``ms`` plus
``DISPATCH_MS`` (PyTorch's launch), a replay of a captured CUDA graph costs only its kernels'
``ms``; CUDA events read the clock. So the timing code's arithmetic (repeats, per-call division,
warm-ups, capture, failure paths) can be checked exactly; no GPU behaviour is claimed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import types
from pathlib import Path

DISPATCH_MS = 0.5
TOOLS = Path(__file__).resolve().parents[2] / "tools"


class Clock:
    def __init__(self) -> None:
        self.ms, self.calls, self.capturing, self.refuse_capture = 0.0, 0, None, False

    def kernel(self, ms: float) -> None:
        """One eager call of a ``ms`` kernel (recorded instead while a graph is captured)."""
        self.calls += 1
        if self.capturing is not None:
            self.capturing.kernels_ms.append(ms)
        else:
            self.ms += ms + DISPATCH_MS


def fake_torch(clock: Clock) -> types.ModuleType:
    """A module with the parts of ``torch``/``torch.cuda`` the collectors touch at import and in
    their timing code."""

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.at = None

        def record(self) -> None:
            self.at = clock.ms

        def elapsed_time(self, end: Event) -> float:
            return end.at - self.at

    class CUDAGraph:
        def __init__(self) -> None:
            self.kernels_ms: list[float] = []

        def replay(self) -> None:
            clock.ms += sum(self.kernels_ms)

    @contextlib.contextmanager
    def graph(g: CUDAGraph):
        if clock.refuse_capture:
            raise RuntimeError("operation not permitted when stream is capturing")
        clock.capturing = g
        try:
            yield
        finally:
            clock.capturing = None

    stream = types.SimpleNamespace(wait_stream=lambda other: None)
    props = types.SimpleNamespace(name="Fake GPU", multi_processor_count=7,
                                  total_memory=8 << 30, L2_cache_size=4 << 20)
    cuda = types.SimpleNamespace(
        Event=Event, CUDAGraph=CUDAGraph, graph=graph, synchronize=lambda: None,
        Stream=lambda: stream, current_stream=lambda: stream,
        stream=lambda s: contextlib.nullcontext(), get_device_properties=lambda i: props,
        is_available=lambda: False, empty_cache=lambda: None)
    torch = types.ModuleType("torch")
    torch.__version__ = "0.fake"
    torch.cuda = cuda
    torch.version = types.SimpleNamespace(cuda="0.0")
    torch.backends = types.SimpleNamespace(
        cudnn=types.SimpleNamespace(version=lambda: 1), cuda=types.SimpleNamespace())
    torch.nn = types.ModuleType("torch.nn")
    torch.nn.functional = types.ModuleType("torch.nn.functional")
    return torch


def load_tools(monkeypatch, clock: Clock, *scripts: str) -> list[types.ModuleType]:
    """``tools/cuda_timing.py`` then each collector script, loaded fresh against the fake
    ``torch`` (the collectors find ``cuda_timing`` beside them as when run as scripts); the
    caller removes ``cuda_timing`` from ``sys.modules`` afterwards."""
    torch = fake_torch(clock)
    for name, module in (("torch", torch), ("torch.nn", torch.nn),
                         ("torch.nn.functional", torch.nn.functional)):
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules.pop("cuda_timing", None)
    monkeypatch.syspath_prepend(str(TOOLS))
    out = [importlib.import_module("cuda_timing")]
    for script in scripts:
        spec = importlib.util.spec_from_file_location(f"fake_torch_{script}", TOOLS / script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out.append(module)
    return out
