"""The one dtype table (``roofcast.dtypes``): its rows are consistent and its views agree with
what ONNX, the hardware catalog and the predictor expect."""

from __future__ import annotations

import onnx
import pytest

from roofcast import dtypes
from roofcast.dtypes import DTYPES, DType


def test_every_spelling_names_one_row():
    seen: dict[str, str] = {}
    for d in DTYPES.values():
        for spelling in (d.name, *d.onnx, *d.aliases):
            assert seen.setdefault(spelling, d.name) == d.name, f"{spelling} in two rows"


def test_onnx_itemsizes_match_onnx():
    known = onnx.TensorProto.DataType.keys()
    for name, nbytes in dtypes.ONNX_ITEMSIZE_BYTES.items():
        if name.upper() in known:
            elem = onnx.TensorProto.DataType.Value(name.upper())
            assert onnx.helper.tensor_dtype_to_np_dtype(elem).itemsize == nbytes, name
    # numpy's spellings of ONNX float and double, accepted as tensor dtype names too
    assert {n for n in dtypes.ONNX_ITEMSIZE_BYTES if n.upper() not in known} == {"float32",
                                                                                 "float64"}


def test_storage_views():
    assert dtypes.bytes_per_element("int4") == 0.5
    assert DTYPES["int4"].itemsize_bytes == 1
    assert dict(dtypes.STORAGE_BYTES) == {
        "fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1,
        "fp8_block": 1 + 4 / (128 * 128), "fp4": 0.5, "nvfp4": 0.5 + 1 / 16,
        "mxfp4": 0.5 + 1 / 32, "int8": 1}
    assert "float16" in dtypes.FLOAT_ONNX_NAMES
    assert "int64" not in dtypes.FLOAT_ONNX_NAMES


def test_user_choices():
    """fp4 and the block-scaled formats are run precisions; the LLM tensor classes keep theirs."""
    assert dtypes.PRECISIONS == ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp8_block",
                                 "fp4", "nvfp4", "mxfp4", "int8")
    assert dtypes.WEIGHT_DTYPES == ("fp32", "fp16", "bf16", "fp8", "int8", "int4")
    assert dtypes.KV_DTYPES == ("fp32", "fp16", "bf16", "fp8", "int8")
    assert dtypes.ACTIVATION_DTYPES == ("fp32", "fp16", "bf16", "fp8")


@pytest.mark.parametrize(("name", "unit", "bits_per_element"), [
    ("nvfp4", "fp4", 4.5),  # an e4m3 scale per 16 values
    ("mxfp4", "fp4", 4.25),  # an e8m0 scale per 32 values
    ("fp8_block", "fp8", 8 + 32 / (128 * 128)),  # an fp32 scale per 128x128 weight block
])
def test_block_scaled_formats_run_on_their_element_unit(name, unit, bits_per_element):
    d = DTYPES[name]
    assert d.peak_key == unit
    assert dtypes.peak_key("matrix", name) == unit
    assert d.bytes_per_element * 8 == pytest.approx(bits_per_element)
    assert dtypes.DTYPE_NAMES[name] == name


def test_spellings_of_the_new_formats():
    assert dtypes.DTYPE_NAMES["fp8-block"] == "fp8_block"
    assert dtypes.DTYPE_NAMES["mx_fp4"] == "mxfp4"
    assert dtypes.DTYPE_NAMES["float4e2m1"] == "fp4"


def test_fallbacks_name_catalog_units():
    for (engine, name), tiers in dtypes.FALLBACKS.items():
        assert engine in ("matrix", "vector")
        assert DTYPES[name].kind != "other"
        for tier in tiers:
            assert tier, (engine, name)
            assert {key for _, key in tier} <= set(dtypes.PEAK_KEYS), (engine, name)
            assert (engine, name) not in tier


def test_peak_key():
    assert dtypes.peak_key("vector", "tf32") == "fp32"
    assert dtypes.peak_key("matrix", "tf32") == "tf32"
    assert dtypes.peak_key("matrix", "int64") == "int64"  # no unit: the catalog falls back


def test_a_block_scaled_format_is_a_row():
    """nvfp4: 16 fp4 values share one fp8 scale -> 4.5 bits; its compute is the fp4 unit's."""
    nvfp4 = DType("nvfp4", 4, "float", peak_key="fp4", scale_bits=8, block=16)
    assert nvfp4.bytes_per_element == pytest.approx(4.5 / 8)
    assert nvfp4.itemsize_bytes == 1


def test_a_bad_row_is_refused():
    with pytest.raises(ValueError, match="kind"):
        DType("fp5", 5, "floaty")


def test_collector_labels_are_catalog_names_for_floats():
    from roofcast.training_data.collectors.rows import dtype_label

    assert [dtype_label(n) for n in ("float", "double", "bfloat16", "float8e4m3fn", "int64")] == [
        "fp32", "fp64", "bf16", "fp8", "int64"]
