"""One list of hostile CLI inputs shared by ``benchmarks/hostile_inputs.py`` and the tests.

A ``Case`` is a surface name (``onnx``, ``zoo-mutant``, ``cli-args``, ``hw-whatif``,
``device-folder``, ``model-folder``, ``measurements``, ``wrong-file``) plus ``prepare``: given a
``Sandbox`` (temp folders for inputs, data, devices and the model) it writes whatever files the
case needs and returns the ``roofcast`` argument list and extra environment variables. The
builders of ``tests/hostile/onnx_builders.py`` and the damage tables of
``test_device_files.py`` / ``test_model_folders.py`` are reused as they are; the rest (mutated
zoo files, random bytes, wrong extensions, argument lists, measurement CSVs) is generated here
from a fixed seed, so the corpus is the same on every run.
"""

from __future__ import annotations

import gzip
import io
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.hostile.onnx_builders import HOSTILE, model_bytes

ZOO = Path(__file__).resolve().parents[2] / "training_data" / "zoo"
SEED = 17
#: a user file the benchmark puts in the data and device folders; it must survive every case
KEEP_FILE = "keep-me.txt"


@dataclass(frozen=True)
class Sandbox:
    """The folders one case may use: ``inputs`` (files the case writes), ``data``
    (``ROOFCAST_DATA_DIR``), ``hw`` (``ROOFCAST_HW_DIR``), ``model`` (a copy of the shipped
    learned model folder, made by the cases that damage it)."""

    inputs: Path
    data: Path
    hw: Path
    model: Path


Prepared = tuple[list[str], dict[str, str]]


@dataclass(frozen=True)
class Case:
    surface: str
    name: str
    prepare: Callable[[Sandbox], Prepared]


# ----------------------------------------------------------------------------- helpers
def _write(sb: Sandbox, name: str, data: bytes) -> Path:
    path = sb.inputs / name
    path.write_bytes(data)
    return path


def _file_case(surface: str, name: str, file_name: str, data: Callable[[], bytes],
               argv: Callable[[Path], list[str]]) -> Case:
    def prepare(sb: Sandbox) -> Prepared:
        return argv(_write(sb, file_name, data())), {}
    return Case(surface, name, prepare)


def _args_case(surface: str, args: list[str]) -> Case:
    return Case(surface, " ".join(args), lambda sb: (list(args), {}))


# ----------------------------------------------------------------------------- ONNX builders
def _onnx_cases() -> Iterator[Case]:
    for name, (build, dims) in HOSTILE.items():
        dim_args = [a for d in dims for a in ("--dim", d)]
        for cmd in (["inspect"], ["predict"]):
            extra = ["--hw", "h100-sxm", "--format", "json"] if cmd == ["predict"] else []
            yield _file_case("onnx", f"{cmd[0]} {name}", f"{name}.onnx", build,
                             lambda p, c=cmd, d=dim_args, e=extra: [*c, str(p), *d, *e])


def _small_graph(op: str, attrs: dict, shape: list, inits=()) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    ins = ["x", *(t.name for t in inits)]
    node = helper.make_node(op, ins, ["y"], **attrs)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return model_bytes([node], [x], [y], list(inits))


