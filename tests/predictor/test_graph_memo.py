"""``predictor.graph_memo`` and ``Graph.order``: what a sweep keeps per imported graph is kept
only for frozen graphs, per key, never for a dead graph, and within its bound."""

from __future__ import annotations

import gc

import networkx as nx
import pytest

from roofcast.predictor import graph_memo
from tests.predictor.graph_helpers import graph, op, t


def _chain(name: str = "g"):
    a, b, c = t("a", 4), t("b", 4), t("c", 4)
    return graph([op("n2", "Relu", [b], [c]), op("n1", "Relu", [a], [b])], [a], [c], name=name)


@pytest.fixture(autouse=True)
def _empty_memo():
    graph_memo.clear()
    yield
    graph_memo.clear()


def test_frozen_graph_keeps_its_value_per_key_and_unfrozen_rebuilds():
    g = _chain()
    calls = []

    def build():
        calls.append(1)
        return object()

    assert graph_memo.memo(g, "k", build) is not graph_memo.memo(g, "k", build)  # unfrozen
    nx.freeze(g.nx_graph)
    first = graph_memo.memo(g, "k", build)
    assert graph_memo.memo(g, "k", build) is first
    assert graph_memo.memo(g, "other", build) is not first
    assert len(calls) == 4


def test_a_dead_graph_entry_is_never_returned_and_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(graph_memo, "MAX_ENTRIES", 3)
    g = _chain()
    nx.freeze(g.nx_graph)
    graph_memo.memo(g, "k", lambda: "old")
    slot = next(iter(graph_memo._MEMO))
    del g
    gc.collect()
    h = _chain()
    nx.freeze(h.nx_graph)
    # even if the new graph got the dead one's id, its weak reference tells them apart
    graph_memo._MEMO[(id(h), id(h.nx_graph), "k")] = graph_memo._MEMO.pop(slot)
    assert graph_memo.memo(h, "k", lambda: "new") == "new"
    for i in range(5):
        graph_memo.memo(h, i, lambda i=i: i)
    assert len(graph_memo._MEMO) == 3


def test_order_is_the_topological_sort_and_kept_only_when_frozen():
    g = _chain()
    assert g.order() == tuple(nx.topological_sort(g.nx_graph)) == ("n1", "n2")
    assert "_order" not in g.__dict__  # unfrozen: sorted on every call
    nx.freeze(g.nx_graph)
    assert [o.name for o in g.ops()] == ["n1", "n2"]
    assert g.__dict__["_order"][1] == ("n1", "n2")
    assert g.order() is g.order()


def test_imported_graphs_are_frozen():
    from roofcast.predictor.sweeps.family_graph import graph_cache

    g = graph_cache("mobilenet_v2", (), 1, "")
    assert nx.is_frozen(g.nx_graph)
    assert [o.name for o in g.ops()] == [g.nx_graph.nodes[n]["op"].name
                                         for n in nx.topological_sort(g.nx_graph)]
