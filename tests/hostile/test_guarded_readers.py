"""Property tests (Hypothesis) of the guarded TOML/JSON loader (``hw_catalog.safe_load``) and
the confined-path check (``hw_catalog.confined.confined_path``): for any input the loader
returns what ``tomllib``/``json`` would or raises the caller's error in one line, quickly; the
path check never returns a path outside its folder and never opens anything."""

from __future__ import annotations

import json
import os
import time
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofcast.hw_catalog.confined import confined_path
from roofcast.hw_catalog.safe_load import MAX_NESTING, load_json, load_toml, nesting_depth


class RefusedError(Exception):
    pass


Refused = RefusedError


def attempt(fn, *args, **kwargs) -> tuple[bool, object]:
    """(True, the result) or (False, the refusal's message)."""
    try:
        return True, fn(*args, **kwargs)
    except RefusedError as exc:
        return False, str(exc)


FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=30)


@FAST
@given(_json_values)
def test_json_round_trips(value):
    assert load_json(json.dumps(value), "x", error=Refused) == value


@FAST
@given(st.binary(max_size=400) | st.text(max_size=400))
def test_any_bytes_parse_or_refuse_in_one_line(data):
    for load in (load_json, load_toml):
        ok, out = attempt(load, data, "label", error=Refused)
        if not ok:
            assert "\n" not in out
            assert out.startswith("label")


@FAST
@given(st.integers(1, 20_000), st.sampled_from(["[", "{\"a\":"]))
def test_deep_json_is_refused_not_a_traceback(depth, opener):
    closer = "]" if opener == "[" else "}"
    text = opener * depth + "1" + closer * depth
    if depth <= MAX_NESTING:
        load_json(text, "x", error=Refused)
    else:
        with pytest.raises(Refused, match="nested too deeply"):
            load_json(text, "x", error=Refused)


@FAST
@given(st.integers(1, 20_000))
def test_deep_toml_arrays_and_keys_are_refused(depth):
    arrays = "a = " + "[" * depth + "]" * depth
    keys = "k" + ".k" * depth + " = 1"
    for text, deep in ((arrays, depth > MAX_NESTING), (keys, depth >= 32)):
        start = time.perf_counter()
        if deep:
            with pytest.raises(Refused):
                load_toml(text, "x", error=Refused)
        else:
            assert isinstance(load_toml(text, "x", error=Refused), dict)
        assert time.perf_counter() - start < 5


@FAST
@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True),
                       st.integers(-10**6, 10**6)
                       | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=10)
                       | st.lists(st.integers(0, 9), max_size=5), max_size=6))
def test_toml_documents_parse_like_tomllib(doc):
    from roofcast.hw_catalog.tomlwrite import dumps

    text = dumps(doc)
    assert load_toml(text, "x", error=Refused) == tomllib.loads(text)


def test_brackets_inside_strings_and_comments_do_not_count():
    text = 'a = "[[[[[[[[" # {{{{{{{{{{{{\nb = \'\'\'[[[[\n]]]\'\'\'\n[t]\nc = [[1], [2]]\n'
    assert nesting_depth(text) == 2
    load_toml("x = '" + "[" * 500 + "'\n" + "# " + "{" * 500, "x", error=Refused)


def test_size_cap():
    with pytest.raises(Refused, match="over the 10-byte limit"):
        load_json(b"[" + b" " * 20 + b"]", "x", error=Refused, max_bytes=10)


# ----------------------------------------------------------------------------- confined_path
@pytest.fixture
def tree(tmp_path):
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    (home / "a.onnx").write_bytes(b"x")
    (home / "sub" / "b.json").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    os.symlink(outside / "secret.json", home / "out.json")
    os.symlink(outside, home / "outdir")
    os.symlink(home / "a.onnx", home / "in.onnx")
    os.symlink("loop", home / "loop")
    os.mkfifo(home / "pipe.onnx")
    return home


_parts = st.sampled_from(["a.onnx", "sub", "b.json", "..", ".", "out.json", "outdir",
                          "secret.json", "in.onnx", "loop", "pipe.onnx", "", "/", "~",
                          "\x00", "\x1b", "outside", "home", "A.ONNX"])


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_parts, min_size=1, max_size=6))
def test_confined_path_never_leaves_its_folder_nor_opens(tree, monkeypatch, parts):
    text = "/".join(parts)
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    try:
        ok, got = attempt(confined_path, text, tree, what="model file", error=Refused)
    finally:
        monkeypatch.setattr(os, "open", real_open)
    if ok:
        assert got.is_relative_to(tree.resolve())
        assert got.is_file()
        assert not Path(text).is_absolute()
    else:
        assert "\n" not in got
    assert opened == []


def test_confined_path_cases(tree):
    assert confined_path("in.onnx", tree, what="m", error=Refused) == (tree / "a.onnx").resolve()
    assert confined_path("sub/../a.onnx", tree, what="m", error=Refused).name == "a.onnx"
    for text, why in (("out.json", "leads outside"), ("outdir/secret.json", "leads outside"),
                      ("pipe.onnx", "FIFO"), ("sub", "a folder"), ("loop", "looping"),
                      ("/etc/passwd", "absolute"), ("nope.onnx", "no m there")):
        with pytest.raises(Refused, match=why):
            confined_path(text, tree, what="m", error=Refused)
    assert confined_path("sub", tree, what="m", error=Refused, allow_dir=True).is_dir()


# ----------------------------------------------------------------------------- the readers
@pytest.mark.parametrize("body", ["a" + ".a" * 30_000 + " = 1\n",
                                  "x = " + "[" * 5000 + "]" * 5000 + "\n"])
def test_runtime_profile_goes_through_the_guarded_loader(tmp_path, body):
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.runtimes import catalog

    (tmp_path / "evil.toml").write_text(body)
    start = time.perf_counter()
    with pytest.raises(PredictionError, match="not a valid TOML runtime profile") as err:
        catalog._read(tmp_path / "evil.toml", tmp_path)
    assert time.perf_counter() - start < 5
    assert "\n" not in str(err.value)


def test_export_writes_atomically_and_never_through_a_link(tmp_path):
    from roofcast.training_data.errors import MeasurementError
    from roofcast.training_data.store import Store

    store = Store(tmp_path / "m.sqlite")
    out = tmp_path / "out.csv"
    out.write_text("old")
    assert store.export(out) == 0
    assert "device_id" in out.read_text()  # the header replaced the old text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    mine = tmp_path / "mine.txt"
    mine.write_text("keep")
    (tmp_path / "l.csv").symlink_to(mine)
    with pytest.raises(MeasurementError, match="symbolic link"):
        store.export(tmp_path / "l.csv")
    assert mine.read_text() == "keep"