def _extra_onnx() -> Iterator[Case]:
    w = numpy_helper.from_array(np.zeros((4, 4, 3, 3), np.float32), "w")
    graphs = {
        "unknown op": lambda: _small_graph("FrobnicateX", {}, [2, 3]),
        "negative dim": lambda: _small_graph("Relu", {}, [-5, 3]),
        "zero dim": lambda: _small_graph("Relu", {}, [0, 3]),
        "dim 2**62": lambda: _small_graph("Relu", {}, [2**62, 2**62]),
        "conv negative pads": lambda: _small_graph("Conv", {"pads": [-9, -9, -9, -9]},
                                                   [1, 4, 8, 8], [w]),
        "conv stride 0": lambda: _small_graph("Conv", {"strides": [0, 0]}, [1, 4, 8, 8], [w]),
        "conv kernel bigger than input": lambda: _small_graph("Conv", {}, [1, 4, 1, 1], [w]),
        "conv group 3": lambda: _small_graph("Conv", {"group": 3}, [1, 4, 8, 8], [w]),
        "matmul rank 0": lambda: _small_graph("MatMul", {}, [], [numpy_helper.from_array(
            np.zeros((), np.float32), "b")]),
        "matmul mismatch": lambda: _small_graph("MatMul", {}, [2, 3], [numpy_helper.from_array(
            np.zeros((5, 7), np.float32), "b")]),
        "softmax axis 99": lambda: _small_graph("Softmax", {"axis": 99}, [2, 3]),
        "opset 1": lambda: model_bytes([helper.make_node("Relu", ["x"], ["y"])],
                                       [helper.make_tensor_value_info("x", 1, [2])],
                                       [helper.make_tensor_value_info("y", 1, None)], opset=1),
        "opset 999": lambda: model_bytes([helper.make_node("Relu", ["x"], ["y"])],
                                         [helper.make_tensor_value_info("x", 1, [2])],
                                         [helper.make_tensor_value_info("y", 1, None)], opset=999),
        "cycle": lambda: model_bytes(
            [helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
            [], [helper.make_tensor_value_info("b", 1, None)]),
        "dangling input": lambda: model_bytes([helper.make_node("Add", ["x", "nope"], ["y"])],
                                              [helper.make_tensor_value_info("x", 1, [2])],
                                              [helper.make_tensor_value_info("y", 1, None)]),
        "empty graph": lambda: model_bytes([], [], []),
        "external data /etc/passwd": _external_data,
        "symbolic dims only": lambda: _small_graph("Relu", {}, ["a", "b"]),
        "reshape -1 -1": lambda: _small_graph("Reshape", {}, [2, 3], [numpy_helper.from_array(
            np.array([-1, -1], np.int64), "s")]),
    }
    for name, build in graphs.items():
        yield _file_case("onnx", f"predict {name}", "m.onnx", build,
                         lambda p: ["predict", str(p), "--hw", "h100-sxm", "--format", "json"])
    yield _file_case("onnx", "inspect dims s=2**40", "m.onnx",
                     lambda: _small_graph("Relu", {}, ["s", "s"]),
                     lambda p: ["inspect", str(p), "--dim", f"s={2**40}"])


def _external_data() -> bytes:
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "/etc/passwd"), ("offset", "0"), ("length", "24")):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    node = helper.make_node("Add", ["x", "w"], ["y"])
    return model_bytes([node], [helper.make_tensor_value_info("x", 1, [2, 3])],
                       [helper.make_tensor_value_info("y", 1, None)], [t])


# ----------------------------------------------------------------------------- zoo mutants
def _mutants(rng: random.Random, data: bytes, count: int) -> Iterator[tuple[str, bytes]]:
    n = len(data)
    for i in range(count):
        kind = i % 5
        if kind == 0:
            cut = rng.randrange(1, n)
            yield f"truncated@{cut}", data[:cut]
        elif kind == 1:
            buf = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                pos = rng.randrange(n)
                buf[pos] ^= 1 << rng.randrange(8)
            yield f"bitflips#{i}", bytes(buf)
        elif kind == 2:
            buf = bytearray(data)
            pos = rng.randrange(n - 16)
            buf[pos:pos + 16] = rng.randbytes(16)
            yield f"random16@{pos}", bytes(buf)
        elif kind == 3:
            pos = rng.randrange(n)
            yield f"varint-max@{pos}", data[:pos] + b"\xff" * 9 + b"\x01" + data[pos:]
        else:
            a, b = sorted(rng.sample(range(n), 2))
            yield f"dup-slice{a}:{b}", data[:b] + data[a:b] + data[b:]


def _zoo_mutant_cases() -> Iterator[Case]:
    rng = random.Random(SEED)
    for model, count in (("lstm_lm", 30), ("vgg16", 20), ("unet", 10)):
        data = (ZOO / f"{model}.onnx").read_bytes()
        for i, (name, blob) in enumerate(_mutants(rng, data, count)):
            cmd = ["inspect"] if i % 2 else ["predict"]
            extra = [] if cmd == ["inspect"] else ["--hw", "a100-40gb-pcie", "--format", "json"]
            yield _file_case("zoo-mutant", f"{cmd[0]} {model} {name}", f"{model}.onnx",
                             lambda b=blob: b, lambda p, c=cmd, e=extra: [*c, str(p), *e])


