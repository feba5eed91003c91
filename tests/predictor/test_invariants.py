"""Invariants over every zoo model and catalog devices (one vectorised sweep per model).

For each model at batch 1 and 2 (sequence models at sequence 64), on the devices below plus,
for each, a what-if copy with 2x memory bandwidth and one with 2x every peak:
time positive and finite; more bandwidth or more FLOP/s never slower; fusion never slower;
a training step costs more than inference; memory grows with batch.
ResNet-50 runs on every catalog device, the other models on a handful of device classes; the
per-estimator check runs ResNet-50 on that handful, and one model per graph kind on each road
that takes an efficiency from the device (learned, auto, roofline+eff: a what-if device keeps
its base's; every zoo model: the invariants column of benchmarks/road_choice.py).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

from roofcast.app.model_ref import load_graph
from roofcast.hw_catalog.catalog import list_devices
from roofcast.hw_catalog.derive import derive
from roofcast.predictor.sweep import sweep
from roofcast.training_data import zoo

FEW = ["t4", "a100-40gb-sxm", "h100-sxm", "mi300x", "gaudi2", "xeon-8480plus", "p4"]
SEQUENCE = 64
KEYS = ["batch", "precision", "mode"]


@functools.lru_cache(maxsize=4)
def _graph(name: str, batch: int):
    dims = [f"sequence={SEQUENCE}"] if "sequence" in zoo.model_meta(name)["symbolic_dims"] else []
    return load_graph(name, dims, batch)


def source(name: str):
    return functools.partial(_graph, name)


def devices_for(name: str, every: bool | None = None):
    every = name == "resnet50" if every is None else every
    base = list_devices() if every else [d for d in list_devices() if d.id in FEW]
    assert base
    bw2 = {d.id: derive(d, id=f"{d.id}+bw2", mem_bw_scale=2.0) for d in base}
    peak2 = {d.id: derive(d, id=f"{d.id}+peak2", peak_scale=2.0) for d in base}
    return base, bw2, peak2


def _time(df: pd.DataFrame, device: str) -> pd.Series:
    return df[df["device"] == device].set_index(KEYS)["time_s"]


@pytest.mark.parametrize("name", zoo.list_models())
def test_zoo_invariants(name):
    base, bw2, peak2 = devices_for(name)
    graphs = source(name)
    devices = [*base, *bw2.values(), *peak2.values()]
    precisions = ["fp32", "fp16"] if name == "resnet50" else ["fp32"]
    df = sweep(graphs, devices, [1, 2], precisions=precisions, modes=["infer", "train"])
    fused = sweep(graphs, base, [1, 2], precisions=precisions, modes=["infer"], fusion=True)

    t = df["time_s"].to_numpy()
    assert np.isfinite(t).all()
    assert (t > 0).all()
    for d in base:
        own = _time(df, d.id)
        assert (_time(df, bw2[d.id].id) <= own * (1 + 1e-9)).all(), d.id
        assert (_time(df, peak2[d.id].id) <= own * (1 + 1e-9)).all(), d.id
        infer = own.xs("infer", level="mode")
        train = own.xs("train", level="mode")
        assert (train > infer).all(), d.id
        f = _time(fused, d.id).xs("infer", level="mode")
        assert (f <= infer * (1 + 1e-9)).all(), d.id
    mem = df[df["device"] == base[0].id].set_index(KEYS)["memory_bytes"]
    assert (mem.xs(2, level="batch") > mem.xs(1, level="batch")).all()


#: roads whose time depends on an efficiency read from the device (docs/design/road.md).
EFFICIENCY_ROADS = ["auto", "learned", "roofline+eff"]


#: one model per kind of graph (CNN, depthwise CNN, encoder, decoder LLM, U-Net): each costs a
#: sweep of 21 devices x 2 modes per road; every zoo model, the MoE switchxl4 (24 s here) among
#: them, is checked by the invariants column of ``benchmarks/road_choice.py``.
EFFICIENCY_MODELS = ["resnet50", "convnext_tiny", "bert_base", "llama", "unet"]


@pytest.mark.parametrize("estimator", EFFICIENCY_ROADS)
@pytest.mark.parametrize("name", EFFICIENCY_MODELS)
def test_what_if_devices_never_slower_on_efficiency_roads(name, estimator):
    base, bw2, peak2 = devices_for(name, every=False)
    df = sweep(source(name), [*base, *bw2.values(), *peak2.values()], [1],
               estimator=estimator, modes=["infer", "train"])
    for d in base:
        own = _time(df, d.id)
        assert (_time(df, bw2[d.id].id) <= own * (1 + 1e-9)).all(), d.id
        assert (_time(df, peak2[d.id].id) <= own * (1 + 1e-9)).all(), d.id


@pytest.mark.parametrize("estimator", ["roofline", "no-overlap", "traffic", "time-roofline",
                                       *EFFICIENCY_ROADS])
def test_resnet50_invariants_hold_for_every_analytical_estimator(estimator):
    base, bw2, peak2 = devices_for("resnet50", every=False)  # every device: test above
    graphs = source("resnet50")
    df = sweep(graphs, [*base, *bw2.values(), *peak2.values()], [4], estimator=estimator,
               modes=["infer", "train"])
    fused = sweep(graphs, base, [4], estimator=estimator, fusion=True)
    for d in base:
        own = _time(df, d.id)
        assert (_time(df, bw2[d.id].id) <= own * (1 + 1e-9)).all(), d.id
        assert (_time(df, peak2[d.id].id) <= own * (1 + 1e-9)).all(), d.id
        f = _time(fused, d.id).xs("infer", level="mode")
        assert (f <= own.xs("infer", level="mode") * (1 + 1e-9)).all(), d.id
