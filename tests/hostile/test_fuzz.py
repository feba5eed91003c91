"""Property-based fuzzing (Hypothesis) of the four loaders a user's input reaches.

(a) small ONNX graphs built with ``onnx.helper`` (op types from the cost registry plus unknown
    ones, shapes with 0 / negative / symbolic / huge dims, random attributes and initializers,
    random ``--dim`` bindings) through ``import_model``: a ``Graph`` or a ``ModelImportError``;
(b) device TOML text through the catalog loader and inline what-if strings through
    ``get_device``: a spec whose figures are finite and positive, or a ``HardwareSpecError``
    (a bad file is skipped with a ``DeviceFileWarning``);
(c) CLI argument lists through ``roofcast.app.cli.main``: exit 0 or 2 (argparse's usage error is
    also 2), never a traceback;
(d) CSV rows through the measurement importer: every row lands, or a ``MeasurementError``.

Settings: ``FUZZ`` (a fixed example count, no deadline, derandomized so CI is repeatable) keeps
the module around a minute on a 2-core machine; ``ROOFCAST_FUZZ_EXAMPLES`` raises the count for a
longer local run. ``test_targeted_import_run`` is the coverage-guided part: Hypothesis's targeted
search (``target()``) steers graphs toward many nodes and large declared element counts, within
a fixed time budget (``ROOFCAST_FUZZ_SECONDS``, default 8 s).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import time
import warnings
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, seed, settings, target
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from roofcast.graph_import import Graph, import_model
from roofcast.graph_import.errors import ModelImportError
from roofcast.hw_catalog import HardwareSpecError, get_device, load_catalog
from roofcast.hw_catalog.derive import SCALES
from roofcast.hw_catalog.errors import DeviceFileWarning
from roofcast.training_data.errors import MeasurementError

EXAMPLES = int(os.environ.get("ROOFCAST_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])

# ----------------------------------------------------------------------------- (a) ONNX graphs
COMMON_OPS = ["Relu", "Add", "Mul", "MatMul", "Gemm", "Conv", "MaxPool", "Reshape", "Transpose",
              "Softmax", "Concat", "Slice", "Gather", "Cast", "Shape", "Range", "Expand",
              "ConstantOfShape", "Tile", "ReduceMean", "LayerNormalization", "Identity", "Split",
              "Unsqueeze", "Squeeze", "Where", "Pad", "Resize", "LSTM", "Einsum", "TopK"]
UNKNOWN_OPS = ["Frobnicate", "relu", "", "Conv2D", "MatMul\x00"]
DTYPES = [TensorProto.FLOAT, TensorProto.INT64, TensorProto.FLOAT16, TensorProto.BOOL,
          TensorProto.STRING, TensorProto.INT8, 0, 999]


def _registry_ops() -> list[str]:
    from roofcast.graph_import.costs.registry import registered_ops
    return sorted({op for (_domain, op) in registered_ops()})


dims = st.one_of(st.integers(-3, 8), st.sampled_from([0, 2**31, 2**40, 2**62, 2**63 - 1]),
                 st.sampled_from(["batch", "s", "n*2", "s*s*s", "?", ""]))
shapes = st.none() | st.lists(dims, max_size=4)
attr_values = st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True),
                        st.lists(st.integers(-10, 2**40), max_size=5),
                        st.text(max_size=8), st.binary(max_size=8))
attrs = st.dictionaries(st.sampled_from(["axis", "group", "kernel_shape", "pads", "strides",
                                         "perm", "to", "keepdims", "transA", "alpha", "mode",
                                         "dilations", "axes", "bogus"]),
                        attr_values, max_size=3)


@st.composite
def initializers(draw, name: str) -> TensorProto:
    kind = draw(st.sampled_from(["float", "int64", "mismatch", "string", "empty"]))
    shape = draw(st.lists(st.integers(0, 4), max_size=3))
    size = int(np.prod(shape)) if shape else 1
    if kind == "float":
        return numpy_helper.from_array(np.ones(shape, np.float32), name)
    if kind == "int64":
        values = draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=size, max_size=size))
        return numpy_helper.from_array(np.array(values, np.int64).reshape(shape), name)
    if kind == "mismatch":
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape)
        t.float_data.extend([1.0] * draw(st.integers(0, size + 3)))
        return t
    if kind == "string":
        return helper.make_tensor(name, TensorProto.STRING, [2], [b"a", b"b"])
    return TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape)


@st.composite
def onnx_models(draw) -> tuple[bytes, dict[str, int]]:
    ops = COMMON_OPS + _registry_ops()
    n_inputs = draw(st.integers(0, 2))
    inputs = [helper.make_tensor_value_info(f"x{i}", draw(st.sampled_from(DTYPES[:4])),
                                            draw(shapes)) for i in range(n_inputs)]
    inits = [draw(initializers(f"w{i}")) for i in range(draw(st.integers(0, 2)))]
    names = [v.name for v in inputs] + [t.name for t in inits] + ["", "missing"]
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(ops) | st.sampled_from(UNKNOWN_OPS))
        ins = draw(st.lists(st.sampled_from(names), max_size=3))
        node = helper.make_node(op, ins, [f"t{i}"], name=f"n{i}")
        for key, value in draw(attrs).items():
            with contextlib.suppress(Exception):  # helper refuses some values: keep the node
                node.attribute.append(helper.make_attribute(key, value))
        nodes.append(node)
        names.append(f"t{i}")
    outputs = [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, inits)
    opset = draw(st.sampled_from([7, 13, 17, 21, 1, 99]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = draw(st.sampled_from([3, 8, 10, 99]))
    bindings = draw(st.dictionaries(st.sampled_from(["batch", "s", "n", "x0:0", "x1:1"]),
                                    st.integers(1, 2**31 - 1) | st.sampled_from([0, -1, 2**40]),
                                    max_size=2))
    return model.SerializeToString(), bindings


def _import(data: bytes, bindings: dict[str, int]) -> Graph | None:
    try:
        graph = import_model(data, dims=bindings)
    except ModelImportError as exc:
        message = str(exc)
        assert message.strip(), "a ModelImportError needs a message"
        return None
    assert isinstance(graph, Graph)
    return graph


@FUZZ
@given(onnx_models())
def test_any_onnx_graph_imports_or_is_refused(case):
    _import(*case)


@given(onnx_models(), st.binary(min_size=1, max_size=16), st.integers(0, 2**16))
@FUZZ
def test_corrupted_onnx_bytes_import_or_are_refused(case, noise, where):
    data, bindings = case
    pos = where % len(data)
    _import(data[:pos] + noise + data[pos + len(noise):], bindings)


def test_targeted_import_run():
    """Coverage-guided in Hypothesis's way: ``target()`` pushes toward bigger graphs and larger
    imported graphs (where the budgets bite), in batches of 20 examples with a new seed each,
    until a fixed time budget is spent (Hypothesis itself has no time budget)."""
    budget_s = float(os.environ.get("ROOFCAST_FUZZ_SECONDS", "8"))

    @settings(max_examples=20, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(onnx_models())
    def run(case):
        graph = _import(*case)
        target(float(len(case[0])), label="model bytes")
        if graph is not None:
            target(float(graph.nx_graph.number_of_nodes()), label="nodes imported")

    stop, batches = time.monotonic() + budget_s, 0
    while time.monotonic() < stop:
        seed(batches)(run)()
        batches += 1
    assert batches >= 1


# ----------------------------------------------------------------------------- (b) devices
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**30),
                    st.sampled_from(["1e-320", "1e300", "nan", "inf", "-0", "0x10", "1_000",
                                     "", "abc"]))
SPEC_FIELDS = ("mem_bw_Bps", "mem_capacity_bytes", "l2_bytes", "clock_Hz", "launch_overhead_s")


def _check_spec(spec) -> None:
    for field in SPEC_FIELDS:
        value = getattr(spec, field)
        assert math.isfinite(value), f"{field} = {value}"
        assert value > 0, f"{field} = {value}"
    assert spec.units > 0
    for key, value in spec.peak_flops.items():
        assert math.isfinite(value), f"peak {key} = {value}"
        assert value > 0, f"peak {key} = {value}"


@FUZZ
@given(st.sampled_from([*SCALES, "mem_bw_GBps", "l2_MB", "units", "mem_GB", "clock_MHz",
                        "launch_overhead_us", "bogus", ""]), numbers,
       st.sampled_from(["h100-sxm", "a100-40gb-pcie", "nosuch", ""]))
def test_what_if_strings_give_a_sane_device_or_an_error(key, value, base):
    try:
        spec = get_device(f"{base}:{key}={value}")
    except HardwareSpecError:
        return
    _check_spec(spec)


def _toml_value(value) -> str:
    if isinstance(value, str):
        return value or '""'
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return repr(value)


@FUZZ
@given(st.dictionaries(st.sampled_from([*SCALES, "memory.bandwidth_GBps", "cache.l2_MB",
                                        "compute.units", "memory.capacity_GB", "kind", "base",
                                        "overhead.launch_overhead_us", "peak_TOPS.matrix.fp16"]),
                       numbers, max_size=4),
       st.booleans(), st.binary(max_size=12))
def test_device_files_load_sane_or_are_skipped(tmp_path_factory, fields, derived, junk):
    folder = tmp_path_factory.mktemp("devices")
    lines = ['id = "fz"']
    if derived:
        lines.append('base = "h100-sxm"')
    lines += [f"{k} = {_toml_value(v)}" for k, v in fields.items() if k != "base"]
    (folder / "fz.toml").write_bytes("\n".join(lines).encode() + b"\n" + junk)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeviceFileWarning)
        catalog = load_catalog(user_folder=folder)
    try:
        spec = catalog.get("fz")
    except HardwareSpecError:
        return
    _check_spec(spec)


# ----------------------------------------------------------------------------- (c) CLI args
ZOO_SMALL = str(Path(__file__).resolve().parents[2] / "training_data" / "zoo" / "lstm_lm.onnx")
words = st.sampled_from(["--dim", "--batch", "--hw", "--format", "--estimator", "--precision",
                         "--mode", "--top", "--threads", "--fusion", "--inter-op", "batch=0",
                         "batch=-1", "batch=99999999999", "sequence=8", "h100-sxm",
                         "h100-sxm:peak_scale=1e-320", "json", "xml", "nosuch", "", "-",
                         "fp16", "train", "0", "-5", "1e3"])


@FUZZ
@given(st.sampled_from([["predict", ZOO_SMALL], ["inspect", ZOO_SMALL], ["hw", "show"],
                        ["compare", ZOO_SMALL], ["hw", "list"]]),
       st.lists(words | st.text(max_size=6), max_size=6))
def test_cli_argument_lists_end_in_0_or_2_without_traceback(head, tail):
    from roofcast.app.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main([*head, *tail])
        except SystemExit as exc:  # argparse's usage error
            code = exc.code
    assert code in (0, 2), (code, err.getvalue()[-500:])
    assert "Traceback" not in err.getvalue()


def test_cli_predicts_a_model_with_a_zero_dim_without_traceback(tmp_path):
    from roofcast.app.cli import main

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "zero.onnx"
    path.write_bytes(model.SerializeToString())
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["predict", str(path), "--hw", "h100-sxm", "--format", "json"])
    assert code == 0
    doc = json.loads(out.getvalue())
    assert doc["time_ms"] == 0  # no element to touch: no work
    assert doc["throughput_samples_per_s"] is None  # not a division by zero


# ----------------------------------------------------------------------------- (d) CSV rows
cells = st.one_of(st.text(max_size=10), numbers.map(str),
                  st.sampled_from(["=cmd|' /C calc'!A0", "1e19", "[[64,64],[64,64]]", "[[-1]]",
                                   "[[1e30]]", "{}", "[", "null", "MatMul", "h100-sxm", "fp32"]))
COLUMNS = ["op_type", "device_id", "dtype", "latency_s", "input_shapes", "flops", "batch",
           "threads_intra", "attrs", "run_id"]


INT_COLUMNS = ("batch", "threads_intra", "run_id")


@st.composite
def csv_rows(draw, optional: tuple[str, ...]) -> list[dict[str, str]]:
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        row = {"op_type": draw(st.sampled_from(["MatMul", "Conv", "Relu"]) | cells),
               "device_id": draw(st.sampled_from(["h100-sxm", "a100-40gb-pcie"]) | cells),
               "dtype": draw(st.sampled_from(["fp32", "fp16"]) | cells),
               "latency_s": draw(st.sampled_from(["0.001", "2e-5"]) | cells)}
        for col in draw(st.lists(st.sampled_from(optional), max_size=3, unique=True)):
            row[col] = draw(cells)
        rows.append(row)
    return rows


def _rows_land_or_are_refused(folder: Path, rows: list[dict[str, str]]) -> None:
    import csv

    from roofcast.training_data.importers import import_file
    from roofcast.training_data.store import Store

    path = folder / "m.csv"
    header = sorted({k for r in rows for k in r}, key=COLUMNS.index)
    with path.open("w", newline="", encoding="utf-8", errors="surrogatepass") as fh:
        writer = csv.DictWriter(fh, header)
        writer.writeheader()
        writer.writerows(rows)
    store = Store(folder / "store.sqlite")
    try:
        report = import_file(path, store)
    except MeasurementError as exc:
        message = str(exc)
        assert message.strip(), "a MeasurementError needs a message"
        return
    assert report.added + report.duplicates == len(rows) == report.rows_read


@FUZZ
@given(csv_rows(tuple(c for c in COLUMNS[4:] if c not in INT_COLUMNS)))
def test_csv_rows_land_or_are_refused(tmp_path_factory, rows):
    _rows_land_or_are_refused(tmp_path_factory.mktemp("csv"), rows)


@FUZZ
@given(csv_rows(INT_COLUMNS))
@example(rows=[{"op_type": "MatMul", "device_id": "h100-sxm", "dtype": "fp32",
                "latency_s": "0.001", "batch": "1e19"}])
def test_csv_integer_cells_land_or_are_refused(tmp_path_factory, rows):
    _rows_land_or_are_refused(tmp_path_factory.mktemp("csv"), rows)