# ----------------------------------------------------------------------------- wrong files
def _wrong_file_cases() -> Iterator[Case]:
    resnet = ZOO / "resnet50.json"
    blobs = {
        "random 1 KiB": lambda: random.Random(1).randbytes(1024),
        "random 64 KiB": lambda: random.Random(2).randbytes(65536),
        "empty": lambda: b"",
        "one zero byte": lambda: b"\x00",
        "text": lambda: b"hello, I am not a model\n",
        "json": lambda: resnet.read_bytes(),
        "gzip of zeros": lambda: gzip.compress(b"\x00" * 2**20),
        "csv": lambda: b"op_type,device_id\nMatMul,h100-sxm\n",
        "toml": lambda: b'id = "x"\n',
        "protobuf field 1 huge length": lambda: b"\x0a\xff\xff\xff\xff\x0f",
    }
    for ext in (".onnx", ".txt", ".csv", ""):
        for name, data in blobs.items():
            yield _file_case("wrong-file", f"inspect {name} as *{ext or '(none)'}",
                             f"model{ext}", data, lambda p: ["inspect", str(p)])
    for name in ("/dev/zero", "/dev/null", "/etc/passwd", "/proc/self/environ", "/",
                 "/nonexistent"):
        yield _args_case("wrong-file", ["inspect", name])
    yield Case("wrong-file", "inspect FIFO", _fifo_model)
    yield Case("wrong-file", "inspect a folder", lambda sb: (["inspect", str(sb.inputs)], {}))


def _fifo_model(sb: Sandbox) -> Prepared:
    import os
    path = sb.inputs / "fifo.onnx"
    os.mkfifo(path)
    return ["inspect", str(path)], {}


# ----------------------------------------------------------------------------- argument lists
_BAD_DIMS = ["batch=0", "batch=-1", "batch=1e9", "batch=abc", "batch=", "=4", "batch",
             "sequence=100000000", "sequence=2147483647", "sequence=99999999999999999999",
             "input_ids:9=4", "input_ids:-1=4", "nosuch=3", "batch=1=2", "batch=0x10",
             "batch=\u0661", "batch=1.5", f"batch={2**63}"]
_BAD_HW = ["h100-sxm:peak_scale=1e-320", "h100-sxm:peak_scale=1e300", "h100-sxm:peak_scale=nan",
           "h100-sxm:peak_scale=inf", "h100-sxm:peak_scale=-1", "h100-sxm:peak_scale=0",
           "h100-sxm:mem_bw_scale=", "h100-sxm:bogus=2", "h100-sxm:", ":peak_scale=2",
           "nosuch:peak_scale=2", "h100-sxm:peak_scale=2,peak_scale=3", "h100-sxm:peak_scale",
           "h100-sxn", "", "h100-sxm:" + ",".join(["peak_scale=1"] * 2000),
           "h100-sxm:mem_gb_scale=1e9", "../../etc/passwd", "h100-sxm:peak_scale=1_000"]


def _cli_arg_cases() -> Iterator[Case]:
    for dim in _BAD_DIMS:
        yield _args_case("cli-args", ["predict", "gpt2", "--dim", dim, "--hw", "h100-sxm",
                                      "--format", "json"])
    for batch in ["0", "-1", "2147483648", "1e3", "", "nan", str(10**30)]:
        yield _args_case("cli-args", ["predict", "resnet50", "--batch", batch, "--hw", "h100-sxm",
                                      "--format", "json"])
    others = [
        ["predict", "resnet50", "--estimator", "nosuch", "--hw", "h100-sxm"],
        ["predict", "resnet50", "--estimator", "", "--hw", "h100-sxm"],
        ["predict", "resnet50", "--format", "xml", "--hw", "h100-sxm"],
        ["predict", "resnet50", "--precision", "fp3", "--hw", "h100-sxm"],
        ["predict", "resnet50", "--threads", "0", "--hw", "cpu-local"],
        ["predict", "resnet50", "--threads", "-4", "--hw", "h100-sxm"],
        ["predict", "resnet50", "--top", "-1", "--hw", "h100-sxm"],
        ["predict", "resnet50", "--mode", "both", "--hw", "h100-sxm"],
        ["predict", "resnet50", "--optimizer", "lbfgs", "--mode", "train", "--hw", "h100-sxm"],
        ["predict", "nosuchmodel", "--hw", "h100-sxm"],
        ["predict", "resnet50"],
        ["predict"],
        ["compare", "resnet50", "--hw", "h100-sxm,nosuch"],
        ["compare", "resnet50", "--hw", ","],
        ["compare", "resnet50", "--hw", "h100-sxm:peak_scale=1e-320,a100-40gb-pcie"],
        ["compare", "resnet50", "--batch", "0", "--hw", "h100-sxm,a100-40gb-pcie"],
        ["inspect", "resnet50", "--format", "yaml"],
        ["inspect", "resnet50", "--dim", "batch=-3"],
        ["hw", "show", "nosuch"],
        ["hw", "show", ""],
        ["hw", "show", "../../../etc/passwd"],
        ["hw", "list", "--kind", "quantum"],
        ["hw"],
        ["data", "list", "--limit", "-5"],
        ["data", "list", "--limit", "abc"],
        ["data", "stats", "--store", "/dev/null"],
        ["data", "export", "/nonexistent/dir/out.csv"],
        ["data", "import", "--public", "nosuch"],
        ["train", "--from", "nosuch", "--no-save", "--quick"],
        ["train", "--devices", "nosuch", "--no-save", "--quick"],
        ["train", "--cap", "-1", "--no-save", "--quick"],
        ["models", "use", "nosuch"],
        ["models", "remove", "../../etc"],
        ["advise", "resnet50", "--hw", "nosuch"],
        ["nosuchcommand"],
        [],
        ["--version-please"],
        ["predict", "resnet50", "--hw", "h100-sxm", "--dim", "batch=1"] + ["--dim", "x=1"] * 500,
    ]
    for args in others:
        yield _args_case("cli-args", args)
    # Outputs aimed at the user's own files (never at system files: the benchmark may run as root)
    yield Case("cli-args", "train --output onto a user file",
               lambda sb: (["train", "--output", str(sb.data / KEEP_FILE), "--quick"], {}))
    yield Case("cli-args", "data export onto a folder",
               lambda sb: (["data", "export", str(sb.inputs)], {}))
    for hw in _BAD_HW:
        yield _args_case("hw-whatif", ["predict", "resnet50", "--hw", hw, "--format", "json"])
    for hw in _BAD_HW[:6]:
        yield _args_case("hw-whatif", ["hw", "show", hw])


