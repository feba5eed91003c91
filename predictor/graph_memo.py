"""Per-process memo of pure per-graph results: ``memo(graph, key, build)``.

What does not depend on the devices — the kernel plan, the workload table, the memory footprint
of (graph, ``RunConfig``, ``ExecutionProfile``) — is built once per process, so a sweep's next
device slice of the same model reuses it. Only a graph whose ``nx_graph`` is frozen (every
imported graph) is memoised; entries are keyed by the graph's identity (a weak reference guards
against a reused id) and a hashable ``key``; at most ``MAX_ENTRIES``, least recently used dropped
first. Callers must not modify what they get back.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import networkx as nx

from roofcast.graph_import.types import Graph

T = TypeVar("T")
MAX_ENTRIES = 512
_LOCK = threading.Lock()  # Dask workers may run tasks on several threads
_MEMO: OrderedDict[tuple[int, int, Hashable], tuple[weakref.ref, Any]] = OrderedDict()


def memo(graph: Graph, key: Hashable, build: Callable[[], T]) -> T:
    """``build()``, kept per (graph, ``key``) when the graph is frozen (module docstring)."""
    if not nx.is_frozen(graph.nx_graph):
        return build()
    slot = (id(graph), id(graph.nx_graph), key)
    with _LOCK:
        hit = _MEMO.get(slot)
        if hit is not None and hit[0]() is graph:
            _MEMO.move_to_end(slot)
            return hit[1]
    value = build()  # outside the lock: two threads may build the same value, both correct
    with _LOCK:
        _MEMO[slot] = (weakref.ref(graph), value)
        _MEMO.move_to_end(slot)
        while len(_MEMO) > MAX_ENTRIES:
            _MEMO.popitem(last=False)
    return value


def clear() -> None:
    """Forget every entry (benchmarks timing a cold start)."""
    with _LOCK:
        _MEMO.clear()
