"""Hostile learned-model folders: every case is refused with one clean ``PredictionError``.

Each case copies the shipped model folder into a temp folder and damages it the way an attacker
or a careless user could (``CASES``: the damage and the message expected). Before the
``metadata_schema`` checks, the booster ``file`` entry was followed anywhere (``/etc/passwd``,
``../../etc/hostname``, ``/proc/self/environ`` were opened, a booster elsewhere silently used),
malformed metadata crashed (``RecursionError``, ``AttributeError``, ``KeyError: 'impute'``) and
``floor_s = -1`` or ``NaN`` gave silently wrong or ``None`` totals. The CLI cases check the whole
path: exit code 2, one line, no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned import persistence
from roofcast.predictor.learned.metadata_schema import MAX_METADATA_BYTES
from tests.hostile.helpers import deadline

XGB_KEY = "gpu/matmul"
RIDGE_KEY = "cpu/softmax"  # the shipped model's ridge candidate


# ---------------------------------------------------------------------------- damage
def _edit(fn: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    """Damage that edits the parsed metadata and writes it back."""
    def apply(folder: Path) -> None:
        path = folder / persistence.METADATA
        meta = json.loads(path.read_text())
        fn(meta)
        path.write_text(json.dumps(meta))
    return apply


def _text(old: str, new: str) -> Callable[[Path], None]:
    """Damage that replaces text in metadata.json (for what json.dumps cannot write)."""
    def apply(folder: Path) -> None:
        path = folder / persistence.METADATA
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))
    return apply


def _write(data: bytes) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        (folder / persistence.METADATA).write_bytes(data)
    return apply


def _set(section: str, key: str, field: str, value: Any) -> Callable[[Path], None]:
    def fn(meta: dict[str, Any]) -> None:
        meta[section][key][field] = value
    return _edit(fn)


def _linear(field: str, value: Any = None, drop: bool = False) -> Callable[[Path], None]:
    def fn(meta: dict[str, Any]) -> None:
        linear = meta["models"][RIDGE_KEY]["linear"]
        if drop:
            del linear[field]
        else:
            linear[field] = value(linear[field]) if callable(value) else value
    return _edit(fn)


def _file_entry(name: str, prepare: Callable[[Path], None] | None = None
                ) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        if prepare:
            prepare(folder)
        _set("models", XGB_KEY, "file", name)(folder)
    return apply


def _booster_outside(folder: Path) -> None:
    """A valid booster in another folder, linked from inside (and one in a subfolder)."""
    elsewhere = folder.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    shutil.copy(folder / "gpu__matmul.ubj", elsewhere / "gpu__matmul.ubj")
    os.symlink(elsewhere / "gpu__matmul.ubj", folder / "evil.ubj")


def _subfolder(folder: Path) -> None:
    (folder / "sub").mkdir()
    shutil.copy(folder / "gpu__matmul.ubj", folder / "sub" / "gpu__matmul.ubj")


def _metadata_link_out(folder: Path) -> None:
    outside = folder.parent / "other-metadata.json"
    shutil.move(folder / persistence.METADATA, outside)
    os.symlink(outside, folder / persistence.METADATA)


def _sparse_metadata(folder: Path) -> None:
    with (folder / persistence.METADATA).open("r+b") as fh:
        fh.truncate(MAX_METADATA_BYTES + 1)


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    # --- booster file entries pointing anywhere
    "file=/etc/passwd": (_file_entry("/etc/passwd"), r"plain file name ending in \.ubj"),
    "file=../../etc/hostname": (_file_entry("../../etc/hostname"), r"plain file name"),
    "file=/proc/self/environ": (_file_entry("/proc/self/environ"), r"plain file name"),
    "file=sub/x.ubj": (_file_entry("sub/gpu__matmul.ubj", _subfolder), r"no folders"),
    "file=..": (_file_entry(".."), r"plain file name"),
    "file=/abs/inside.ubj": (lambda f: _file_entry(str(f / "gpu__matmul.ubj"))(f),
                             r"plain file name"),
    "file=link out of folder": (_file_entry("evil.ubj", _booster_outside),
                                r"symbolic link to .*elsewhere.*outside the folder"),
    "file=FIFO": (_file_entry("fifo.ubj", lambda f: os.mkfifo(f / "fifo.ubj")),
                  r"not a regular file \(a FIFO\)"),
    "file=folder": (_file_entry("d.ubj", lambda f: (f / "d.ubj").mkdir()),
                    r"not a regular file \(a folder\)"),
    "file=missing": (_file_entry("gone.ubj"), r"cannot read model file"),
    "file=broken link": (
        _file_entry("dead.ubj", lambda f: os.symlink(f / "nowhere", f / "dead.ubj")),
        r"broken symbolic link"),
    "file=123": (_set("models", XGB_KEY, "file", 123), r"file must be a file name, got 123"),
    "file=metadata.json": (_file_entry("metadata.json"), r"ending in \.ubj"),
    # --- metadata.json itself
    "metadata link out": (_metadata_link_out, r"symbolic link to .*outside the folder"),
    "metadata binary": (_write(bytes(range(256)) * 4), r"not UTF-8|not valid JSON"),
    "metadata nested 100000 deep": (_write(b"[" * 100_000 + b"]" * 100_000),
                                    r"nested too deeply"),
    "metadata is a list": (_write(b"[]"), r"must hold a JSON object, got list"),
    "metadata is a string": (_write(b'"x"'), r"must hold a JSON object, got str"),
    "metadata over the size cap": (_sparse_metadata, r"bytes is more than a model metadata file"),
    "metadata 5000-digit integer": (_text('"rows": ', '"rows": ' + "9" * 5000 + ", \"x\": "),
                                    r"not valid JSON"),
    # --- schema: types, lengths, finite sane numbers
    "features=5": (_edit(lambda m: m.update(features=5)), r"field features must be a list"),
    "features twice": (_edit(lambda m: m.update(features=m["features"] * 2)),
                       r"names a feature twice"),
    "models='x'": (_edit(lambda m: m.update(models="x")), r"field models must be an object"),
    "models={}": (_edit(lambda m: m.update(models={})), r"field models must not be empty"),
    "model key mismatch": (_set("models", XGB_KEY, "key", "gpu/conv"), r"must equal the model key"),
    "candidate unknown": (_set("models", XGB_KEY, "candidate", "forest"), r"candidate must be one"),
    "floor_s=-1": (_set("models", XGB_KEY, "floor_s", -1), r"floor_s must be a finite number in "
                                                           r"\[0, 1\], got -1"),
    "floor_s=NaN": (_text('"floor_s": 0.0', '"floor_s": NaN'), r"NaN is not a JSON number"),
    "floor_s=1e400": (_text('"floor_s": 0.0', '"floor_s": 1e400'), r"floor_s must be a finite"),
    "floor_s='0'": (_set("models", XGB_KEY, "floor_s", "0"), r"floor_s must be a number"),
    "floor_s=true": (_set("models", XGB_KEY, "floor_s", True), r"floor_s must be a number"),
    "ridge without impute": (_linear("impute", drop=True), r"linear.impute must be a list"),
    "ridge scale 0": (_linear("scale", lambda v: [0.0] * len(v)), r"scale must be >= 1e-12"),
    "ridge coef short": (_linear("coef", lambda v: v[:-1]), r"coef must have \d+ numbers"),
    "ridge indicator out of range": (_linear("indicators", [999]), r"indicators\[0\] must be an "
                                                                   r"integer in \[0, \d+\]"),
    "ridge intercept 1e300": (_linear("intercept", 1e300), r"intercept must be a finite number"),
    "median constant null": (_edit(lambda m: m["models"][RIDGE_KEY].update(
        candidate="median", linear={"constant": None})), r"constant must be a number"),
    "intervals q_lo short": (_set("intervals", XGB_KEY, "q_lo", [0.0]),
                             r"q_lo must have 3 numbers"),
    "intervals edges unsorted": (_set("intervals", XGB_KEY, "edges", [1.0, -1.0]),
                                 r"edges must be ascending"),
    "intervals q_lo above q_hi": (_edit(lambda m: m["intervals"][XGB_KEY].update(
        q_lo=[1.0, 1.0, 1.0], q_hi=[0.0, 0.0, 0.0])), r"is above q_hi"),
    "intervals alpha 1.5": (_set("intervals", XGB_KEY, "alpha", 1.5), r"alpha must be a finite "
                                                                      r"number in \[0, 1\]"),
    "intervals 'x'": (_edit(lambda m: m["intervals"].update({XGB_KEY: "x"})), r"must be an object"),
    "ranges [1]": (_edit(lambda m: m["ranges"][XGB_KEY].update(lg_flops=[1])),
                   r"must be \[min, max\]"),
    "ranges min > max": (_edit(lambda m: m["ranges"][XGB_KEY].update(lg_flops=[2.0, 1.0])),
                         r"min 2.0 above max 1.0"),
    "ranges strings": (_edit(lambda m: m["ranges"][XGB_KEY].update(lg_flops=["a", "b"])),
                       r"must be a number"),
    "devices vector short": (_edit(lambda m: m["devices"]["gpu"]["vectors"][0].pop()),
                             r"vectors\[0\] must have 6 numbers"),
    "devices other features": (_edit(lambda m: m["devices"]["gpu"].update(features=["x"])),
                               r"devices\['gpu'\].features must be"),
    "devices ids short": (_edit(lambda m: m["devices"]["gpu"]["ids"].pop()),
                          r"must have one id per vector"),
    "e2e log_factor 1e308": (_set("e2e", "cpu", "log_factor", 1e308),
                             r"log_factor must be a finite number in \[-12, 12\]"),
    "e2e runs 0": (_set("e2e", "cpu", "runs", 0), r"runs must be an integer in \[1, "),
    "e2e runs 2.5": (_set("e2e", "cpu", "runs", 2.5), r"runs must be an integer"),
    "e2e 'x'": (_edit(lambda m: m.update(e2e="x")), r"field e2e must be an object"),
}


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Path:
    """One copy of the shipped model folder (copied again per case)."""
    out = tmp_path_factory.mktemp("shipped") / "model"
    shutil.copytree(persistence.DEFAULT_DIR, out)
    return out


def damaged(shipped: Path, tmp_path: Path, case: str) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(shipped, folder, symlinks=True)
    CASES[case][0](folder)
    return folder


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_model_folder_is_refused_cleanly(shipped, tmp_path, case):
    folder = damaged(shipped, tmp_path, case)
    with deadline(30), pytest.raises(PredictionError, match=CASES[case][1]) as err:
        persistence.load(folder)
    msg = str(err.value)
    assert "\n" not in msg
    assert "retrain" in msg
    assert "root:" not in msg
    assert "PATH=" not in msg


def test_booster_linked_inside_the_folder_loads(shipped, tmp_path):
    folder = damaged(shipped, tmp_path, "file=missing")
    os.symlink("gpu__matmul.ubj", folder / "alias.ubj")
    _set("models", XGB_KEY, "file", "alias.ubj")(folder)
    model = persistence.load(folder)
    assert model.models[XGB_KEY].booster is not None


def test_the_shipped_model_passes_the_schema(shipped):
    model = persistence.load(shipped)
    assert set(model.models) == set(persistence.load().models)


CLI_CASES = ("file=/etc/passwd", "metadata nested 100000 deep", "floor_s=-1",
             "ridge without impute")


@pytest.mark.parametrize("case", CLI_CASES)
def test_cli_refuses_hostile_model_folder_with_exit_2(shipped, tmp_path, case):
    folder = damaged(shipped, tmp_path, case)
    env = {**os.environ, "ROOFCAST_LEARNED_MODEL": str(folder),
           "ROOFCAST_HW_DIR": str(tmp_path / "no-devices")}
    proc = subprocess.run(
        [sys.executable, "-m", "roofcast.app.cli", "predict", "resnet50", "--hw",
         "a100-40gb-pcie", "--estimator", "learned"],
        capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"model folder {folder}" in proc.stderr
    assert proc.stderr.count("\n") == 1