# ----------------------------------------------------------------------------- device folders
def _device_folder_cases() -> Iterator[Case]:
    from tests.hostile.test_device_files import CASES

    for name, (make, _) in CASES.items():
        def prepare(sb: Sandbox, make=make) -> Prepared:
            make(sb.hw)
            return ["hw", "list"], {}

        def prepare_predict(sb: Sandbox, make=make) -> Prepared:
            make(sb.hw)
            return ["predict", "resnet50", "--hw", "h100-sxm", "--format", "json"], {}

        yield Case("device-folder", f"hw list: {name}", prepare)
        yield Case("device-folder", f"predict: {name}", prepare_predict)


# ----------------------------------------------------------------------------- model folders
def _model_folder_cases() -> Iterator[Case]:
    from roofcast.predictor.learned import persistence
    from tests.hostile.test_model_folders import CASES

    for name, (damage, _) in CASES.items():
        def prepare(sb: Sandbox, damage=damage) -> Prepared:
            shutil.copytree(persistence.DEFAULT_DIR, sb.model)
            damage(sb.model)
            return (["predict", "resnet50", "--hw", "a100-40gb-pcie", "--estimator", "learned",
                     "--format", "json"], {"ROOFCAST_LEARNED_MODEL": str(sb.model)})
        yield Case("model-folder", name, prepare)


# ----------------------------------------------------------------------------- measurements
_HEADER = "op_type,device_id,dtype,latency_s,input_shapes,flops,batch"
_GOOD_ROW = 'MatMul,h100-sxm,fp32,0.001,"[[64,64],[64,64]]",524288,1'


def _csv(*rows: str, header: str = _HEADER) -> bytes:
    return ("\n".join([header, *rows]) + "\n").encode()


