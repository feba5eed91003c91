"""The fitted-correction contract over every registered kind: each shipped correction loads,
saves and loads back equal (metadata and predictions), its metadata JSON is valid, and bad
folders (unknown kind, corrupt metadata, a pickle) are refused with ``PredictionError``."""

from __future__ import annotations

import json
import pickle
import shutil

import numpy as np
import pandas as pd
import pytest

from roofcast.predictor.collectives.correction import CollectiveModel
from roofcast.predictor.efficiency import EfficiencyCurves
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.fitted import METADATA, FittedCorrection, FittedMetadata, read_metadata
from roofcast.predictor.fitted_registry import BUNDLED, KINDS, installed, load_correction
from roofcast.predictor.learned.correction import TARGET, LearnedCorrection
from roofcast.predictor.llm.calibration import EngineCalibrations
from tests.predictor.learned_helpers import synthetic_set


def _efficiency_features() -> pd.DataFrame:
    return pd.DataFrame({"device": ["a100-40gb-pcie", "", ""], "kind": ["gpu", "cpu", "gpu"],
                         "engine": ["matrix", "memory", "vector"], "dtype": ["fp32", "*", "fp16"],
                         "size": [1e9, 1e6, 1e5]})


def _learned_features() -> pd.DataFrame:
    return synthetic_set(n_gemm=6, n_vec=6, devices=("a100-40gb-pcie",)).X


def _engine_features() -> pd.DataFrame:
    return pd.DataFrame({"runtime": ["vllm", "vllm", "tensorrt-llm", "my-engine"],
                         "phase": ["decode", "prefill", "prefill", "decode"],
                         "device": ["h100-sxm", "mi300x", "a100-40gb-sxm", "h100-sxm"],
                         "model_s": [0.01, 0.2, 0.3, 0.01], "seqs": [8, 1, 4, 2]})


def _collective_features() -> pd.DataFrame:
    curves = CollectiveModel.load().curves
    return curves[curves.size_bytes.between(2**20, 2**26)].groupby("system").head(2)


FEATURES = {"efficiency": _efficiency_features, "learned": _learned_features,
            "llm-engines": _engine_features, "collectives": _collective_features}


def test_every_registered_kind_has_a_shipped_correction_and_a_test_sample():
    assert set(KINDS) == set(BUNDLED) == set(FEATURES)
    table = installed()
    assert set(table["kind"]) == set(KINDS)
    assert table.loc[table["kind"] == "learned", "active"].all()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_save_then_load_gives_the_same_correction(kind, tmp_path):
    shipped = load_correction(BUNDLED[kind], kind)
    assert isinstance(shipped, FittedCorrection)
    assert shipped.kind == kind
    folder = shipped.save(tmp_path / kind)
    back = load_correction(folder)
    assert type(back) is type(shipped)
    assert back.metadata == shipped.metadata
    features = FEATURES[kind]()
    before, after = np.asarray(shipped.predict(features)), np.asarray(back.predict(features))
    assert len(before) == len(features)
    assert np.isfinite(before).all()
    np.testing.assert_array_equal(after, before)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_metadata_json_is_valid_and_names_its_files(kind):
    folder = BUNDLED[kind]
    doc = json.loads((folder / METADATA).read_text())
    meta = FittedMetadata.from_json(doc, kind)
    assert meta.kind == kind
    assert meta.files
    assert meta.fitted_on
    assert meta.sources
    assert all((folder / name).is_file() for name in meta.files)
    assert FittedMetadata.from_json(json.loads(json.dumps(meta.to_json())), kind) == meta


def _copy(kind: str, tmp_path):
    return shutil.copytree(BUNDLED[kind], tmp_path / kind)


def _edit(folder, **changes):
    doc = json.loads((folder / METADATA).read_text())
    doc.update(changes)
    (folder / METADATA).write_text(json.dumps(doc))


