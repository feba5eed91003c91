"""The packaged public kernel table (``training_data.packed_kernels``) is the full files' table."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from roofcast.training_data import public_kernels
from roofcast.training_data.packed_kernels import (
    PACKED_DIR,
    TABLE_FILE,
    PackedDataError,
    read_packed,
    write_packed,
)
from roofcast.training_data.public_kernels import (
    ENV_VAR,
    KERNEL_FILES,
    PublicDataError,
    full_files_dir,
    load_kernels,
    packed_table,
    shared_data_dir,
)


def _full_folder():
    for folder in (shared_data_dir(), shared_data_dir().parents[2] / "shared" / "data"):
        if all((folder / "gpu_kernels" / n).is_file() for n in KERNEL_FILES):
            return folder
    return None


@pytest.mark.skipif(_full_folder() is None, reason="the full public files are not on this machine")
def test_packed_table_equals_a_fresh_load_of_the_full_files():
    folder = _full_folder()
    full, packed = load_kernels(folder), packed_table()
    pd.testing.assert_frame_equal(packed.kernels, full.kernels, check_exact=True)
    assert (packed.skipped, packed.unmapped) == (full.skipped, full.unmapped)
    _, meta = read_packed()
    for name, digest in meta["sources"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, (
            f"{name} changed: rebuild with python -m roofcast.training_data.public.build_packed")


def test_packed_table_records_its_origin_and_licences():
    table = packed_table()
    assert table.origin == str(PACKED_DIR / TABLE_FILE)
    assert {"p4", "t4", "a100-40gb-pcie"} <= set(table.kernels["device"])
    _, meta = read_packed()
    assert set(meta["licences"]) == {"neusight", "deepbench"}
    assert meta["rows"] == len(table.kernels)


def test_full_files_are_read_only_when_given_or_present(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert full_files_dir() == tmp_path
    with pytest.raises(PublicDataError, match=ENV_VAR):
        load_kernels()  # asked for, missing: an error, not the packaged copy
    monkeypatch.delenv(ENV_VAR)
    assert full_files_dir(tmp_path) == tmp_path
    monkeypatch.setattr(public_kernels, "shared_data_dir", lambda path=None: tmp_path / "none")
    assert full_files_dir() is None
    assert load_kernels().origin == str(PACKED_DIR / TABLE_FILE)


def test_round_trip_and_mismatch(tmp_path):
    df = pd.DataFrame({"a": [1.5, 2.0], "b": ["x", "y"]})
    write_packed(df, {"sources": {}, "skipped": {}, "unmapped": {}}, tmp_path)
    back, meta = read_packed(tmp_path)
    pd.testing.assert_frame_equal(back, df)
    assert meta["rows"] == 2
    df.iloc[:1].to_parquet(tmp_path / TABLE_FILE)
    with pytest.raises(PackedDataError, match="rebuild"):
        read_packed(tmp_path)
    with pytest.raises(PackedDataError, match="not found"):
        read_packed(tmp_path / "nowhere")