def _measurement_cases() -> Iterator[Case]:
    bad_rows = {
        "batch=1e19": 'MatMul,h100-sxm,fp32,0.001,"[[64,64],[64,64]]",524288,1e19',
        "batch=10**30": f'MatMul,h100-sxm,fp32,0.001,"[[64,64],[64,64]]",524288,{10**30}',
        "flops=1e308": 'MatMul,h100-sxm,fp32,0.001,"[[64,64],[64,64]]",1e308,1',
        "flops=-5": 'MatMul,h100-sxm,fp32,0.001,"[[64,64],[64,64]]",-5,1',
        "flops=nan": 'MatMul,h100-sxm,fp32,0.001,"[[64,64],[64,64]]",nan,1',
        "latency=0": 'MatMul,h100-sxm,fp32,0,"[[64,64],[64,64]]",524288,1',
        "latency=-1": 'MatMul,h100-sxm,fp32,-1,"[[64,64],[64,64]]",524288,1',
        "latency=inf": 'MatMul,h100-sxm,fp32,inf,"[[64,64],[64,64]]",524288,1',
        "latency=1e300": 'MatMul,h100-sxm,fp32,1e300,"[[64,64],[64,64]]",524288,1',
        "latency=abc": 'MatMul,h100-sxm,fp32,abc,"[[64,64],[64,64]]",524288,1',
        "shape negative": 'MatMul,h100-sxm,fp32,0.001,"[[-64,64],[64,64]]",524288,1',
        "shape 1e30": 'MatMul,h100-sxm,fp32,0.001,"[[1e30,64],[64,64]]",524288,1',
        "shape huge int": f'MatMul,h100-sxm,fp32,0.001,"[[{10**30},64]]",524288,1',
        "shape not json": 'MatMul,h100-sxm,fp32,0.001,"[[64,64",524288,1',
        "shape nested 10000": 'MatMul,h100-sxm,fp32,0.001,"' + "[" * 10000 + "]" * 10000 + '",1,1',
        "unknown device": 'MatMul,h100-sxn,fp32,0.001,"[[64,64],[64,64]]",524288,1',
        "unknown dtype": 'MatMul,h100-sxm,fp33,0.001,"[[64,64],[64,64]]",524288,1',
        "unknown op": 'Frobnicate,h100-sxm,fp32,0.001,"[[64,64],[64,64]]",524288,1',
        "formula op": "=cmd|' /C calc'!A0,h100-sxm,fp32,0.001,\"[[64,64]]\",1,1",
        "too few cells": "MatMul,h100-sxm",
        "too many cells": _GOOD_ROW + ",1,2,3",
        "empty device": 'MatMul,,fp32,0.001,"[[64,64],[64,64]]",524288,1',
        "unicode op": 'Mat\u202eMul,h100-sxm,fp32,0.001,"[[64,64]]",524288,1',
        "bad last row": None,
    }
    for name, row in bad_rows.items():
        rows = [_GOOD_ROW] * 200 + ["MatMul,h100-sxm"] if row is None else [_GOOD_ROW, row]
        yield _import_case(f"row {name}", "m.csv", lambda r=rows: _csv(*r))
    files = {
        "header only": ("m.csv", lambda: _csv()),
        "no required columns": ("m.csv", lambda: b"a,b\n1,2\n"),
        "empty": ("m.csv", lambda: b""),
        "blank lines": ("m.csv", lambda: b"\n\n\n"),
        "binary": ("m.csv", lambda: random.Random(3).randbytes(4096)),
        "latin-1": ("m.csv", lambda: _csv("Matmul,h100-sxm,fp32,0.001,\"[[1]]\",1,1").replace(
            b"Matmul", b"Mat\xe9ul")),
        "unterminated quote": ("m.csv", lambda: _csv('MatMul,h100-sxm,fp32,0.001,"[[64,64]')),
        "gzip bomb 1 GiB": ("m.csv.gz", _gzip_bomb),
        "gzip truncated": ("m.csv.gz", lambda: gzip.compress(_csv(_GOOD_ROW))[:20]),
        "not gzip named .gz": ("m.csv.gz", lambda: _csv(_GOOD_ROW)),
        "parquet garbage": ("m.parquet", lambda: b"PAR1" + b"\x00" * 100 + b"PAR1"),
        "parquet is csv": ("m.parquet", lambda: _csv(_GOOD_ROW)),
        "10000 columns": ("m.csv", lambda: _csv(_GOOD_ROW + ",x" * 10000,
                                                header=_HEADER + "".join(f",c{i}" for i in
                                                                         range(10000)))),
        "duplicate columns": ("m.csv", lambda: _csv(_GOOD_ROW + ",0.002",
                                                    header=_HEADER + ",latency_s")),
        "1 MB cell": ("m.csv", lambda: _csv(_GOOD_ROW.replace("MatMul", "M" * 2**20))),
    }
    for name, (fname, data) in files.items():
        yield _import_case(name, fname, data)
    yield Case("measurements", "import a FIFO", _fifo_csv)
    yield Case("measurements", "import /dev/zero", lambda sb: (["data", "import", "/dev/zero"], {}))
    yield Case("measurements", "import with --store /dev/null",
               lambda sb: (["data", "import", str(_write(sb, "m.csv", _csv(_GOOD_ROW))),
                            "--store", "/dev/null"], {}))
    yield Case("measurements", "import with --store a folder",
               lambda sb: (["data", "import", str(_write(sb, "m.csv", _csv(_GOOD_ROW))),
                            "--store", str(sb.inputs)], {}))
    yield Case("measurements", "train --from a bad CSV",
               lambda sb: (["train", "--from", str(_write(sb, "m.csv", _csv(bad_rows["flops=-5"]))),
                            "--no-save", "--quick"], {}))


