"""``read_spec``: a valid file becomes a SweepSpec; every wrong key is a SweepSpecError that
names it (and nothing is run)."""

from __future__ import annotations

import os

import pytest

from roofcast.hw_catalog.catalog import list_devices
from roofcast.predictor.sweeps import spec as spec_mod
from roofcast.predictor.sweeps.spec import read_spec
from roofcast.predictor.sweeps.types import SweepSpecError

from .helpers import CPU, GPU, SMALL, write_spec


def test_valid_spec_values_and_defaults(tmp_path):
    spec = read_spec(write_spec(tmp_path, SMALL))
    assert spec.models == ("mlp.onnx",)
    assert spec.devices == (GPU, "a100-80gb-sxm", CPU, "no-such-device")  # unknown: kept
    assert spec.batches == (1, 4)
    assert spec.precisions == ("fp32", "fp16")
    assert spec.modes == ("infer",)
    assert spec.runtimes == ("default",)
    assert spec.estimator is None  # each family's default (families.FAMILY_SPECS)
    assert spec.plans == ("single",)
    assert spec.llms == ()
    assert spec.baseline is None
    assert spec.name == "small"
    assert spec.source == str((tmp_path / "spec.toml").resolve())
    assert spec.n_cells == 1 * 4 * 2 * 2


def test_kind_selector_expands_and_zoo_names(tmp_path):
    spec = read_spec(write_spec(tmp_path, """
[sweep]
models = ["zoo:resnet50", "bert_base"]
devices = ["kind:cpu", "h100-sxm:mem_bw_GBps=6700"]
modes = ["infer", "train"]
runtimes = ["default", "onnxruntime-cpu"]
estimator = "roofline"
baseline = "epyc-9654"
[sweep.dims]
sequence = 128
"""))
    cpus = tuple(d.id for d in list_devices("cpu"))
    assert spec.devices == (*cpus, "h100-sxm:mem_bw_GBps=6700")
    assert spec.models == ("resnet50", "bert_base")
    assert dict(spec.dims) == {"sequence": 128}
    assert spec.baseline == CPU
    assert spec.name == "spec"  # the file's stem when no name is given


