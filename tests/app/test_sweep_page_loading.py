"""Loading a sweep into the app (``app.sweep_files``): a folder under the working directory or
an uploaded zip, read back cell for cell; every way out of what the user gave (a path outside
the working directory, a symlink out of the folder, a zip member with ``..``, an absolute
path or a symlink, a zip bomb) and every malformed dataset is a ``SweepLoadError`` naming it."""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from roofcast.app import sweep_files
from roofcast.app.sweep_files import SweepLoadError, extract_zip, load_folder, load_zip
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.sweeps.types import CELL_COLUMNS, CellKey, cell_id

DEVICES = {"h100-sxm": (30000.0, 700.0, 80e9), "a100-sxm": (15000.0, 400.0, 40e9),
           "xeon-8480": (float("nan"), 350.0, 512e9)}


def fake_cells(models=("resnet50", "bert_base"), batches=(1, 8), precisions=("fp32", "fp16"),
               error_device: str | None = None) -> pd.DataFrame:
    """A sweep table with ``CELL_COLUMNS`` and made-up but consistent numbers: time grows with
    the batch, halves in fp16, the a100 twice the h100's time; throughput = batch / time,
    $/throughput = price / throughput; a device without a price has NaN there."""
    rows = []
    for m_i, model in enumerate(models):
        for d_i, (device, (price, tdp, cap)) in enumerate(DEVICES.items()):
            for batch in batches:
                for precision in precisions:
                    t = 1e-3 * (m_i + 1) * (d_i + 1) * batch ** 0.7 / (2 if precision == "fp16"
                                                                      else 1)
                    err = "unknown device" if device == error_device else ""
                    if err:
                        t = float("nan")
                    thr = batch / t
                    mem = 1e8 * (m_i + 1) * batch
                    rows.append(
                        {
                            "cell_id": cell_id(
                                model, "default", CellKey(device, batch, precision, "infer")
                            ),
                            "family": "graph",
                            "model": model,
                            "device": device,
                            "system": "",
                            "n_devices": 1,
                            "plan": "single",
                            "input_tokens": 0,
                            "output_tokens": 0,
                            "runtime": "default",
                            "batch": batch,
                            "precision": precision,
                            "mode": "infer",
                            "estimator": "time-roofline",
                            "time_s": t,
                            "lower_s": 0.8 * t,
                            "upper_s": 1.3 * t,
                            "throughput_samples_per_s": thr,
                            "memory_bytes": mem,
                            "mem_capacity_bytes": cap,
                            "fits": bool(mem <= cap),
                            "price_usd": price,
                            "tdp_W": tdp,
                            "usd_per_throughput": price / thr,
                            "throughput_per_W": thr / tdp,
                            "speedup": float("nan"),
                            "dominant_bound": "memory" if batch == 1 else "compute",
                            "task_id": m_i,
                            "error": err,
                        }
                    )
    return pd.DataFrame(rows, columns=list(CELL_COLUMNS)).sort_values("cell_id",
                                                                       ignore_index=True)


def fake_serving_cells(model: str = "gpt2", tokens=((64, 16), (256, 16)), batches=(1, 8),
                       baseline: str | None = "a100-sxm") -> pd.DataFrame:
    """LLM serving cells of ``model`` on the ``DEVICES`` (one device each) and a ``system:``
    entry (8 x the h100's price): e2e latency = TTFT + (M-1) x TPOT, output tokens/s = batch x
    M / e2e, $/throughput per request/s; speedups over ``baseline``'s cell of the same work."""
    systems = {**{d: ("", 1, p, t, c) for d, (p, t, c) in DEVICES.items()},
               "": ("hgx-h100", 8, 8 * DEVICES["h100-sxm"][0], 8 * 700.0, 80e9)}
    rows = []
    for d_i, (device, (system, n, price, tdp, cap)) in enumerate(systems.items()):
        for (n_in, n_out) in tokens:
            for batch in batches:
                ttft = 1e-5 * n_in * batch / (d_i + 1)
                tpot = 1e-3 * (1 + 0.1 * batch) / (d_i + 1)
                e2e = ttft + (n_out - 1) * tpot
                rate = batch / e2e
                key = CellKey(device or f"system:{system}", batch, "fp16", "serve", "single"
                              if n == 1 else "tp8", (n_in, n_out))
                rows.append({
                    "cell_id": cell_id(model, "vllm", key), "family": "serving",
                    "model": model, "device": device, "system": system, "n_devices": n,
                    "runtime": "vllm", "batch": batch, "precision": "fp16", "mode": "serve",
                    "plan": key.plan, "input_tokens": n_in, "output_tokens": n_out,
                    "estimator": "time-roofline", "time_s": e2e, "lower_s": 0.8 * e2e,
                    "upper_s": 1.3 * e2e, "throughput_samples_per_s": rate,
                    "tokens_per_s": rate * n_out, "ttft_s": ttft, "tpot_s": tpot,
                    "memory_bytes": 2e9 * batch, "mem_capacity_bytes": cap, "fits": True,
                    "price_usd": price, "tdp_W": tdp, "usd_per_throughput": price / rate,
                    "throughput_per_W": rate / tdp, "dominant_bound": "decode", "task_id": 9,
                    "error": ""})
    out = pd.DataFrame(rows, columns=list(CELL_COLUMNS))
    if baseline is not None:
        work = ["input_tokens", "output_tokens", "batch"]
        base = out[out["device"] == baseline].set_index(work)["time_s"]
        out["speedup"] = base.reindex(pd.MultiIndex.from_frame(out[work])).to_numpy() \
            / out["time_s"].to_numpy()
    return out.sort_values("cell_id", ignore_index=True)


