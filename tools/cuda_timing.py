"""CUDA timing shared by the GPU collectors (``torch_eager.py``, ``torch_llm_step.py``).

Standalone like them (imports only torch); they import it as a sibling module, so
``python tools/<collector>.py`` works on a GPU machine without roofcast. Times are CUDA-event
milliseconds: ``events_ms`` is the mean of ``iters`` back-to-back calls (for an eager call this
includes PyTorch's dispatch); ``graph_replay`` captures calls once in a CUDA graph whose replay
is GPU time with the launch gaps removed. ``device_env`` names the torch, CUDA and device a CSV
was measured with.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def warm(fn: Callable[[], object], calls: int) -> None:
    """Run ``fn`` ``calls`` times and wait for the GPU (first-call costs out of the timing)."""
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()


def events_ms(fn: Callable[[], object], iters: int) -> float:
    """Mean CUDA-event milliseconds of ``iters`` back-to-back calls of ``fn``."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def graph_replay(fn: Callable[[], object], *, calls: int = 1, side_warmup: int = 1
                 ) -> Callable[[], None]:
    """The replay of a CUDA graph holding ``calls`` calls of ``fn`` (``side_warmup`` calls on a
    side stream first, as capture requires); raises when ``fn`` cannot be captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(side_warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph.replay


def graph_ms(fn: Callable[[], object], iters: int, *, calls: int = 1, side_warmup: int = 1
             ) -> float:
    """Milliseconds of one call of ``fn`` replayed from a CUDA graph of ``calls`` calls: the mean
    of ``iters`` replays (after one untimed replay) divided by ``calls``."""
    replay = graph_replay(fn, calls=calls, side_warmup=side_warmup)
    replay()
    torch.cuda.synchronize()
    return events_ms(replay, iters) / calls


def device_env() -> dict:
    """torch, CUDA and device 0's name, SM count and memory."""
    p = torch.cuda.get_device_properties(0)
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "device": p.name,
            "sm_count": p.multi_processor_count, "total_memory_bytes": p.total_memory}


def now() -> str:
    """The local time a measurement is stamped with."""
    return time.strftime("%Y-%m-%d %H:%M:%S")
