"""One model per family: graph-captured rows (CUDA graphs, their own floor) train the eager
road's family model beside the eager rows, with dtype and runtime features; never below the
physical bound."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.features import featurize
from roofcast.predictor.learned.data import TrainingSet, combine
from roofcast.predictor.learned.features import FEATURES, learned_features, roofline_terms
from roofcast.predictor.learned.model import ROW_FLOOR, FamilyModel, harness_floor
from roofcast.predictor.learned.roads import primary_runtimes, runtime_column
from roofcast.predictor.learned.training import borrowing_rows, train
from tests.predictor.learned_helpers import synthetic_set, workload

GRAPH_SLOWDOWN = 10 ** 0.15


def graph_set(seed: int = 1) -> TrainingSet:
    """bf16 GEMMs timed under vLLM (CUDA graphs): bound x 10^0.15, no dispatch floor."""
    rng = np.random.default_rng(seed)
    parts = []
    for dev in ("v100-pcie-32gb", "t4", "a100-40gb-pcie"):
        w = workload(rng, 60, 0).assign(dtype="bf16")
        w["_group"], w["_run"], w["_e2e_s"] = f"device:{dev}", "", np.nan
        parts.append(featurize(w, get_device(dev), RunConfig(runtime="vllm")))
    X = pd.concat(parts, ignore_index=True)
    return TrainingSet(X, roofline_terms(X)[2] * GRAPH_SLOWDOWN, "graph", "graph-1")


@pytest.fixture(scope="module")
def mixed() -> TrainingSet:
    return combine([synthetic_set(), graph_set()])


def test_rows_that_learn_from_the_primary_runtime_train_its_road_with_their_own_floor(mixed):
    X = mixed.X
    kinds = X["device_kind"].astype(str).to_numpy()
    rt = runtime_column(X, "runtime")
    road_rt, floor = borrowing_rows(X, kinds, rt, primary_runtimes(kinds, rt))
    graph = rt == "vllm"
    assert set(road_rt) == {"pytorch-eager"}
    assert np.isnan(floor[~graph]).all()
    assert floor[graph] == pytest.approx(X["dispatch_floor_s"].to_numpy(float)[graph])


def test_one_model_per_family_for_eager_and_graph_rows(mixed):
    res = train(mixed, quick=True, candidates=("xgboost",))
    assert set(res.model.models) == {"gpu/matmul", "gpu/elementwise"}
    assert res.model.runtimes() == {"gpu": "pytorch-eager"}
    graph = np.flatnonzero(mixed.X["runtime"].to_numpy() == "vllm")
    err = np.abs(res.oof_s[graph] / mixed.y_s[graph] - 1)
    assert np.median(err) < 0.1  # held-out devices, the graph rows' own efficiency


def test_harness_floor_comes_from_eager_rows_and_graph_rows_keep_theirs():
    rng = np.random.default_rng(0)
    bound = 10 ** rng.uniform(-6, -3, 400)
    own = np.where(np.arange(400) % 2 == 0, np.nan, 5e-6)
    meas = np.where(np.isnan(own), bound + 40e-6, bound + 5e-6)
    groups = np.repeat(["device:a", "device:b"], 200)
    F = pd.DataFrame(0.0, index=range(400), columns=list(FEATURES))
    F[ROW_FLOOR] = own
    fm = FamilyModel.fit("gpu/matmul", "median", F, meas, bound, groups)
    eager = np.isnan(own)
    assert fm.floor_s == pytest.approx(harness_floor(meas[eager], bound[eager], groups[eager]))
    pred = fm.predict_time(F, bound)
    assert (pred >= bound).all()
    assert np.median(np.abs(pred / meas - 1)) < 0.02


def test_dtype_and_runtime_features():
    w = workload(np.random.default_rng(0), 3, 0).assign(dtype="fp8")
    X = featurize(w, get_device("h100-sxm"), RunConfig(runtime="tensorrt-llm"))
    F = learned_features(X)
    assert (F["math_bits"] == 8).all()
    assert (F["block_scaled"] == 0).all()
    assert (F["runtime_code"] == 1).all()
    eager = learned_features(featurize(w, get_device("h100-sxm"), RunConfig()))
    assert (eager["runtime_code"] == 0).all()  # no profile: the kind's default runtime
    assert (eager["lg_dispatch_floor"] == F["lg_dispatch_floor"]).all()


@pytest.mark.parametrize(("device", "bits"), [("b200", 4.0), ("h100-sxm", 8.0)])
def test_math_bits_are_the_units_a_block_scaled_fp4_gemm_runs_on(device, bits):
    w = workload(np.random.default_rng(0), 2, 0).assign(dtype="nvfp4")
    F = learned_features(featurize(w, get_device(device), RunConfig(runtime="tensorrt-llm")))
    assert (F["math_bits"] == bits).all()
    assert (F["block_scaled"] == 1).all()


def test_a_family_model_fits_on_extra_feature_columns_when_asked():
    rng = np.random.default_rng(0)
    n = 200
    F = pd.DataFrame(rng.normal(size=(n, len(FEATURES))), columns=list(FEATURES))
    F["extra"] = rng.uniform(0.0, 1.0, n)
    bound = np.full(n, 1e-4)
    meas = bound * 10.0 ** F["extra"].to_numpy()  # the inefficiency is the extra column alone
    groups = np.repeat(["a", "b"], n // 2)
    fm = FamilyModel.fit("gpu/attention", "ridge", F, meas, bound, groups,
                         features=(*FEATURES, "extra"))
    assert fm.features[-1] == "extra"
    lo, hi = F.assign(extra=0.1), F.assign(extra=0.9)
    assert np.median(fm.predict_log(hi) - fm.predict_log(lo)) > 0.5
    plain = FamilyModel.fit("gpu/attention", "ridge", F, meas, bound, groups)
    assert plain.features == FEATURES
