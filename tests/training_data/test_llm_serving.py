"""Argonne's serving rows as a tidy table: every row read is kept or counted with a reason;
llama.cpp's "batch" is one request's prompt batch; dtypes, TTFT and power are read as stated."""

from __future__ import annotations

import pandas as pd
import pytest

from roofcast.training_data.public.llm_serving import FILES, SUBDIR, load_serving
from roofcast.training_data.public_kernels import PublicDataError, shared_data_dir

HEAD = "Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency,Throughput"


def _folder(tmp_path, all_rows: list[str]):
    d = tmp_path / SUBDIR
    d.mkdir(parents=True)
    (d / FILES["all"]).write_text("\n".join([HEAD, *all_rows]) + "\n")
    (d / FILES["quant"]).write_text(
        "Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,kv_cache_dtype,"
        "latency,throughput\n\n"
        'Nvidia H100 GPU,1,vLLM,meta-llama/Meta-Llama-3-8B,128,1,"Weight = fp8, KV Cache = fp8"'
        ",1.0,256\n")
    (d / FILES["ttft"]).write_text(
        "Hardware,Num of Hardware,Framework,Model,Input Length,Output Length,Batch Size,"
        "TTFT Latency,end_latency \n"
        "Nvidia GH200 GPU,1,TensorRT-LLM,meta-llama/Llama-2-7b-hf,1024,1,16,0.33\n")
    (d / FILES["power"]).write_text(
        HEAD + ",avg_power\nNvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,1024,1,14.0,146,"
        "222122.3\n")
    return tmp_path


def test_every_row_is_kept_or_counted_with_its_reason(tmp_path):
    folder = _folder(tmp_path, [
        "Nvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,128,16,2.0,2048",
        "Nvidia H100 GPU,1,llama.cpp,mistralai/Mistral-7B-v0.1,256,16,2.5,3276.8",
        "Nvidia H100 GPU,4,vLLM,meta-llama/Llama-2-70b-hf,128,16,2.0,2048",
        "SambaNova SN40L,1,vLLM,meta-llama/Llama-2-7b-hf,128,1,1.0,256",
        "Habana Gaudi2,1,Deepspeed,meta-llama/Llama-2-7b-hf,128,1,1.0,256",
        "AMD MI300X GPU,1,vLLM,Deci/DeciLM-7B,128,1,1.0,256",
        "AMD MI300X GPU,1,vLLM,huggyllama/llama-7b,2048,1,0.05,90000",
    ])
    t = load_serving(folder)
    assert len(t.rows) + sum(t.excluded.values()) == 7 + 3  # + quant, TTFT, power rows
    assert t.excluded == {
        "multi-device (Nvidia H100 GPU x4): parallel serving is not modelled here": 1,
        "device SambaNova SN40L is not in the hardware catalog": 1,
        "engine Deepspeed has no runtime profile": 1,
        "model Deci/DeciLM-7B has no bundled config": 1,
        "input + output beyond llama-7b's maximum context: the engine stops generating (the "
        "latency is about a prefill's)": 1,
    }
    r = t.rows.set_index("figure")
    a = t.rows[t.rows["figure"] == "all"].set_index("engine")
    assert a.loc["vllm-2024", "device"] == "a100-40gb-sxm"
    assert a.loc["vllm-2024", "model"] == "llama-2-7b"
    assert a.loc["vllm-2024", "requests"] == 16
    assert a.loc["vllm-2024", "throughput_tok_s"] == pytest.approx(16 * 256 / 2.0)
    # llama.cpp's batch column is its prompt batch: one request
    assert a.loc["llama.cpp", "requests"] == 1
    assert a.loc["llama.cpp", "throughput_tok_s"] == pytest.approx(512 / 2.5)
    assert (r.loc["quant", "weights"], r.loc["quant", "kv_cache"]) == ("fp8", "fp8")
    assert r.loc["ttft", "ttft_s"] == pytest.approx(0.33)
    assert pd.isna(r.loc["ttft", "latency_s"])  # a TTFT row without end latency is kept
    assert r.loc["power", "avg_power_W"] == pytest.approx(222.1223)
    assert t.data_hash != load_serving(_folder(tmp_path / "b", [
        "Nvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,128,16,2.1,2048"])).data_hash
    assert "excluded" in t.summary()


def test_an_unreadable_dtype_label_and_a_missing_folder_are_refused(tmp_path):
    folder = _folder(tmp_path, [])
    q = folder / SUBDIR / FILES["quant"]
    q.write_text(q.read_text().replace("Weight = fp8, KV Cache = fp8", "w8 kv8"))
    with pytest.raises(PublicDataError, match="unreadable kv_cache_dtype"):
        load_serving(folder)
    with pytest.raises(PublicDataError, match="ROOFCAST_SHARED_DATA"):
        load_serving(tmp_path / "nowhere")


def test_the_bundled_files_read_as_documented():
    folder = shared_data_dir()
    if not (folder / SUBDIR).is_dir():
        pytest.skip(f"public LLM data not found under {folder} (set ROOFCAST_SHARED_DATA)")
    t = load_serving(folder)
    read = sum(len(pd.read_csv(folder / SUBDIR / f).dropna(how="all")) for f in FILES.values())
    assert len(t.rows) + sum(t.excluded.values()) == read
    assert (t.rows["n_devices"] == 1).all()
    assert set(t.rows["engine"]) == {"vllm-2024", "tensorrt-llm-2024", "llama.cpp", "deepspeed-mii"}
    cpp = t.rows[t.rows["engine"] == "llama.cpp"]
    assert (cpp["requests"] == 1).all()
    assert sum(n for why, n in t.excluded.items() if why.startswith("multi-device")) > 3000
    p = t.rows[t.rows["figure"] == "power"]["avg_power_W"]
    assert p.between(100, 1000).all()
