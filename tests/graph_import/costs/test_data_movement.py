"""Data movement: 0 FLOPs on DATA; gathers/slices read only what they select; Resize taps."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from roofcast.graph_import.types import Engine
from tests.graph_import.costs.builders import (
    cost,
    direct_cost,
    f16,
    f32,
    i64,
    out,
    tensor,
)


def ints(*values):
    return np.array(values, dtype=np.int64)


def test_transpose():
    c = cost("Transpose", [f32("x", 2, 3, 4)], [out("y")], attrs={"perm": [2, 0, 1]})
    assert (c.flops, c.bytes_read, c.bytes_written) == (0, 4 * 24, 4 * 24)
    assert c.engine == Engine.DATA


def test_concat_and_split():
    cat = cost("Concat", [f32("a", 2, 3), f32("b", 2, 5)], [out("y")], attrs={"axis": 1})
    assert (cat.bytes_read, cat.bytes_written) == (4 * (6 + 10), 4 * 16)
    split = cost("Split", [f32("x", 6, 4)], [out("y0"), out("y1")],
                 attrs={"axis": 0, "num_outputs": 2})
    assert (split.flops, split.bytes_read, split.bytes_written) == (0, 4 * 24, 4 * 24)


def test_expand_reads_source_at_own_size():
    c = cost("Expand", [f32("x", 3, 1), i64("shape", 2)], [out("y")],
             initializers={"shape": ints(3, 4)})
    assert c.bytes_read == 4 * 3 + 8 * 2
    assert c.bytes_written == 4 * 3 * 4
    assert c.weight_bytes == 8 * 2  # the shape initializer


def test_tile_and_pad():
    tile = cost("Tile", [f32("x", 2, 3), i64("r", 2)], [out("y")], initializers={"r": ints(2, 2)})
    assert tile.bytes_written == 4 * 4 * 6
    pad = cost("Pad", [f32("x", 1, 2, 4, 4), i64("p", 8)], [out("y")],
               initializers={"p": ints(0, 0, 1, 1, 0, 0, 1, 1)})
    assert pad.bytes_read == 4 * 2 * 4 * 4 + 8 * 8
    assert pad.bytes_written == 4 * 2 * 6 * 6


@pytest.mark.parametrize(
    ("op", "x", "attrs"),
    [
        ("DepthToSpace", (1, 8, 2, 2), {"blocksize": 2}),
        ("SpaceToDepth", (1, 2, 4, 4), {"blocksize": 2}),
        ("Trilu", (4, 4), {}),
        ("EyeLike", (4, 4), {}),
    ],
)
def test_same_size_copies(op, x, attrs):
    c = cost(op, [f32("x", *x)], [out("y")], attrs=attrs)
    n = int(np.prod(x))
    assert (c.flops, c.bytes_read, c.bytes_written) == (0, 4 * n, 4 * n)


def test_reverse_sequence():
    c = cost("ReverseSequence", [f32("x", 5, 2, 3), i64("lens", 2)], [out("y")],
             attrs={"batch_axis": 1, "time_axis": 0})
    assert c.bytes_read == 4 * 30 + 8 * 2


def test_cast_uses_both_itemsizes():
    c = cost("Cast", [f32("x", 3, 4)], [out("y", TensorProto.FLOAT16)],
             attrs={"to": TensorProto.FLOAT16})
    assert (c.flops, c.bytes_read, c.bytes_written) == (0, 4 * 12, 2 * 12)
    like = cost("CastLike", [f32("x", 3, 4), f16("t")], [out("y", TensorProto.FLOAT16)])
    assert (like.bytes_read, like.bytes_written) == (4 * 12 + 2, 2 * 12)


def test_generators():
    cos = cost("ConstantOfShape", [i64("s", 2)], [out("y")], initializers={"s": ints(2, 3)})
    assert (cos.bytes_read, cos.bytes_written) == (8 * 2, 4 * 6)
    rng = cost("Range", [i64("a"), i64("b"), i64("d")], [out("y", TensorProto.INT64)],
               initializers={"a": ints(0)[0], "b": ints(10)[0], "d": ints(2)[0]})
    assert rng.bytes_written == 8 * 5
    onehot = cost("OneHot", [i64("i", 3), i64("depth", 1), f32("v", 2)], [out("y")],
                  initializers={"depth": ints(5), "v": np.array([0, 1], dtype=np.float32)},
                  attrs={"axis": -1})
    assert onehot.bytes_written == 4 * 3 * 5


def test_data_dependent_outputs_with_declared_shapes():
    # NonZero's output length depends on data: import reports it unresolved; cost it directly
    nz = direct_cost("NonZero", [tensor("x", "float", 3, 4)], [tensor("y", "int64", 2, 5)])
    assert (nz.bytes_read, nz.bytes_written) == (4 * 12, 8 * 2 * 5)
    comp = direct_cost("Compress", [tensor("x", "float", 4, 3), tensor("c", "bool", 4)],
                       [tensor("y", "float", 2, 3)], attrs={"axis": 0})
    assert (comp.bytes_read, comp.bytes_written) == (4 * 12 + 4, 4 * 6)


def test_gather_embedding_reads_selected_rows_only():
    c = cost("Gather", [f32("table", 100, 16), i64("ids", 2, 5)], [out("y")],
             initializers={"table": np.zeros((100, 16), np.float32)})
    assert c.bytes_read == 8 * 10 + 4 * 10 * 16
    assert c.weight_bytes == 4 * 10 * 16
    assert c.bytes_written == 4 * 10 * 16
    assert (c.flops, c.engine) == (0, Engine.DATA)


def test_gather_repeated_indices_read_source_at_most_once():
    c = cost("Gather", [f32("x", 4, 8), i64("ids", 100)], [out("y")])
    assert c.bytes_read == 4 * 4 * 8 + 8 * 100


def test_gather_elements_and_nd():
    ge = cost("GatherElements", [f32("x", 3, 4), i64("i", 3, 2)], [out("y")], attrs={"axis": 1})
    assert ge.bytes_read == 4 * 6 + 8 * 6
    gnd = cost("GatherND", [f32("x", 2, 3, 4), i64("i", 2, 2)], [out("y")])
    assert gnd.bytes_read == 4 * 2 * 4 + 8 * 4
    assert gnd.bytes_written == 4 * 2 * 4


def test_slice_reads_the_slice():
    c = cost("Slice", [f32("x", 10, 20), i64("s", 1), i64("e", 1), i64("a", 1)], [out("y")],
             initializers={"s": ints(2), "e": ints(7), "a": ints(0)})
    assert c.bytes_read == 4 * 5 * 20 + 8 * 3
    assert c.bytes_written == 4 * 5 * 20


def test_scatter_nd_with_and_without_reduction():
    inputs = [f32("x", 8, 4), i64("i", 2, 1), f32("u", 2, 4)]
    plain = cost("ScatterND", inputs, [out("y")])
    assert plain.bytes_read == 4 * 32 + 8 * 2 + 4 * 8
    assert plain.bytes_written == 4 * 32
    assert (plain.flops, plain.engine) == (0, Engine.DATA)
    add = cost("ScatterND", inputs, [out("y")], attrs={"reduction": "add"})
    assert (add.flops, add.engine) == (2 * 4, Engine.VECTOR)


def test_scatter_elements_and_legacy_scatter():
    inputs = [f32("x", 3, 3), i64("i", 1, 2), f32("u", 1, 2)]
    c = cost("ScatterElements", inputs, [out("y")])
    assert c.bytes_read == 4 * 9 + 8 * 2 + 4 * 2
    legacy = cost("Scatter", inputs, [out("y")], opset=10)
    assert legacy.bytes_written == 4 * 9


@pytest.mark.parametrize(
    ("mode", "flops", "engine"),
    [
        ("nearest", 0, Engine.DATA),
        ("linear", 2 * 2**2 * (3 * 8 * 8), Engine.VECTOR),  # 2 interpolated axes -> 4 taps
        ("cubic", 2 * 4**2 * (3 * 8 * 8), Engine.VECTOR),
    ],
)
def test_resize(mode, flops, engine):
    c = cost("Resize", [f32("x", 1, 3, 4, 4), None, f32("scales", 4)], [out("y")],
             attrs={"mode": mode},
             initializers={"scales": np.array([1, 1, 2, 2], dtype=np.float32)})
    assert (c.flops, c.engine) == (flops, engine)
    assert c.bytes_read == 4 * 48 + 4 * 4
    assert c.bytes_written == 4 * 3 * 8 * 8


def test_upsample_opset9():
    c = cost("Upsample", [f32("x", 1, 3, 4, 4), f32("scales", 4)], [out("y")],
             initializers={"scales": np.array([1, 1, 2, 2], dtype=np.float32)}, opset=9)
    assert (c.flops, c.bytes_written) == (0, 4 * 3 * 8 * 8)


@pytest.mark.parametrize(("mode", "flops"), [("linear", 2 * 4 * 18), ("nearest", 0)])
def test_grid_sample(mode, flops):
    c = cost("GridSample", [f32("x", 1, 2, 4, 4), f32("g", 1, 3, 3, 2)], [out("y")],
             attrs={"mode": mode})
    assert c.flops == flops
    assert c.bytes_written == 4 * 2 * 3 * 3


def test_center_crop_pad():
    c = cost("CenterCropPad", [f32("x", 4, 6), i64("s", 2)], [out("y")],
             initializers={"s": ints(2, 8)})
    assert (c.flops, c.bytes_read, c.bytes_written) == (0, 4 * 24 + 8 * 2, 4 * 2 * 8)


def test_max_unpool():
    c = cost("MaxUnpool", [f32("x", 1, 1, 2, 2), i64("i", 1, 1, 2, 2)], [out("y")],
             attrs={"kernel_shape": [2, 2], "strides": [2, 2]})
    assert (c.bytes_read, c.bytes_written) == (4 * 4 + 8 * 4, 4 * 16)


def test_tensor_scatter_kv_cache_update():
    c = cost("TensorScatter", [f32("past", 2, 4, 16, 8), f32("upd", 2, 4, 1, 8), i64("pos", 2)],
             [out("present")], opset=24)
    assert c.bytes_read == 4 * (2 * 4 * 16 * 8 + 2 * 4 * 1 * 8) + 8 * 2
    assert c.bytes_written == 4 * 2 * 4 * 16 * 8