def test_an_unknown_kind_is_refused(tmp_path):
    folder = _copy("efficiency", tmp_path)
    _edit(folder, kind="magic")
    with pytest.raises(PredictionError, match="unknown fitted-correction kind 'magic'"):
        load_correction(folder)
    with pytest.raises(PredictionError, match="not 'llm-engines'"):
        load_correction(BUNDLED["efficiency"], "llm-engines")
    with pytest.raises(PredictionError, match="holds a 'efficiency' correction"):
        EngineCalibrations.load(BUNDLED["efficiency"])


@pytest.mark.parametrize("text", ["{not json", '{"kind": "efficiency", "files": NaN}', "[1, 2]",
                                  '{"kind": "efficiency", "files": "efficiency_curves.toml"}',
                                  '{"kind": "efficiency", "files": [], "data_hash": "xyz"}',
                                  '{"kind": "efficiency", "files": [], "fitted_on": "yesterday"}'])
def test_corrupt_metadata_is_refused(tmp_path, text):
    folder = _copy("efficiency", tmp_path)
    (folder / METADATA).write_text(text)
    with pytest.raises(PredictionError):
        load_correction(folder)


def test_a_folder_without_metadata_is_refused(tmp_path):
    with pytest.raises(PredictionError, match=r"metadata\.json missing"):
        load_correction(tmp_path)


def test_pickles_are_refused_by_name_and_by_content(tmp_path):
    folder = _copy("llm-engines", tmp_path)
    (folder / "engines.pkl").write_bytes(pickle.dumps({"engines": {}}))
    _edit(folder, files=["engines.pkl"])
    with pytest.raises(PredictionError, match="never a pickle"):
        load_correction(folder)
    (folder / "llm_engines.json").write_bytes(pickle.dumps({"engines": {}}))
    _edit(folder, files=["llm_engines.json"])
    with pytest.raises(PredictionError, match="is a pickle"):
        load_correction(folder)


def test_a_data_file_outside_the_folder_is_refused(tmp_path):
    folder = _copy("efficiency", tmp_path)
    _edit(folder, files=["../efficiency_curves.toml"])
    with pytest.raises(PredictionError, match="refused"):
        EfficiencyCurves.load(folder)


def test_a_broken_engine_table_is_refused_when_loaded(tmp_path):
    folder = _copy("llm-engines", tmp_path)
    doc = json.loads((folder / "llm_engines.json").read_text())
    doc["engines"]["vllm-2024"]["decode"]["scale"] = -1
    (folder / "llm_engines.json").write_text(json.dumps(doc))
    with pytest.raises(PredictionError, match="non-positive scale"):
        load_correction(folder)


