"""Learned efficiencies per (runtime, op family): which runtime a model learned, which rows may
use it, the borrowed runtime's own floor, training per runtime, legacy and strict metadata."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.features import featurize
from roofcast.predictor.learned import persistence
from roofcast.predictor.learned.data import measurement_set
from roofcast.predictor.learned.features import learned_features, roofline_terms
from roofcast.predictor.learned.model import bounded_time
from roofcast.predictor.learned.roads import LEGACY_RUNTIMES
from roofcast.predictor.learned.training import train
from tests.predictor.learned_helpers import synthetic_set, workload


@pytest.fixture(scope="module")
def trained():
    return train(synthetic_set(), quick=True)


def rows(runtime: str | None = None, device: str = "t4"):
    w = workload(np.random.default_rng(3), 20, 20)
    return featurize(w, get_device(device), RunConfig(runtime=runtime))


def test_trained_model_records_the_runtime_it_learned(trained):
    assert trained.model.meta["runtimes"] == {"gpu": "pytorch-eager"}
    assert trained.model.runtimes() == {"gpu": "pytorch-eager"}


def test_old_model_without_runtimes_reads_as_the_shipped_runtimes(trained, tmp_path):
    folder = persistence.save(trained.model, tmp_path / "m")
    meta = json.loads((folder / "metadata.json").read_text())
    del meta["runtimes"]
    for desc in meta["models"].values():
        desc.pop("y_range")
    (folder / "metadata.json").write_text(json.dumps(meta))
    old = persistence.load(folder)
    assert old.runtimes()["gpu"] == "pytorch-eager"
    assert old.runtimes()["cpu"] == "onnxruntime-cpu"
    assert old.runtimes() == LEGACY_RUNTIMES
    ex = old.explain(rows(), mode="auto")
    assert ex["predictor"].str.startswith("learned").all()


@pytest.mark.parametrize(("runtimes", "problem"), [
    ({"gpu": 3}, "must be a runtime name"),
    ({"gpu": "pytorch eager!"}, "must be a runtime name"),
    ({"gpu/x": "pytorch-eager"}, "is not a road"),
    ({"cpu": "onnxruntime-cpu"}, "has no runtime for model"),
    ({"gpu": "pytorch-eager", "gpu.x": "pytorch-eager"}, "names one runtime twice"),
    ([], "must be an object"),
])
def test_user_supplied_runtimes_are_validated_strictly(trained, tmp_path, runtimes, problem):
    folder = persistence.save(trained.model, tmp_path / "m")
    meta = json.loads((folder / "metadata.json").read_text())
    meta["runtimes"] = runtimes
    (folder / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(PredictionError, match=problem):
        persistence.load(folder)


def test_y_range_is_saved_checked_and_loaded(trained, tmp_path):
    folder = persistence.save(trained.model, tmp_path / "m")
    loaded = persistence.load(folder)
    for key, fm in trained.model.models.items():
        assert loaded.models[key].y_range == pytest.approx(fm.y_range)
        assert fm.y_range[0] <= fm.y_range[1]
    meta = json.loads((folder / "metadata.json").read_text())
    meta["models"]["gpu/matmul"]["y_range"] = [1.0, 0.0]
    (folder / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(PredictionError, match="y_range"):
        persistence.load(folder)


def test_a_row_of_another_runtime_gets_no_learned_time_on_any_device(trained):
    X = pd.concat([rows(device="t4"), rows(device="v100-pcie-32gb")], ignore_index=True)
    X["runtime"] = "my-runtime"
    X["learned_from"] = "my-runtime"
    ex = trained.model.explain(X, mode="auto")
    assert (ex["predictor"] == "analytical:time-roofline").all()
    work = ex["bound_s"] > 0
    assert ex.loc[work, "ood_reason"].str.contains(
        "no learned efficiencies for runtime my-runtime .*learned pytorch-eager").all()


def test_missing_learned_from_column_is_a_clear_error(trained):
    X = rows().drop(columns=["learned_from"])
    with pytest.raises(PredictionError, match="lacks column 'learned_from'"):
        trained.model.explain(X)


def test_a_runtime_learning_from_another_uses_its_efficiency_with_its_own_floor(trained):
    eager, compiled = rows("pytorch-eager"), rows("torch-compile")
    assert (compiled["learned_from"] == "pytorch-eager").all()
    floor = compiled["dispatch_floor_s"].iloc[0]
    assert floor == pytest.approx(5e-6)
    ex_e = trained.model.explain(eager, mode="learned")
    ex_c = trained.model.explain(compiled, mode="learned")
    assert ex_c["predictor"].str.startswith("learned:gpu/").all()
    F = learned_features(compiled)
    _, _, bound = roofline_terms(compiled)
    for key, fm in trained.model.models.items():
        sel = (compiled["family"] == key.split("/")[1]).to_numpy()
        y = fm.predict_log(F[sel])
        assert ex_c["time_s"][sel].to_numpy() == pytest.approx(bounded_time(bound[sel], y, floor))
        assert ex_e["time_s"][sel].to_numpy() == pytest.approx(
            bounded_time(bound[sel], y, fm.floor_s))


def test_training_keys_models_per_runtime_when_several_were_measured():
    ts = synthetic_set(n_gemm=60, n_vec=40)
    X = ts.X.copy()
    X["runtime"] = np.where(np.arange(len(X)) % 2 == 0, "pytorch-eager", "torch-compile")
    other = X["runtime"] == "torch-compile"
    y = np.where(other, ts.y_s * 0.5, ts.y_s)  # the compiled kernels: twice as fast
    res = train(type(ts)(X, y, "two runtimes", "h"), quick=True)
    m = res.model
    assert m.meta["runtimes"] == {"gpu": "pytorch-eager", "gpu.torch-compile": "torch-compile"}
    assert {"gpu/matmul", "gpu.torch-compile/matmul"} <= set(m.models)
    compiled = rows("torch-compile")
    keys, borrowed, _ = m.row_keys(compiled)
    assert set(keys) <= {"gpu.torch-compile/matmul", "gpu.torch-compile/elementwise"}
    assert not borrowed.any()  # its own measurements: its own efficiencies and floor
    t_c = m.explain(compiled)["time_s"].to_numpy()
    t_e = m.explain(rows("pytorch-eager"))["time_s"].to_numpy()
    assert np.median(t_c / t_e) == pytest.approx(0.5, rel=0.25)


def test_measurement_rows_carry_their_runtime():
    w = workload(np.random.default_rng(1), 5, 5)
    frame = pd.DataFrame({
        "op_type": w["op_type"], "family": w["family"], "node": w["node"], "dtype": w["dtype"],
        "flops": w["flops"], "bytes_read": w["bytes_read"], "bytes_written": w["bytes_written"],
        "weight_bytes": w["weight_bytes"], "gemm_batch": w["gemm_batch"], "gemm_m": w["gemm_m"],
        "gemm_n": w["gemm_n"], "gemm_k": w["gemm_k"], "device_id": "t4", "latency_s": 1e-4,
        "threads_intra": np.nan,
        "runtime": ["torch-compile"] * 5 + [""] * 5})
    ts = measurement_set(frame, "test")
    assert list(ts.X["runtime"]) == ["torch-compile"] * 5 + ["pytorch-eager"] * 5
    frame["runtime"] = "bad name!"
    with pytest.raises(PredictionError, match="not runtime names"):
        measurement_set(frame, "test")


def test_shipped_model_learned_pytorch_eager_on_gpus_and_ort_on_cpus(tmp_path):
    shipped = persistence.load()
    assert shipped.runtimes()["gpu"] == "pytorch-eager"
    assert shipped.runtimes()["cpu"] == "onnxruntime-cpu"
    copy = tmp_path / "copy"
    shutil.copytree(persistence.DEFAULT_DIR, copy)
    assert persistence.load(copy).runtimes() == shipped.runtimes()


def test_auto_transfers_to_an_unlike_device_on_the_same_road_and_says_so(trained):
    import dataclasses

    t4 = get_device("t4")
    alien = dataclasses.replace(t4, id="alien", mem_bw_Bps=50 * t4.mem_bw_Bps,
                                peak_flops={k: 50 * v for k, v in t4.peak_flops.items()})
    near, far = rows(device="t4"), featurize(workload(np.random.default_rng(3), 20, 20), alien,
                                             RunConfig())
    ex_near, ex_far = (trained.model.explain(x, mode="auto") for x in (near, far))
    families = [ex["predictor"].str.split(":").str[1] for ex in (ex_near, ex_far)]
    assert (families[0] == families[1]).all()  # same model key per row on both devices
    assert ex_far["predictor"].str.startswith("learned (transferred):").all()
    summary = trained.model.summarize(ex_far, "gpu")
    assert summary["ops_transferred"] == len(ex_far)
    assert summary["ood"]
    # clipped: never more efficient than the family ever was in training, never below the bound
    for key, fm in trained.model.models.items():
        sel = (far["family"] == key.split("/")[1]).to_numpy()
        bound = ex_far["bound_s"][sel].to_numpy()
        assert (ex_far["time_s"][sel].to_numpy() >= np.maximum(
            bound, (bound + fm.floor_s) * 10.0 ** fm.y_range[0]) * (1 - 1e-9)).all()


def test_transferred_rows_of_an_uncalibrated_bin_have_a_finite_interval():
    """bert_base under torch-compile on an H100 puts fused elementwise kernels of ~8 µs
    (transferred: outside the training range) in interval bins without calibration residuals:
    their upper end must stay finite (the fallback's serialised upper end), so the end-to-end
    interval is finite too."""
    import roofcast

    model = roofcast.load_model("bert_base", batch=1, sequence=128)
    p = roofcast.predict(model, "h100-sxm", runtime="torch-compile", estimator="auto")
    assert np.isfinite(p.per_op["upper_s"]).all()
    assert (p.per_op["upper_s"] >= p.per_op["time_s"]).all()
    assert np.isfinite(p.summary["e2e_upper_s"])
