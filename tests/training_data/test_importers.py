"""Importers: the user's CSV/Parquet (each bad file gives its own message, nothing written) and
the public kernel data (every source row lands in the store or is counted with a reason)."""

from __future__ import annotations

import gzip
import io
import json

import pandas as pd
import pytest

from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.importers import PUBLIC_DATASETS, import_file, import_public
from roofcast.training_data.public_kernels import KERNEL_FILES, shared_data_dir
from roofcast.training_data.store import Store

HEADER = "op_type,device_id,dtype,latency_s,run_id"
GOOD = "MatMul,t4,fp16,0.001,a"


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "m.sqlite")
    s.append(pd.DataFrame({"op_type": ["Add"], "device_id": ["local"], "dtype": ["fp32"],
                           "latency_s": [1e-5], "source": ["seed"]}))
    return s


def write(tmp_path, text: str | bytes, name: str = "m.csv"):
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


BAD_CSVS = {
    "missing latency column": (
        "op_type,device_id,dtype,latency\nMatMul,t4,fp16,0.001\n",
        r"line 1: missing required column latency_s \(did you mean 'latency'\?\); give latency_s"),
    "missing device and dtype": (
        "op_type,latency_s\nMatMul,0.001\n",
        r"line 1: missing required column device_id[\s\S]*line 1: missing required column dtype"),
    "misspelled optional column": (
        f"{HEADER},thread_intra\n{GOOD},1\n",
        r"line 1: unknown column 'thread_intra' \(did you mean 'threads_intra'"),
    "milliseconds in latency_s": (
        f"{HEADER}\n{GOOD}\nConv,t4,fp16,5000,b\n",
        r"line 3: latency_s = 5000 s is over 1 hour: wrong units\? latency_s is in seconds"),
    "picoseconds": (
        f"{HEADER}\nConv,t4,fp16,1e-13,b\n",
        r"line 2: latency_s = 1e-13 s is under 1 ns: wrong units\?"),
    "both latency_s and latency_ms": (
        "op_type,device_id,dtype,latency_s,latency_ms\nMatMul,t4,fp16,0.001,1\n",
        r"line 1: columns latency_s, latency_ms all give latency_s; keep only one"),
    "NaN latency": (
        f"{HEADER}\nMatMul,t4,fp16,NaN,a\n",
        r"line 2: latency_s is empty or NaN \(required\)"),
    "empty latency": (
        f"{HEADER}\nMatMul,t4,fp16,,a\n",
        r"line 2: latency_s is empty or NaN \(required\)"),
    "negative time": (
        f"{HEADER}\n{GOOD}\nMatMul,t4,fp16,-0.5,b\n",
        r"line 3: latency_s = -0.5 must be > 0 seconds"),
    "zero time": (
        f"{HEADER}\nMatMul,t4,fp16,0,a\n",
        r"line 2: latency_s = 0 must be > 0 seconds"),
    "zero time in ms": (
        "op_type,device_id,dtype,latency_ms\nMatMul,t4,fp16,0\n",
        r"line 2: latency_s = 0 must be > 0 seconds"),
    "unknown device": (
        f"{HEADER}\nMatMul,h1000,fp16,0.001,a\n",
        r"line 2: unknown device 'h1000'; closest ids: .*h100"),
    "unknown dtype": (
        f"{HEADER}\nMatMul,t4,float99,0.001,a\n",
        r"line 2: unknown dtype 'float99'.*expected one of .*fp16"),
    "duplicate rows": (
        f"{HEADER}\n{GOOD}\nConv,t4,fp16,0.002,a\n{GOOD}\n",
        r"line 4: duplicate of line 2 \(same op, shapes, device, config, source and run_id\); "
        r"give repeated measurements distinct run_id values"),
    "text in a number column": (
        f"{HEADER}\nMatMul,t4,fp16,fast,a\n",
        r"line 2: latency_s: 'fast' is not a number"),
    "fraction of a thread": (
        f"{HEADER},threads_intra\n{GOOD},1.5\n",
        r"line 2: threads_intra: '1.5' is not a whole number"),
    "zero threads": (
        f"{HEADER},threads_intra\n{GOOD},0\n",
        r"line 2: threads_intra = 0 must be >= 1"),
    "bad JSON shapes": (
        f'{HEADER},input_shapes\n{GOOD},"[[1,2],[2"\n',
        r"line 2: input_shapes: bad JSON '\[\[1,2\],\[2'"),
    "shapes not a list of lists": (
        f'{HEADER},input_shapes\n{GOOD},"[1,2]"\n',
        r"line 2: input_shapes: each shape must be a list of whole numbers or dim names"),
    "attrs not an object": (
        f'{HEADER},attrs\n{GOOD},"[1]"\n',
        r"line 2: attrs: expected a JSON object, got '\[1\]'"),
    "empty op_type": (
        f"{HEADER}\n,t4,fp16,0.001,a\n",
        r"line 2: op_type is empty \(required\)"),
    "negative flops": (
        f"{HEADER},flops\n{GOOD},-10\n",
        r"line 2: flops = -10 must be >= 0"),
    "unknown mode": (
        f"{HEADER},mode\n{GOOD},inference\n",
        r"line 2: unknown mode 'inference'; expected one of infer, train"),
    "p10 above the median": (
        f"{HEADER},latency_p10_s\n{GOOD},0.01\n",
        r"line 2: latency_p10_s is above latency_s"),
    "bad timestamp": (
        f"{HEADER},timestamp\n{GOOD},yesterday\n",
        r"line 2: timestamp 'yesterday' is not ISO 8601"),
    "header only": (
        f"{HEADER}\n",
        r"a header line but no data rows"),
    "empty file": ("", r"the file is empty; expected a header line"),
    "blank lines only": ("\n\n  \n", r"the file is empty \(only blank lines\)"),
    "not UTF-8": (
        f"{HEADER}\n{GOOD}\n".encode() + "Conv,t4,fp16,0.001,caf\u00e9\n".encode("latin-1"),
        r"not UTF-8 text \(byte 0xe9 on line 3\); save the file as UTF-8 CSV"),
    "binary": (gzip.compress(f"{HEADER}\n{GOOD}\n".encode()) + b"\x00" * 10,
               r"this is a binary file, not a CSV text file"),
    "ragged CSV": (
        f"{HEADER}\n{GOOD},extra,cells\n\nMatMul,t4\n",
        r"m.csv: not a well-formed CSV: 2 bad row\(s\)[\s\S]*line 2: 7 cells but the header has 5 "
        r"\(quote values that contain commas\) \| line 4: 2 cells"),
    "unclosed quote": (
        f'{HEADER},attrs\n{GOOD},"{{\n',
        r"line 2: attrs: bad JSON '\{\\n' \(Expecting property name"),
}