# ---------------------------------------------------------------------------- fit
def test_efficiency_fit_replaces_the_fitted_curves_and_keeps_the_priors(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    flops = 10 ** rng.uniform(7, 11, n)
    rows = pd.DataFrame({"device": "t4", "family": "matmul", "flops": flops, "bytes": flops / 10,
                         "compute_s": flops / 1e13, "memory_s": flops / 1e15,
                         "t_kernel": flops / 1e13 / 0.5, "l2_bytes": 4e6})
    curves = EfficiencyCurves.load().fit(rows)
    assert curves.curve("gpu", "matrix", "fp32", "t4").fractions == pytest.approx(
        [0.5] * len(curves.curve("gpu", "matrix", "fp32", "t4").xs))
    assert curves.curve("cpu", "memory", "*") == EfficiencyCurves.load().curve("cpu", "memory", "*")
    assert curves.metadata.data_hash
    assert curves.metadata.validation["fit_rows"] == n
    back = EfficiencyCurves.load(curves.save(tmp_path / "eff"))
    assert back.curves == curves.curves
    assert back.metadata == curves.metadata


def test_collectives_fit_on_a_system_predicts_its_curves():
    curves = CollectiveModel.load().curves
    rows = curves[curves.system == "h100_pairwise_nvlink"]
    model = CollectiveModel(rows, {}, {}).fit(rows)
    assert model.metadata.validation["median_abs_log_error"] < 0.3
    assert model.metadata.sources == ("microsoft/vidur",)
    assert (model.predict(rows.head(5)) > 0).all()


def _serving_rows() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    devs = [("h100-sxm", "NVIDIA"), ("a100-40gb-sxm", "NVIDIA"), ("mi300x", "AMD")]
    rows = []
    for dev, vendor in devs:
        for i in range(12):
            batch = int(rng.choice([1, 16]))
            steps = int(rng.choice([127, 255]))
            rows.append({"engine": "toy", "device": dev, "vendor": vendor, "figure": "all",
                         "model": f"m{i % 2}", "wave_batch": batch,
                         "prefill_s": rng.uniform(0.01, 1), "decode_s": rng.uniform(0.5, 5),
                         "prefill_steps": 1, "decode_steps": steps, "prefill_seqs": batch,
                         "decode_seqs": steps * batch, "ttft_s": np.nan})
    f = pd.DataFrame(rows)
    f["latency_s"] = 1.2 * (f["prefill_s"] + f["decode_s"]) * rng.uniform(0.98, 1.02, len(f))
    return f


def test_engine_fit_gives_a_calibration_that_serves(tmp_path):
    cal = EngineCalibrations({}).fit(_serving_rows())
    assert set(cal.document["engines"]) == {"toy"}
    assert "toy" in cal.metadata.validation
    back = load_correction(cal.save(tmp_path / "engines"))
    f = pd.DataFrame({"runtime": ["toy"], "phase": ["decode"], "device": ["h100-sxm"],
                      "model_s": [0.01]})
    assert back.predict(f)[0] == pytest.approx(cal.predict(f)[0]) != 0.01


@pytest.fixture(scope="module")
def trained() -> LearnedCorrection:
    ts = synthetic_set(n_gemm=40, n_vec=30, devices=("v100-pcie-32gb", "t4", "a100-40gb-pcie"))
    return LearnedCorrection().fit(ts.X.assign(**{TARGET: ts.y_s}), quick=True)


def test_a_learned_fit_saves_and_loads_through_the_contract(trained, tmp_path):
    meta = trained.metadata
    assert meta.fitted_on
    assert meta.kind == "learned"
    assert meta.data_hash
    assert meta.validation
    back = load_correction(trained.save(tmp_path / "mine"))
    assert read_metadata(tmp_path / "mine")[0] == back.metadata
    X = _learned_features()
    np.testing.assert_array_equal(back.predict(X), trained.predict(X))


# ---------------------------------------------------------------------------- serving
def _serve(estimator, device="a100-40gb-pcie"):
    import roofcast

    return roofcast.llm("gpt2", device, input_tokens=64, output_tokens=8, estimator=estimator)


def test_a_trained_and_installed_learned_model_reaches_llm_serving(trained):
    """``learned:NAME`` layers the installed model on the shipped base: on a device it was
    trained on, its families time the kernels (``@NAME``); the other families keep the base."""
    from roofcast.predictor.learned import installed

    installed.install(trained.model, "mine", activate=False)
    by_name = _serve("learned:mine")
    used = by_name.kernels["predictor"].astype(str)
    assert used.str.contains("@mine").any()
    assert by_name.tpot_s != _serve("learned").tpot_s  # the layer acts
    assert by_name.tpot_s != _serve("time-roofline").tpot_s
    assert _serve("learned:default").tpot_s == _serve("learned").tpot_s  # none installed active
    with pytest.raises(PredictionError, match="no installed learned model 'other'"):
        _serve("learned:other")


def test_an_installed_learned_model_reaches_the_graph_road_by_name(trained):
    """``learned:NAME`` is one name on every road: a one-device graph prediction too."""
    import roofcast
    from roofcast.predictor.learned import installed

    installed.install(trained.model, "mine", activate=False)
    kw = {"dims": {"sequence": 64}}
    by_name = roofcast.predict("gpt2", "a100-40gb-pcie", estimator="learned:mine", **kw)
    alone = roofcast.predict("gpt2", "a100-40gb-pcie", estimator=trained.estimator(), **kw)
    mine = by_name.per_op["predictor"].astype(str).str.contains("@mine")
    assert mine.any()
    # the user's families give the same kernel times as the user's model alone
    assert by_name.per_op.loc[mine, "time_s"].tolist() == alone.per_op.loc[mine, "time_s"].tolist()
    assert "learned@mine" in by_name.road