def _gzip_bomb() -> bytes:
    """1 GiB of newlines after a header, about 1 MB compressed (built 1 MiB at a time, so the
    benchmark's own memory, which its forked children inherit in ``ru_maxrss``, stays small)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
        gz.write(_csv(_GOOD_ROW))
        chunk = b"\n" * 2**20
        for _ in range(1024):
            gz.write(chunk)
    return buf.getvalue()


def _import_case(name: str, file_name: str, data: Callable[[], bytes]) -> Case:
    return _file_case("measurements", name, file_name, data,
                      lambda p: ["data", "import", str(p)])


def _fifo_csv(sb: Sandbox) -> Prepared:
    import os
    path = sb.inputs / "fifo.csv"
    os.mkfifo(path)
    return ["data", "import", str(path)], {}


# ----------------------------------------------------------------------------- the corpus
def cases() -> list[Case]:
    """Every case, in a fixed order (names are unique)."""
    out = [*_onnx_cases(), *_extra_onnx(), *_zoo_mutant_cases(), *_wrong_file_cases(),
           *_cli_arg_cases(), *_device_folder_cases(), *_model_folder_cases(),
           *_measurement_cases(), *_bound_cases()]
    seen: dict[str, int] = {}
    unique = []
    for case in out:
        key = f"{case.surface}/{case.name}"
        seen[key] = seen.get(key, 0) + 1
        name = case.name if seen[key] == 1 else f"{case.name} ({seen[key]})"
        unique.append(Case(case.surface, name, case.prepare))
    return unique


def quick(all_cases: list[Case], per_surface: int = 8) -> list[Case]:
    """About 60 cases: the first ``per_surface`` of each surface (the ONNX builders come first)."""
    counts: dict[str, int] = {}
    picked = []
    for case in all_cases:
        counts[case.surface] = counts.get(case.surface, 0) + 1
        if counts[case.surface] <= per_surface:
            picked.append(case)
    return picked


# ----------------------------------------------------------------------------- bounds, links
_LLM_ARGS = ["llama-3.1-8b", "--hw", "h100-sxm"]
_BOUND_ARGS = [
    ["plan", "llama-3.1-8b", "--system", "hgx-h100", "--global-batch", "2147483648"],
    ["predict", "resnet50", "--hw", "rtx-3090", "--devices", "8000000000000"],
    ["llm", *_LLM_ARGS, "--batch", str(10**30)],
    ["llm", *_LLM_ARGS, "--input-tokens", str(2**40)],
    ["advise", "resnet50", "--hw", "h100-sxm", "--max-batch", str(10**11)],
    ["train", "--from", "", "--no-save"],
    ["train", "--from", "bundled,bundled", "--no-save"],
    ["app", "--address", ""],
]


def _models_link(sb: Sandbox) -> Prepared:
    """models/evil: a link to a folder of the user's that looks like a model."""
    foreign = sb.inputs / "foreign"
    foreign.mkdir()
    (foreign / "metadata.json").write_text(
        '{"format": "roofcast-learned/1", "models": {"a/b": {"file": "x.bin"}}}')
    (foreign / "x.bin").write_bytes(b"the user's data")
    (sb.data / "models").mkdir(exist_ok=True)
    (sb.data / "models" / "evil").symlink_to(foreign)
    return ["models", "remove", "evil"], {}


def _active_link(sb: Sandbox) -> Prepared:
    """models/active: a link to a file outside the models folder (its text must not show)."""
    secret = sb.inputs / "secret.txt"
    secret.write_text("root:x:0:0:secret\n" * 50)
    (sb.data / "models").mkdir(exist_ok=True)
    (sb.data / "models" / "active").symlink_to(secret)
    return ["models", "list"], {}


def _bound_cases() -> Iterator[Case]:
    for args in _BOUND_ARGS:
        yield _args_case("bounds", args)
    yield Case("model-files", "models remove: a linked foreign folder", _models_link)
    yield Case("model-files", "models list: active links outside", _active_link)