@pytest.mark.parametrize("case", list(BAD_CSVS))
def test_bad_csv_gives_its_message_and_writes_nothing(tmp_path, store, case):
    text, pattern = BAD_CSVS[case]
    path = write(tmp_path, text)
    with pytest.raises(MeasurementError, match=pattern):
        import_file(path, store)
    assert store.count() == 1


def test_huge_file_by_bytes_and_by_rows(tmp_path, store):
    body = "".join(f"MatMul,t4,fp16,0.001,r{i}\n" for i in range(300))
    path = write(tmp_path, f"{HEADER}\n{body}")
    with pytest.raises(
        MeasurementError,
        match=r"over the limit of 1000 bytes \(decompressed\) per import .*"
        r"ROOFCAST_MAX_IMPORT_BYTES=N",
    ):
        import_file(path, store, max_bytes=1000)
    with pytest.raises(
        MeasurementError, match=r"over the limit of 100 rows per import .*ROOFCAST_MAX_IMPORT_ROWS"
    ):
        import_file(path, store, max_rows=100)
    assert store.count() == 1


def test_one_bad_row_among_many_rejects_the_file_with_its_line(tmp_path, store):
    body = [f"MatMul,t4,fp16,0.001,r{i}" for i in range(200)]
    body[150] = "MatMul,t4,fp16,-1,r150"
    path = write(tmp_path, HEADER + "\n" + "\n".join(body) + "\n")
    with pytest.raises(MeasurementError) as e:
        import_file(path, store)
    assert str(e.value).startswith("m.csv: 1 bad row(s); nothing was written")
    assert "line 152: latency_s = -1 must be > 0" in str(e.value)
    assert store.count() == 1


