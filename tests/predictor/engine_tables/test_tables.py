"""engine_tables: built from aiconfigurator-style files, looked up per row, the road's labels,
intervals and what-if ratio."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from roofcast.hw_catalog import derive, get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.engine_tables.build import build
from roofcast.predictor.engine_tables.estimator import (
    LABEL,
    RATIO_LABEL,
    TABLE_BAND,
    EngineTablesEstimator,
)
from roofcast.predictor.engine_tables.store import load
from roofcast.predictor.estimator_registry import make_estimator
from roofcast.predictor.features import featurize
from roofcast.predictor.runtimes import get_runtime
from tests.predictor.estimator_helpers import gemm_row

TRT = get_runtime("tensorrt-llm")
H100 = "NVIDIA H100 80GB HBM3"


def _gemm_file(version: str) -> pd.DataFrame:
    """A 2 x 2 x 2 fp8 grid, each shape timed twice (the faster counts)."""
    rows = []
    for m in (64, 512):
        for n in (1024, 4096):
            for k in (1024, 4096):
                ms = 1e-3 * (5 + m * n * k / 1e8)
                rows += [["TRTLLM", version, H100, "gemm", "x", "fp8", m, n, k, t]
                         for t in (ms, 1.5 * ms)]
    return pd.DataFrame(rows, columns=["framework", "version", "device", "op_name",
                                       "kernel_source", "gemm_dtype", "m", "n", "k", "latency"])


@pytest.fixture(scope="module")
def tables_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared")
    folder = root / "aiconfigurator"
    rel = f"data/h100_sxm/gemm/trtllm/{TRT.serving.version}/gemm_perf.parquet"
    (folder / rel).parent.mkdir(parents=True)
    _gemm_file(TRT.serving.version).to_parquet(folder / rel)
    pd.DataFrame([{"path": rel, "table": "gemm_perf", "device": H100, "backend": "trtllm",
                   "version": TRT.serving.version}]).to_csv(folder / "INDEX.csv", index=False)
    out = root / "tables"
    build(root, out)
    return out


def _gemm_rows(hw, m: int, n: int = 2048, k: int = 2048):
    w = pd.DataFrame([{**gemm_row(m, n, k, dtype="fp8", elem=1), "op_type": "Gemm"}])
    return featurize(w, [hw], RunConfig(runtime=TRT), TRT)


def test_build_keeps_the_fastest_time_per_shape_and_names_the_version(tables_dir):
    t = load(tables_dir)
    assert t.version("h100-sxm", "tensorrt-llm") == TRT.serving.version
    X = _gemm_rows(get_device("h100-sxm"), 512, 4096, 4096)
    assert t.times(X, {"tensorrt-llm": TRT.serving.version})[0] == pytest.approx(
        1e-6 * (5 + 512 * 4096 * 4096 / 1e8), rel=5e-3)  # float16 log storage: < 0.4 %
    # another engine version of the same runtime, or another device, has no table
    assert np.isnan(t.times(X, {"tensorrt-llm": "0.9"})).all()
    assert np.isnan(t.times(_gemm_rows(get_device("h200"), 512), {"tensorrt-llm": "x"})).all()


def test_road_takes_the_table_with_its_band_and_the_model_elsewhere(tables_dir):
    est = EngineTablesEstimator(tables_dir=tables_dir, fallback=make_estimator("time-roofline"))
    auto = make_estimator("auto")
    hw = get_device("h100-sxm")
    on, off = _gemm_rows(hw, 200), _gemm_rows(hw, 200, k=8192)  # k past the 1024..4096 axis
    got = est.explain(on).iloc[0]
    assert got["predictor"] == LABEL
    assert not got["ood"]
    assert (got["lower_s"], got["upper_s"]) == pytest.approx(
        (got["time_s"] * (1 - TABLE_BAND), got["time_s"] * (1 + TABLE_BAND)))
    pd.testing.assert_frame_equal(est.explain(off), auto.explain(off))


def test_a_what_if_device_keeps_the_table_times_the_models_ratio(tables_dir):
    est = EngineTablesEstimator(tables_dir=tables_dir)
    hw = get_device("h100-sxm")
    fast = derive(hw, mem_bw_GBps=2 * hw.mem_bw_Bps / 1e9, launch_overhead_us=0.5)
    base, what_if = est.explain(_gemm_rows(hw, 64)), est.explain(_gemm_rows(fast, 64))
    model = EngineTablesEstimator(tables_dir=tables_dir / "none")  # no tables: the model alone
    ratio = (model.explain(_gemm_rows(fast, 64))["time_s"].iloc[0]
             / model.explain(_gemm_rows(hw, 64))["time_s"].iloc[0])
    assert what_if["predictor"].iloc[0] == f"{RATIO_LABEL} (h100-sxm)"
    assert ratio < 1  # the model sees the faster memory, so the what-if acts
    assert what_if["time_s"].iloc[0] == pytest.approx(base["time_s"].iloc[0] * ratio)


def test_serving_steps_on_a_measured_device_read_the_shipped_tables():
    """A TensorRT-LLM decode step on an H100 (the profile's own road): its projection GEMMs,
    attention and LM head come from the engine's tables, the other kernels from the model; a
    device the tables do not hold reads its sibling's (B300: the B200's) through the ratio."""
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.predictor.llm.kernels import Segment
    from roofcast.predictor.llm.phases import Step, engine_profile, time_steps
    from roofcast.predictor.llm.precision import TensorDtypes

    arch = load_llm("llama-3.1-8b")
    hws = [get_device("h100-sxm"), get_device("b300")]
    st = time_steps(arch, hws, [Step("d", (Segment(64, 1, 2048),))],
                    TensorDtypes("fp8", "fp8", "bf16"), engine_profile("tensorrt-llm", hws[0]),
                    None)
    k = st.kernels("d", "h100-sxm").set_index("node")
    assert set(k.index[k["predictor"] == LABEL]) == {"qkv", "o_proj", "up", "down", "attn0",
                                                     "lm_head"}  # 128,256 columns: split
    assert k.loc["attn0", "attn_kv_dtype"] == "fp8"
    b300 = st.kernels("d", "b300").set_index("node")["predictor"]
    assert LABEL not in set(b300)
    assert b300["attn0"] == b300["qkv"] == f"{RATIO_LABEL} (b200)"


def test_moe_modules_read_the_tables_without_expert_parallelism_only():
    """Mixtral's expert module on an H100 under TensorRT-LLM, fp8: the table's row of its own
    expert shape; split over two expert groups (ep 2) the module is the busiest group's share,
    which the tables (timed without expert parallelism here) do not hold: the model."""
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.predictor.llm.kernels import Segment
    from roofcast.predictor.llm.phases import Step, engine_profile, time_steps
    from roofcast.predictor.llm.precision import TensorDtypes

    hw = get_device("h100-sxm")
    timed = {ep: time_steps(load_llm("mixtral-8x7b"), [hw], [Step("d", (Segment(64, 1, 2048),))],
                            TensorDtypes("fp8", "fp8", "bf16"),
                            engine_profile("tensorrt-llm", hw), None, ep=ep)
             for ep in (1, 2)}
    one, two = (timed[ep].kernels("d", "h100-sxm").set_index("node") for ep in (1, 2))
    assert one.loc["experts", "predictor"] == LABEL
    assert one.loc["experts", "moe_tokens"] == 64
    assert two.loc["experts", "predictor"] != LABEL
    assert np.isnan(two.loc["experts", "moe_tokens"])


@pytest.mark.parametrize("rate", [None, 2.0])
def test_a_serving_answer_says_how_much_of_its_step_time_was_measured(rate):
    import roofcast

    sim = {} if rate is None else {"rate": rate, "requests": 200}
    got = roofcast.llm("llama-3.1-8b", ["h100-sxm", "b300"], runtime="tensorrt-llm",
                       weights="fp8", **sim).set_index("device")["notes"]
    share = re.findall(r"(\d+)% of the step kernels' time read from tensorrt-llm's own measured",
                       str(got["h100-sxm"]))
    assert len(share) == 1
    assert 50 <= int(share[0]) <= 100  # GEMMs, attention and LM head: most of it
    # no tables of its own: Blackwell Ultra borrows the B200's, scaled by the model's ratio
    assert "own measured tables" not in str(got["b300"])
    assert "measured tables on b200, scaled to this device" in str(got["b300"])


def test_weights_stored_narrower_than_the_math_are_another_kernel():
    """int4 (W4A16) projections read a quarter of the bf16 kernel's weight bytes: the table's
    bf16 GEMM is not their kernel, so they keep the model; the KV-reading attention does not
    care how the weights are stored."""
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.predictor.llm.kernels import Segment
    from roofcast.predictor.llm.phases import Step, engine_profile, time_steps
    from roofcast.predictor.llm.precision import TensorDtypes

    hw = get_device("h100-sxm")
    st = time_steps(load_llm("llama-3.1-8b"), [hw], [Step("d", (Segment(4, 1, 1024),))],
                    TensorDtypes("int4", "bf16", "bf16"), engine_profile("vllm", hw), None)
    k = st.kernels("d", "h100-sxm").set_index("node")["predictor"]
    assert LABEL not in {k["qkv"], k["o_proj"], k["up"], k["down"]}
    assert k["attn0"] == LABEL


def test_mla_decode_reads_the_engines_latent_attention_rows_prefill_does_not():
    """DeepSeek-V3 on 8 x H200 (tp 8: 16 heads a device) under TensorRT-LLM: the decode step's
    MLA attention is the engine's generation-MLA kernel (heads over one latent KV head of 576
    channels); the prefill's decompressed attention has no table of that form."""
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.predictor.llm.kernels import Segment
    from roofcast.predictor.llm.phases import Step, engine_profile, time_steps
    from roofcast.predictor.llm.precision import TensorDtypes
    from roofcast.predictor.sharding import Sharding, local_arch

    hw = get_device("h200")
    st = time_steps(local_arch(load_llm("deepseek-v3"), Sharding(tp=8)), [hw],
                    [Step("d", (Segment(64, 1, 2048),)), Step("p", (Segment(1, 512, 512),))],
                    TensorDtypes("fp8_block", "fp8", "bf16"),
                    engine_profile("tensorrt-llm", hw), None)
    decode = st.kernels("d", "h200").set_index("node")
    assert decode.loc["k1.attn0", "predictor"] == LABEL
    assert (decode.loc["k1.attn0", "attn_heads"], decode.loc["k1.attn0", "attn_head_dim"]) \
        == (16, 576)
    assert st.kernels("p", "h200").set_index("node").loc["k1.attn0", "predictor"] != LABEL