BAD = [
    ("[other]\nx = 1\n[sweep]\nmodels=['resnet50']\ndevices=['t4']", "unknown top-level"),
    ("x = 1", "unknown top-level"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\ncolour='red'", "unknown key(s) in [sweep]"),
    ("[sweep]\ndevices=['t4']", "has no 'models'"),
    ("[sweep]\nmodels=['resnet50']", "has no 'devices'"),
    ("[sweep]\nmodels='resnet50'\ndevices=['t4']", "must be a list"),
    ("[sweep]\nmodels=['resnet50']\ndevices=[]", "the grid is empty: [sweep] devices"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nbatches=[]", "the grid is empty"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nbatches=[1, 1]", "lists 1 twice"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4', 't4']", "'t4' twice"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['kind:gpu', 't4']", "'t4' appears twice"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nbatches=[true]", "not a positive integer"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nbatches=[0]", "not a positive integer"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nbatches=['8']", "not a positive integer"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nprecisions=['fp13']", "'fp13' is not one"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nmodes=['serve']", "'serve' applies to LLM"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nmodes=['fly']", "'fly' is not one"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nruntimes=['jax']", "'jax' is not one"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nestimator='magic'", "'magic' is not one"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nname=''", "non-empty string"),
    ("[sweep]\nmodels=['resnet5O']\ndevices=['t4']", "neither an .onnx/.json path, a zoo model"),
    ("[sweep]\nmodels=[3]\ndevices=['t4']", "not a zoo name"),
    ("[sweep]\nmodels=['/etc/x.onnx']\ndevices=['t4']", "absolute path"),
    ("[sweep]\nmodels=['../x.onnx']\ndevices=['t4']", "leads outside"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['kind:quantum']", "unknown kind 'quantum'"),
    ("[sweep]\nmodels=['resnet50']\ndevices=[7]", "not a device id"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\n[sweep.dims]\nbatch=8", "batch is swept"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\n[sweep.dims]\nsequence=1.5", "sequence"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\ndims=3", "[sweep.dims] must be a table"),
    ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nbaseline='a10'", "not among the devices"),
    ("[sweep\nmodels=", "not valid UTF-8 TOML"),
]


@pytest.mark.parametrize(("body", "message"), BAD)
def test_bad_spec_names_the_problem(tmp_path, body, message):
    with pytest.raises(SweepSpecError) as err:
        read_spec(write_spec(tmp_path, body))
    assert message in str(err.value)


def test_symlink_out_of_the_folder_is_refused(tmp_path):
    outside = tmp_path / "outside.onnx"
    outside.write_bytes(b"x")
    folder = tmp_path / "spec"
    folder.mkdir()
    os.symlink(outside, folder / "link.onnx")
    path = write_spec(folder, "[sweep]\nmodels=['link.onnx']\ndevices=['t4']")
    with pytest.raises(SweepSpecError, match="leads outside"):
        read_spec(path)


def test_missing_file_too_big_and_too_many_cells(tmp_path, monkeypatch):
    with pytest.raises(SweepSpecError, match="does not exist"):
        read_spec(tmp_path / "nope.toml")
    big = write_spec(tmp_path, "[sweep]\n" + "#" * (spec_mod.MAX_SPEC_BYTES + 1))
    with pytest.raises(SweepSpecError, match="byte"):
        read_spec(big)
    monkeypatch.setattr(spec_mod, "MAX_CELLS", 7)
    with pytest.raises(SweepSpecError, match="8 cells, over the 7 limit"):
        read_spec(write_spec(tmp_path, "[sweep]\nmodels=['resnet50']\ndevices=['t4', 'a10']\n"
                             "batches=[1, 2]\nprecisions=['fp32', 'fp16']"))


LLM_GRID = """
[sweep]
models = ["resnet50", "llm:gpt2", "phi-2"]
devices = ["h100-sxm", "system:hgx-h100"]
batches = [1, 8]
precisions = ["fp16", "int4"]
modes = ["infer", "serve"]
plans = ["single", "pp2 tp2", "tp2"]
input_tokens = [128, 1024]
output_tokens = [64]
"""


def test_llm_configs_plans_and_systems_make_the_documented_cells(tmp_path):
    from roofcast.predictor.sweeps.types import cell_groups
    spec = read_spec(write_spec(tmp_path, LLM_GRID))
    assert spec.llms == ("llm:gpt2", "phi-2")  # the zoo's gpt2 needs no prefix
    assert spec.plans == ("single", "tp2 pp2", "tp2")  # canonical part order
    groups = {(g.model, g.family): g for g in cell_groups(spec)}
    assert set(groups) == {("resnet50", "graph"), ("resnet50", "parallel"),
                           ("llm:gpt2", "serving"), ("llm:gpt2", "parallel"),
                           ("phi-2", "serving"), ("phi-2", "parallel")}
    graph = groups["resnet50", "graph"]
    assert graph.hardware == ("h100-sxm",)  # a system takes plans only
    assert graph.plans == ("single",)
    assert groups["resnet50", "parallel"].plans == ("tp2 pp2", "tp2")
    serve = groups["llm:gpt2", "serving"]
    assert serve.modes == ("serve",)
    assert serve.tokens == ((128, 64), (1024, 64))
    assert groups["llm:gpt2", "parallel"].tokens == ((128, 0), (1024, 0))
    # 2 hw x 2 batches x 2 precisions x [graph 1x1x1 (1 device) + parallel 1 mode x 2 plans]
    # + per LLM: serve 3 plans x 2 tokens + parallel 1 mode x 3 plans x 2 tokens
    assert spec.n_cells == 2 * 2 * (1 + 2 * 2) + 2 * 2 * 2 * 2 * (3 * 2 + 3 * 2)


@pytest.mark.parametrize(("line", "message"), [
    ('plans = ["tp2", "tp0"]', "'tp0' must be tp1"),
    ('plans = ["tp2 tp4"]', "gives tp twice"),
    ('plans = ["tp2", "x3"]', "unknown part 'x3'"),
    ('plans = ["tp2 pp2", "pp2 tp2"]', "lists one plan twice"),
    ('input_tokens = [0]', "not a positive integer"),
    ('models = ["no-such-llm"]', "nor a bundled LLM config"),
    ('models = ["../outside.json"]', "leads outside"),
    ('devices = ["system:"]', "names no system"),
    ('models = ["a|b.onnx"]', "separates the parts of a cell id"),
])
def test_bad_new_keys_name_the_problem(tmp_path, line, message):
    body = LLM_GRID.replace(line.split(" = ")[0] + " = ", "_replaced = ", 1) \
        if line.split(" = ")[0] in LLM_GRID else LLM_GRID
    body = "\n".join(x for x in body.splitlines() if not x.startswith("_replaced")) + "\n" + line
    with pytest.raises(SweepSpecError, match=message):
        read_spec(write_spec(tmp_path, body))
