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
    assert spec.plans == ("single",) and spec.llms == ()
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
