"""Every op type used by a bundled zoo model has a cost rule or is an explicit free op.

Reads only the node lists of the committed zoo files (weightless; external data not loaded), so
it stays fast; the full import of each zoo model is tested with the zoo itself.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from roofcast.graph_import.costs import FREE_OPS, registered_ops

ZOO_DIR = Path(__file__).resolve().parents[3] / "training_data" / "zoo"
ZOO_FILES = sorted(ZOO_DIR.rglob("*.onnx")) if ZOO_DIR.is_dir() else []


def _op_types(path: Path) -> set[tuple[str, str]]:
    model = onnx.load(str(path), load_external_data=False)
    found: set[tuple[str, str]] = set()
    graphs = [model.graph]
    while graphs:
        g = graphs.pop()
        for node in g.node:
            domain = "" if node.domain in ("", "ai.onnx") else node.domain
            found.add((domain, node.op_type))
            for attr in node.attribute:
                if attr.HasField("g"):
                    graphs.append(attr.g)
                graphs.extend(attr.graphs)
    return found


@pytest.mark.skipif(not ZOO_FILES, reason="no zoo models in training_data/zoo")
@pytest.mark.parametrize("path", ZOO_FILES, ids=[p.stem for p in ZOO_FILES])
def test_zoo_model_ops_all_have_cost_rules(path):
    known = set(registered_ops()) | {("", op) for op in FREE_OPS}
    missing = sorted(f"{d or 'ai.onnx'}::{op}" for d, op in _op_types(path) - known)
    assert missing == []
