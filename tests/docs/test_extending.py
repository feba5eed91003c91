"""Every recipe of ``docs/extending.md``, followed as written: its ``# recipe:`` block is read from
the file, saved where the recipe says (a temporary user folder) or run (Python blocks register
through the real registries, and are unregistered afterwards), then something is predicted
with the result."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from onnx import TensorProto, helper

import roofcast
from roofcast.graph_import.costs import registry
from roofcast.graph_import.llm import families

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
BLOCK = re.compile(r"```(\w+)\n# recipe: ([\w-]+)[^\n]*\n(.*?)```", re.S)


def recipes() -> dict[str, str]:
    """Recipe name -> the code of its block (without the marker line)."""
    return {name: code for _, name, code in BLOCK.findall(DOC.read_text())}


def test_every_recipe_the_guide_promises_is_there():
    assert set(recipes()) == {"op", "device", "system", "runtime", "engine", "estimator",
                              "llm-family"}


def _one_node(op_type: str, x_shape: list[int], y_shape: list[int]) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["y"], name="n")], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.fixture
def det_registered():
    exec(recipes()["op"], {})
    yield
    del registry._SPECS[("", "Det")]


def test_op_recipe_costs_the_new_op(det_registered):
    model = roofcast.load_model(_one_node("Det", [8, 16, 16], [8]))
    p = roofcast.predict(model, "h100-sxm")
    row = p.per_op.set_index("op_type").loc["Det"]
    assert row["flops"] == pytest.approx(8 * 2 / 3 * 16**3)
    assert row["time_s"] > 0


def test_device_recipe_gives_a_device_to_predict_on(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(tmp_path))
    (tmp_path / "my-gpu.toml").write_text(recipes()["device"])
    assert roofcast.device("my-gpu").name == "My GPU"
    p = roofcast.predict(roofcast.load_model("resnet50"), "my-gpu", precision="fp16")
    assert p.total_s > 0


def test_system_recipe_gives_a_system_to_serve_on(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFCAST_SYSTEMS_DIR", str(tmp_path))
    (tmp_path / "my-l4-box.toml").write_text(recipes()["system"])
    assert "my-l4-box" in set(roofcast.systems()["id"])
    p = roofcast.llm("llama-3.1-8b", system="my-l4-box", tp=4, input_tokens=256, output_tokens=16)
    assert p.tpot_s > 0


def test_runtime_recipe_gives_a_runtime_to_predict_with():
    folder = Path(os.environ["ROOFCAST_RUNTIME_DIR"])  # the suite's own empty user folder
    (folder / "my-runtime.toml").write_text(recipes()["runtime"])
    assert "my-runtime" in {r.name for r in roofcast.runtimes()}
    p = roofcast.predict(roofcast.load_model("resnet50"), "l4", runtime="my-runtime",
                         precision="fp16")
    assert p.runtime == "my-runtime"
    assert p.total_s > 0


def test_engine_recipe_gives_a_serving_engine():
    exec(recipes()["engine"], {})
    p = roofcast.llm("llama-3.1-8b", "h100-sxm", runtime="my-engine", input_tokens=256,
                     output_tokens=16)
    assert p.tpot_s > 0
    assert any("not fitted to serving runs" in note for note in p.notes)  # what it promises


def test_estimator_recipe_predicts_through_the_api():
    scope: dict = {}
    exec(recipes()["estimator"], scope)
    model = roofcast.load_model("resnet50")
    mine = roofcast.predict(model, "h100-sxm", estimator=scope["HalfOverlap"]())
    assert mine.estimator == "half-overlap"
    # slower than the roofline's full overlap, which it adds half the shorter term and L to
    assert roofcast.predict(model, "h100-sxm", estimator="roofline").total_s < mine.total_s


@pytest.fixture
def toyllm_registered():
    exec(recipes()["llm-family"], {})
    yield
    del families.READERS["toyllm"]


def test_llm_family_recipe_reads_a_config_of_the_new_type(toyllm_registered, tmp_path):
    config = {"model_type": "toyllm", "num_hidden_layers": 4, "hidden_size": 512,
              "num_attention_heads": 8, "intermediate_size": 1376, "vocab_size": 32000,
              "max_position_embeddings": 2048}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    p = roofcast.llm(str(path), "h100-sxm", input_tokens=128, output_tokens=8)
    assert p.ttft_s > 0

