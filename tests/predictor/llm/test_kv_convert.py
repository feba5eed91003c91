"""The conversion cost of a quantised KV cache inside attention (predictor/llm/precision.py,
"KV-cache conversion cost"): closed form of one kernel's rows, which device path is charged,
and its effect: an fp8 cache on a device without fp8 units (A100) is slower than a 16-bit one
at long context and large batch; on H100 (native conversion) it is not penalised as much."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.llm.kernels import Segment, kv_elements_converted, step_workload
from roofcast.predictor.llm.phases import Step, time_steps
from roofcast.predictor.llm.precision import (
    FLOPS_PER_LANE_OP,
    KV_CONVERT_DTYPE,
    KV_CONVERT_OPS,
    TensorDtypes,
)
from roofcast.predictor.runtimes import get_runtime

A100, H100 = "a100-80gb-sxm", "h100-sxm"


def _convert_rows(arch, profile, kv, seg):
    rows = step_workload(arch, [seg], TensorDtypes("fp16", kv), profile)
    return rows, rows[rows["op_type"] == "KvConvert"]


@pytest.mark.parametrize("per", ["query-head", "kv-head"])
def test_one_decode_attention_kernel_converts_every_cached_element_in_closed_form(archs, per):
    arch = archs["llama-3.1-70b"]  # 64 query heads over 8 KV heads: G = 8
    vllm = get_runtime("vllm-2024")
    profile = replace(vllm, serving=replace(vllm.serving, kv_convert_per=per))
    b, ctx = 16, 3000
    rows, conv = _convert_rows(arch, profile, "fp8", Segment(b, 1, ctx))
    g = 8 if per == "query-head" else 1
    elements = 2 * b * arch.n_kv_heads * arch.head_dim * ctx * g
    assert kv_elements_converted(arch, Segment(b, 1, ctx), per == "query-head") == elements
    ops = KV_CONVERT_OPS["fp8"]
    assert dict(zip(conv["applies"], conv["flops"], strict=True)) == pytest.approx(
        {cond: n * FLOPS_PER_LANE_OP * elements for cond, n in ops.items()})
    attn = rows.loc[rows["op_type"] == "Attention", "key"].item()
    assert (conv["overlaps"] == attn).all()
    assert (conv["dtype"] == KV_CONVERT_DTYPE).all()
    assert (conv["bytes_read"] == 0).all()
    assert (conv["count"] == arch.n_layers).all()


def test_no_conversion_for_a_16_bit_cache_or_a_whole_prompt(archs):
    arch, vllm = archs["llama-3.1-70b"], get_runtime("vllm-2024")
    assert _convert_rows(arch, vllm, "fp16", Segment(8, 1, 2048))[1].empty
    # a prefill attends its own keys fresh from the QKV projection: nothing read from the cache
    assert _convert_rows(arch, vllm, "fp8", Segment(8, 512, 512))[1].empty
    # a chunk after 1024 cached tokens converts those 1024 only
    _, conv = _convert_rows(arch, vllm, "fp8", Segment(2, 512, 1536))
    assert conv["flops"].max() == pytest.approx(
        KV_CONVERT_OPS["fp8"]["no-fp8-units"] * FLOPS_PER_LANE_OP
        * 2 * 2 * arch.n_kv_heads * arch.head_dim * 1024 * 8)


def test_each_device_is_charged_its_own_path_inside_the_attention_kernel(archs):
    arch, vllm = archs["llama-3.1-70b"], get_runtime("vllm-2024")
    hws = [get_device(A100), get_device(H100)]
    st = time_steps(arch, hws, [Step("d", (Segment(32, 1, 4096),))],
                    TensorDtypes("fp16", "fp8"), vllm)
    for dev, path in ((A100, "no-fp8-units"), (H100, "fp8-units")):
        k = st.kernels("d", dev)
        attn = k[k["op_type"] == "Attention"].iloc[0]
        conv = k[k["op_type"] == "KvConvert"].set_index("applies")
        assert (conv["kernel_s"] == 0).all()  # no time of their own
        charged = max(attn["time_s"], conv.loc[path, "compute_s"])
        assert attn["kernel_s"] == pytest.approx(charged * attn["count"])
    # the software path costs more than the native one on the same device
    a100 = st.kernels("d", A100).set_index("applies")
    assert a100.loc["no-fp8-units", "compute_s"] > a100.loc["fp8-units", "compute_s"]


def _decode_ratio(arch, profile, hw, batch, ctx):
    """fp8-KV / fp16-KV decode step time on ``hw``."""
    t = [time_steps(arch, [get_device(hw)], [Step("d", (Segment(batch, 1, ctx),))],
                    TensorDtypes("fp16", kv), profile).time_s[0, 0] for kv in ("fp16", "fp8")]
    return t[1] / t[0]


def test_fp8_kv_is_slower_on_a100_and_not_penalised_as_much_on_h100(archs):
    arch, vllm = archs["llama-2-7b"], get_runtime("vllm-2024")
    a100 = _decode_ratio(arch, vllm, A100, 32, 4000)
    h100 = _decode_ratio(arch, vllm, H100, 32, 4000)
    assert a100 > 1.2  # measured on Argonne's A100: 2-5x at 1024-2048 tokens, batch 16-64
    assert h100 < a100 / 1.5
    # at batch 1 and a short context the weights dominate: the penalty all but vanishes
    assert _decode_ratio(arch, vllm, A100, 1, 256) < 1.1


def test_int8_kv_converts_on_every_device_and_stays_cheap(archs):
    arch, trt = archs["llama-2-7b"], get_runtime("tensorrt-llm-2024")
    _, conv = _convert_rows(arch, trt, "int8", Segment(8, 1, 2048))
    assert list(conv["applies"]) == [""]
    st = time_steps(arch, [get_device(A100)], [Step("d", (Segment(32, 1, 4000),))],
                    TensorDtypes("fp16", "int8"), trt)
    fp16 = time_steps(arch, [get_device(A100)], [Step("d", (Segment(32, 1, 4000),))],
                      TensorDtypes("fp16", "fp16"), trt)
    assert st.time_s[0, 0] < fp16.time_s[0, 0]  # half the bytes, cheap native conversion