def test_good_csv_imports_with_units_source_and_reimport_is_a_no_op(tmp_path, store):
    text = ("op_type,device_id,dtype,latency_us,input_shapes,attrs,threads_intra,batch,run_id\n"
            'MatMul,Tesla T4,float16,250,"[[8,64],[64,32]]","{""transB"": 0}",1,8,a\n'
            "Relu,local,fp32,3.5,,,2,,a\n")
    path = write(tmp_path, text, "mine.csv")
    rep = import_file(path, store)
    assert (rep.rows_read, rep.added, rep.duplicates) == (2, 2, 0)
    assert rep.per_device.set_index("device_id")["rows"].to_dict() == {"local": 1, "t4": 1}
    got = store.read(source="user").set_index("op_type")
    assert got.loc["MatMul", "latency_s"] == pytest.approx(250e-6)
    assert got.loc["MatMul", "dtype"] == "fp16"
    assert got.loc["MatMul", "source"] == "user:mine.csv"
    assert got.loc["MatMul", "attrs"] == '{"transB":0}'
    assert got.loc["Relu", "threads_intra"] == 2
    again = import_file(path, store)
    assert (again.added, again.duplicates) == (0, 2)
    assert store.count() == 3


def test_parquet_import_and_bad_parquet(tmp_path, store):
    df = pd.DataFrame({"op_type": ["Conv", "Conv"], "device_id": ["a100-40gb-pcie"] * 2,
                       "dtype": ["bf16"] * 2, "latency_ms": [1.0, 2.0], "batch": [1, 2]})
    df.to_parquet(tmp_path / "m.parquet")
    rep = import_file(tmp_path / "m.parquet", store)
    assert rep.added == 2
    assert sorted(store.read(family=[""], op_type="Conv").latency_s) == pytest.approx([1e-3, 2e-3])
    write(tmp_path, b"PAR1 not really", "bad.parquet")
    with pytest.raises(MeasurementError, match="not a readable Parquet file"):
        import_file(tmp_path / "bad.parquet", store)


def test_missing_file(tmp_path, store):
    with pytest.raises(MeasurementError, match="no such file"):
        import_file(tmp_path / "nope.csv", store)


# ------------------------------------------------------------------ public kernels
SAMPLE_ROWS = 150


def _sample(src, dst) -> dict[str, int]:
    """The first SAMPLE_ROWS rows of each public file plus every RNN/all-reduce/sparse row;
    returns rows written per file."""
    (dst / "gpu_kernels").mkdir()
    counts = {}
    for name in KERNEL_FILES:
        df = pd.read_csv(src / "gpu_kernels" / name, low_memory=False)
        keep = df.index < SAMPLE_ROWS
        keep |= df["workload"].isin(["gru", "lstm", "rnn_vanilla", "allreduce", "sparse_gemm"])
        part = df[keep]
        part.to_csv(dst / "gpu_kernels" / name, index=False, compression="gzip")
        counts[name] = len(part)
    return counts


@pytest.fixture(scope="module")
def public_sample(tmp_path_factory):
    src = shared_data_dir()
    if not (src / "gpu_kernels").is_dir():
        pytest.skip(f"public data not found at {src} (set ROOFCAST_SHARED_DATA)")
    dst = tmp_path_factory.mktemp("public")
    return dst, _sample(src, dst)


def test_public_import_stores_every_source_row(tmp_path, public_sample):
    folder, counts = public_sample
    store = Store(tmp_path / "m.sqlite")
    rep = import_public("all", store, folder)
    assert rep.rows_read == sum(counts.values())
    assert rep.not_imported == {}
    assert rep.added == sum(counts.values())
    assert store.count() == rep.added
    per = rep.per_device.groupby("dataset")["rows"].sum().to_dict()
    assert per["neusight"] == sum(v for k, v in counts.items() if k.startswith("neusight"))
    assert per["deepbench"] == counts["deepbench_kernels.csv.gz"]
    again = import_public("deepbench", store, folder)
    assert (again.added, again.duplicates) == (0, counts["deepbench_kernels.csv.gz"])


