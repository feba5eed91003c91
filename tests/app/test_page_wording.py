"""``app.wording``: the library's advice (shared with the CLI, so it names flags) rewritten to
name the app's controls. The messages are produced by the library itself, so a reworded library
message that the table no longer matches fails here instead of reaching a page with a flag."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from roofcast.app.model_ref import load_graph
from roofcast.app.wording import cli_flags, in_app_words, incomplete_message
from roofcast.graph_import import import_model
from roofcast.graph_import.errors import ModelImportError
from roofcast.predictor.advisor import advise
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.simulate import predict_graph


def two_dim_model() -> bytes:
    """x[a, b] @ w[b?]: two symbolic dims, one MatMul."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", 16])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["b", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", 8])
    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                               helper.make_node("Relu", ["z"], ["r"], name="relu")],
                              "two", [x, z], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def library_messages() -> list[str]:
    """User messages the library raises or records, each naming CLI flags."""
    out = []
    graph = import_model(two_dim_model(), name="two")
    out += list(graph.unresolved.values())  # "bind it, e.g. --dim a=1"
    with pytest.raises(PredictionError) as exc:
        predict_graph(graph, "h100-sxm", RunConfig(dims={"batch": 1}))
    out.append(str(exc.value))  # "--dim NAME=VALUE (or --batch N) ... (--allow-incomplete)"
    with pytest.raises(PredictionError) as exc:
        advise(lambda _b: load_graph("mobilenet_v2", [], 1), "h100-sxm", "throughput",
               max_batch=4, estimator="roofline")
    out.append(str(exc.value))  # "--dim NAME=N ... or use --objective latency"
    gpt2 = load_graph("gpt2", ["sequence=4096"], 1)
    out += list(gpt2.unresolved.values())  # "check that the --dim values are within ..."
    with pytest.raises((PredictionError, ModelImportError, ValueError)) as exc:
        RunConfig(dims={"batch": 0})
    out.append(str(exc.value))
    return out


def test_library_messages_name_flags_and_the_app_words_name_none():
    messages = library_messages()
    assert all(cli_flags(m) for m in messages[:-1]), messages  # the library's words: flags
    for message in messages:
        shown = in_app_words(message)
        assert cli_flags(shown) == [], (message, shown)
    joined = " ".join(in_app_words(m) for m in messages)
    assert "Model page" in joined
    assert "choose the latency objective" in joined


def test_in_app_words_keeps_the_dim_names_and_values():
    assert in_app_words("bind it, e.g. --dim sequence=128") == \
        "bind it, e.g. sequence = 128 on the Model page"
    assert in_app_words("bind them (--dim a=1, --dim b=1)") == \
        "bind them (give each a size on the Model page)"
    assert in_app_words("no flag here") == "no flag here"


def test_an_unknown_flag_stays_visible():
    assert cli_flags(in_app_words("retry with --frobnicate")) == ["--frobnicate"]


def test_incomplete_message():
    assert incomplete_message("m", (), {}, {}) is None
    text = incomplete_message("m", ("a", "b"), {"mm": "x"}, {"Foo": 2})
    assert text.startswith("m cannot be fully costed")
    assert "symbolic dims a, b have no size: give each one on the Model page" in text
    assert "mm" not in text  # unresolved nodes follow from the unbound dims
    assert "Foo ×2" in text
    text = incomplete_message("m", (), {"n2": "why 2", "n1": "bind it, e.g. --dim s=1"}, {})
    assert "2 node(s) have no concrete shapes (e.g. 'n1': bind it, e.g. s = 1 on the Model " \
           "page)" in text
    assert cli_flags(text) == []


#: the modules whose strings reach the app's pages (docstrings excepted).
UI_MODULES = ("views/*.py", "streamlit_app.py", "charts.py", "state.py", "controls.py",
              "wording.py", "worker.py", "parallel_report.py")


def ui_strings() -> list[tuple[str, int, str]]:
    """(file, line, text) of every string constant of ``UI_MODULES`` that is not a docstring."""
    import ast
    from pathlib import Path

    from roofcast import app

    root = Path(app.__file__).parent
    found = []
    for path in sorted(p for pattern in UI_MODULES for p in root.glob(pattern)):
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)}
        found += [(path.name, n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and id(n) not in docs]
    return found


def test_no_rst_in_ui_strings():
    """The pages write Markdown: an RST literal (two backticks) shows its backticks."""
    strings = ui_strings()
    assert len(strings) > 100  # the scan reads the modules
    assert [(f, line, s) for f, line, s in strings if "``" in s] == []


def test_inline_code_is_never_an_empty_code_span():
    from roofcast.app.wording import inline_code

    assert inline_code("llama-3.1-8b") == "`llama-3.1-8b`"
    assert inline_code("") == "*none chosen*"
    assert inline_code(None, "none loaded") == "*none loaded*"
