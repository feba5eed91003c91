"""The imported-graph cache: a hit equals a fresh import; bad entries are ignored and rewritten."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from roofcast.graph_import import graph_cache, import_model
from roofcast.graph_import.graph_codec import encode, same_graph
from roofcast.graph_import.source import DEFAULT_MAX_BYTES, read_source
from tests.graph_import.import_helpers import const, make_model


@pytest.fixture
def model_file(tmp_path):
    """A model with a symbolic batch, a folded constant shape, a weight and a float attribute."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 8], np.ones(128, np.float32))
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Reshape", ["h", "shape"], ["r"], name="reshape"),
         helper.make_node("LeakyRelu", ["r"], ["y"], name="act", alpha=0.125)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializers=[w, const("shape", [-1, 4, 2])],
    )
    path = tmp_path / "tiny.onnx"
    onnx.save(model, path)
    return path


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "roofcast" / "graphs"


def _entry(path, dims):
    return graph_cache.key(read_source(path, DEFAULT_MAX_BYTES), dims, path.stem,
                           DEFAULT_MAX_BYTES)


def test_a_hit_equals_a_fresh_import(model_file, cache_dir):
    fresh = import_model(model_file, {"batch": 2})
    with graph_cache.used():
        first = import_model(model_file, {"batch": 2})
        assert graph_cache.read(_entry(model_file, {"batch": 2})) is not None
        hit = import_model(model_file, {"batch": 2})
    assert same_graph(hit, fresh)
    assert same_graph(first, fresh)
    consts = hit.nx_graph.nodes["reshape"]["op"].const_inputs["shape"]
    assert consts.dtype == np.int64
    assert consts.tolist() == [-1, 4, 2]
    assert hit.nx_graph.nodes["act"]["op"].attrs["alpha"] == 0.125
    assert hit.skeleton == fresh.skeleton
    assert len(hit.skeleton) > 0


def test_other_dims_are_another_entry(model_file, cache_dir):
    assert _entry(model_file, {"batch": 2}) != _entry(model_file, {"batch": 4})
    with graph_cache.used():
        two, four = import_model(model_file, {"batch": 2}), import_model(model_file, {"batch": 4})
    assert two.dims == {"batch": 2}
    assert four.dims == {"batch": 4}
    assert len(list(cache_dir.glob("*.json"))) == 2


def test_nothing_is_cached_outside_used(model_file, cache_dir):
    import_model(model_file, {"batch": 2})
    assert graph_cache.folder() is None
    assert not cache_dir.exists()
    with graph_cache.used():
        assert graph_cache.folder() == cache_dir


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],  # truncated
    lambda text: "not json",
    lambda text: text.replace('"MatMul"', '"Conv"', 1).replace('"key": "', '"key": "x', 1),
    lambda text: json.dumps({**json.loads(text), "nodes": [{"name": 3}]}),
])
def test_a_damaged_entry_is_ignored_and_rewritten(model_file, cache_dir, damage):
    with graph_cache.used():
        good = import_model(model_file, {"batch": 2})
        path = cache_dir / f"{_entry(model_file, {'batch': 2})}.json"
        path.write_text(damage(path.read_text()))
        assert graph_cache.read(path.stem) is None
        again = import_model(model_file, {"batch": 2})
        assert graph_cache.read(path.stem) is not None  # rewritten
    assert same_graph(again, good)


def test_a_graph_with_a_value_it_cannot_store_is_not_written(model_file, cache_dir):
    graph = import_model(model_file, {"batch": 2})
    op = graph.nx_graph.nodes["act"]["op"]
    graph.nx_graph = graph.nx_graph.copy()
    graph.nx_graph.nodes["act"]["op"] = replace(op, attrs={"alpha": np.array(["a"], object)})
    assert encode(graph) is None
    with graph_cache.used():
        assert graph_cache.write("k", graph) is False
    assert not cache_dir.exists() or not list(cache_dir.glob("*.json"))


def test_old_entries_are_pruned(model_file, cache_dir, monkeypatch):
    monkeypatch.setattr(graph_cache, "MAX_ENTRIES", 2)
    with graph_cache.used():
        for batch in (1, 2, 3):
            import_model(model_file, {"batch": batch})
            entry = cache_dir / f"{_entry(model_file, {'batch': batch})}.json"
            if batch < 3:  # used long ago, batch 1 first (file times can tie within a tick)
                os.utime(entry, (1000.0 * batch, 1000.0 * batch))
    kept = {p.stem for p in cache_dir.glob("*.json")}
    assert kept == {_entry(model_file, {"batch": b}) for b in (2, 3)}