def test_public_rows_not_modelled_are_represented(tmp_path, public_sample):
    folder, _ = public_sample
    store = Store(tmp_path / "m.sqlite")
    import_public("deepbench", store, folder)
    raw = pd.read_csv(folder / "gpu_kernels" / "deepbench_kernels.csv.gz", low_memory=False)
    rnn = raw["workload"].isin(["gru", "lstm", "rnn_vanilla"])
    assert len(store.read(family="recurrent")) == rnn.sum()
    assert len(store.read(family="collective")) == raw["workload"].eq("allreduce").sum()
    assert len(store.read(family="sparse_matmul")) == raw["workload"].eq("sparse_gemm").sum()
    ar = store.read(op_type="AllReduce").iloc[0]
    assert json.loads(ar["attrs"])["num_devices"] >= 2
    lstm = store.read(op_type="LSTM")
    fwd = lstm[lstm.direction.eq("fwd")].iloc[0]
    t, n, h = json.loads(fwd.input_shapes)[0]
    assert fwd.flops == pytest.approx(t * n * (2 * (h + h) * 4 * h + 22 * h))
    assert lstm[lstm.direction.ne("fwd")].flops.isna().all()  # backward rows stay uncosted
    assert set(lstm.direction) <= {"fwd", "bwd_data", "bwd_filter", "bwd"}


def test_public_matmul_rows_carry_shapes_and_costs(tmp_path, public_sample):
    folder, _ = public_sample
    store = Store(tmp_path / "m.sqlite")
    import_public("neusight", store, folder)
    bmm = store.read(op_type="MatMul").iloc[0]
    (b, m, k), (_, k2, n) = json.loads(bmm.input_shapes)
    assert k == k2
    assert bmm.flops == 2 * b * m * n * k
    assert (bmm.gemm_batch, bmm.gemm_m, bmm.gemm_n, bmm.gemm_k) == (b, m, n, k)
    assert bmm.source.startswith("neusight:")
    assert bmm.provider == "pytorch-cuda"


def test_repeated_public_measurements_get_distinct_run_ids(tmp_path):
    row = {"source": "x:y", "workload": "add", "kind": "kernel", "shape_or_config": "",
           "batch": 4, "precision": "fp32", "mode": "infer(fwd only)", "hardware": "Tesla T4",
           "num_devices": 1, "metric": "latency", "unit": "ms", "framework": "PyTorch",
           "notes": "train_set", "B": 4, "H": 8}
    (tmp_path / "gpu_kernels").mkdir()
    for name in KERNEL_FILES:
        rows = [dict(row, value=v) for v in (0.01, 0.02)] if "vec" in name else []
        frame = pd.DataFrame(rows, columns=[*list(row), "value"]) if rows else pd.DataFrame(
            columns=[*list(row), "value", "M", "N", "K"])
        buf = io.BytesIO()
        frame.to_csv(buf, index=False)
        (tmp_path / "gpu_kernels" / name).write_bytes(gzip.compress(buf.getvalue()))
    store = Store(tmp_path / "m.sqlite")
    rep = import_public("neusight", store, tmp_path)
    assert rep.added == 2
    assert sorted(store.read().run_id) == ["1", "2"]


def test_unknown_public_name(tmp_path):
    with pytest.raises(MeasurementError, match="expected one of neusight, deepbench, all"):
        import_public("mlperf", Store(tmp_path / "m.sqlite"))
    assert set(PUBLIC_DATASETS) == {"neusight", "deepbench", "all"}


def test_gzipped_csv_is_read(tmp_path, store):
    (tmp_path / "m.csv.gz").write_bytes(gzip.compress(f"{HEADER}\n{GOOD}\n".encode()))
    assert import_file(tmp_path / "m.csv.gz", store).added == 1