def write_sweep(cells: pd.DataFrame, folder: Path, parts: int = 2) -> Path:
    """``cells`` as ``parts`` Parquet files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(np.array_split(np.arange(len(cells)), parts)):
        pq.write_table(pa.Table.from_pandas(cells.iloc[chunk], preserve_index=False),
                       folder / f"part-{i:03d}.parquet")
    return folder


def zip_folder(folder: Path, prefix: str = "sweep/") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, prefix + path.relative_to(folder).as_posix())
    return buf.getvalue()


def assert_same_cells(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got[list(CELL_COLUMNS)].reset_index(drop=True),
                                  want[list(CELL_COLUMNS)].reset_index(drop=True),
                                  check_dtype=False)


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


# ----------------------------------------------------------------------------- folder path
def test_folder_under_the_working_directory_reads_back_every_cell(cwd):
    cells = fake_cells(error_device="a100-sxm")
    write_sweep(cells, cwd / "runs" / "s1", parts=3)
    (cwd / "runs" / "s1" / "_SUCCESS.parquet").write_bytes(b"junk: skipped like Parquet readers")
    loaded = load_folder("runs/s1")
    assert_same_cells(loaded.cells, cells)
    assert loaded.files == ("part-000.parquet", "part-001.parquet", "part-002.parquet")
    assert (loaded.cells["error"] != "").sum() == (cells["device"] == "a100-sxm").sum() > 0
    assert_same_cells(load_folder(str(cwd / "runs" / "s1")).cells, cells)  # absolute, inside


def test_hive_partitioned_folder_gets_its_partition_column_back(cwd):
    cells = fake_cells()
    pq.write_to_dataset(pa.Table.from_pandas(cells, preserve_index=False), cwd / "hive",
                        partition_cols=["device"])
    assert not any("device" in pq.read_schema(f).names for f in (cwd / "hive").rglob("*.parquet"))
    assert_same_cells(load_folder("hive").cells, cells)


@pytest.mark.parametrize(("text", "words"), [
    ("", "no folder given"),
    ("nothere", "no such folder"),
    ("../outside", "outside the working directory"),
    ("runs/s1/part-000.parquet", "is a file, not a folder"),
    ("empty", "no .parquet files"),
])
def test_bad_folder_paths_are_refused_with_what_to_do(cwd, text, words):
    write_sweep(fake_cells(), cwd / "runs" / "s1")
    write_sweep(fake_cells(), cwd.parent / "outside")
    (cwd / "empty").mkdir()
    with pytest.raises(SweepLoadError, match=words) as info:
        load_folder(text)
    assert isinstance(info.value, PredictionError)  # the app's USER_ERRORS show it


def test_absolute_path_and_symlinks_out_of_the_working_directory_are_refused(cwd):
    outside = write_sweep(fake_cells(), cwd.parent / "secret")
    with pytest.raises(SweepLoadError, match="outside the working directory"):
        load_folder(str(outside))
    os.symlink(outside, cwd / "link")  # a link inside pointing out: resolved, refused
    with pytest.raises(SweepLoadError, match="outside the working directory"):
        load_folder("link")
    write_sweep(fake_cells(), cwd / "mine")
    os.symlink(outside / "part-000.parquet", cwd / "mine" / "stolen.parquet")
    with pytest.raises(SweepLoadError, match=r"stolen.parquet links outside"):
        load_folder("mine")


@pytest.mark.parametrize(("damage", "words"), [
    (lambda c: c.drop(columns=["usd_per_throughput", "fits"]),
     "lack the column.s. fits, usd_per_throughput"),
    (lambda c: c.assign(time_s=c["time_s"].astype(str)), "time_s holds .* values, not numbers"),
    (lambda c: c.assign(fits=c["fits"].astype(int)), "fits holds int64"),
    (lambda c: pd.concat([c, c.head(2)]), "2 cell.s. appear twice"),
])
def test_malformed_datasets_are_refused(cwd, damage, words):
    write_sweep(damage(fake_cells()), cwd / "bad")
    with pytest.raises(SweepLoadError, match=words):
        load_folder("bad")


def test_a_non_parquet_file_and_the_row_cap_are_refused(cwd, monkeypatch):
    (cwd / "bad").mkdir()
    (cwd / "bad" / "x.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(SweepLoadError, match="cannot be read"):
        load_folder("bad")
    write_sweep(fake_cells(), cwd / "big")
    monkeypatch.setattr(sweep_files, "MAX_ROWS", 10)
    with pytest.raises(SweepLoadError, match="has 24 cells, over the app's 10"):
        load_folder("big")


# ----------------------------------------------------------------------------- zip upload
def test_zip_upload_reads_back_every_cell_and_lists_what_it_skipped(tmp_path):
    cells = fake_cells()
    folder = write_sweep(cells, tmp_path / "s")
    (folder / "spec.toml").write_text("[sweep]\n")
    loaded = load_zip(zip_folder(folder))
    assert_same_cells(loaded.cells, cells)
    assert loaded.files == ("sweep/part-000.parquet", "sweep/part-001.parquet")
    assert loaded.skipped == ("sweep/spec.toml",)


def _zip(members: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in members:
            zf.writestr(info, data)
    return buf.getvalue()


def _symlink(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(("name", "words"), [
    ("../../evil.parquet", r"climbs out of the folder"),
    ("sweep/../../evil.parquet", r"climbs out of the folder"),
    ("/etc/evil.parquet", "absolute or non-POSIX path"),
    ("C:/evil.parquet", "absolute or non-POSIX path"),
    ("sweep\\..\\evil.parquet", "absolute or non-POSIX path"),
])
def test_zip_members_that_would_leave_the_folder_are_refused_and_nothing_is_written(
        tmp_path, name, words):
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(SweepLoadError, match=words):
        extract_zip(_zip([("sweep/ok.parquet", b"x"), (name, b"evil")]), dest)
    assert not list(tmp_path.rglob("evil*"))


def test_symlink_members_encryption_and_non_zips_are_refused(tmp_path):
    with pytest.raises(SweepLoadError, match="is a symbolic link"):
        extract_zip(_zip([(_symlink("sweep/p.parquet"), b"/etc/passwd")]), tmp_path)
    with pytest.raises(SweepLoadError, match="not a zip file"):
        load_zip(b"PAR1 a parquet file, not a zip")
    with pytest.raises(SweepLoadError, match=r"holds no .parquet files"):
        load_zip(_zip([("sweep/readme.txt", b"hello")]))
    data = bytearray(_zip([("sweep/p.parquet", b"x")]))
    data[6] |= 0x1  # the "encrypted" flag in the local header and the central directory
    data[data.rfind(b"PK\x01\x02") + 8] |= 0x1
    with pytest.raises(SweepLoadError, match="is encrypted"):
        extract_zip(bytes(data), tmp_path)


def test_zip_bombs_stop_at_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_files, "MAX_EXTRACTED_BYTES", 4 * 2**20)
    monkeypatch.setattr(sweep_files, "_CHUNK", 1 << 16)
    bomb = _zip([("sweep/a.parquet", b"\0" * 3 * 2**20), ("sweep/b.parquet", b"\0" * 3 * 2**20)])
    assert len(bomb) < 50_000
    with pytest.raises(SweepLoadError, match="decompresses past"):
        extract_zip(bomb, tmp_path)
    # a member that lies about its size: its declared size is the cap of what is written
    data = bytearray(_zip([("sweep/a.parquet", b"\0" * 2**20)]))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.infolist()[0]
    for offset in (info.header_offset + 22, data.rfind(b"PK\x01\x02") + 24):  # both headers
        data[offset:offset + 4] = (1000).to_bytes(4, "little")
    with pytest.raises(SweepLoadError, match=r"decompresses past|cannot be read"):
        extract_zip(bytes(data), tmp_path / "lie")
    assert sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file()) <= 4 * 2**20
    monkeypatch.setattr(sweep_files, "MAX_ZIP_BYTES", 1000)
    with pytest.raises(SweepLoadError, match="over the upload limit"):
        extract_zip(bomb, tmp_path / "big")
