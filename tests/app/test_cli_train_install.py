"""`roofcast train` out of the box (packaged public kernels), `--install`, `roofcast models`, and
`predict --estimator learned` using the active installed model without any environment variable."""

from __future__ import annotations

import json

import pytest

from roofcast.app.cli import main
from roofcast.predictor.learned import training
from roofcast.predictor.learned.persistence import DEFAULT_DIR
from roofcast.training_data import public_kernels
from roofcast.training_data.packed_kernels import PACKED_DIR, TABLE_FILE
from tests.predictor.test_learned_cli import measurement_csv, mlp_path  # noqa: F401 (fixtures)


def _json(capsys, argv: list[str]) -> dict:
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _learned_ms(capsys, mlp: str) -> float:
    return _json(capsys, ["predict", mlp, "--hw", "t4", "--batch", "64",
                          "--estimator", "learned"])["total_ms"]


def test_train_without_flags_uses_the_packaged_kernels_and_installs(capsys, monkeypatch):
    monkeypatch.delenv(public_kernels.ENV_VAR, raising=False)
    monkeypatch.setattr(public_kernels, "full_files_dir", lambda data_dir=None: None)
    # --quick with tiny ensembles keeps the test short (it checks sources, install and listing,
    # not fit quality: 20k bundled rows x 13 families x 8 CV folds took ~2 min of xgboost);
    # the sources and saving are those of a bare `roofcast train`
    monkeypatch.setattr(training, "QUICK_XGB", {"n_estimators": 4, "max_depth": 2})
    doc = _json(capsys, ["train", "--quick", "--cap", "50"])
    assert doc["sources"] == "bundled,public"
    assert doc["rows public"].endswith(f"from {PACKED_DIR / TABLE_FILE}")
    rows = {k: int(v.split()[0]) for k, v in doc.items() if k.startswith("rows ")}
    assert rows["rows bundled"] > 0
    assert rows["rows public"] > 0
    assert sum(rows.values()) == doc["training_rows"]
    assert doc["installed_as"].startswith("latest (")
    listed = _json(capsys, ["models", "list"])["models"]
    assert [(m["name"], m["active"]) for m in listed] == [("default", False), ("latest", True)]
    assert listed[1]["sources"] == (f"bundled {rows['rows bundled']}, "
                                    f"public {rows['rows public']}")


def test_installed_model_is_used_by_predict_without_environment(measurement_csv, mlp_path,  # noqa: F811
                                                                capsys, monkeypatch):
    shipped_ms = _learned_ms(capsys, mlp_path)
    doc = _json(capsys, ["train", "--from", str(measurement_csv), "--quick", "--install", "mine"])
    folder = doc["installed_as"].split("(")[1].split(")")[0]
    mine_ms = _learned_ms(capsys, mlp_path)
    assert mine_ms != pytest.approx(shipped_ms, rel=1e-3)
    said = _json(capsys, ["predict", mlp_path, "--hw", "t4", "--estimator", "learned"])
    assert said["learned_model"] == folder  # the output names the model that answered
    monkeypatch.setenv("ROOFCAST_LEARNED_MODEL", folder)
    assert _learned_ms(capsys, mlp_path) == mine_ms
    monkeypatch.setenv("ROOFCAST_LEARNED_MODEL", str(DEFAULT_DIR))  # the override still wins
    assert _learned_ms(capsys, mlp_path) == shipped_ms
    monkeypatch.delenv("ROOFCAST_LEARNED_MODEL")

    assert main(["models", "use", "default"]) == 0
    assert "default" in capsys.readouterr().out
    assert _learned_ms(capsys, mlp_path) == shipped_ms
    assert main(["models", "use", "mine"]) == 0
    assert "mine" in capsys.readouterr().out
    assert _learned_ms(capsys, mlp_path) == mine_ms
    assert main(["models", "remove", "mine"]) == 0
    assert "active: default" in capsys.readouterr().out
    assert _learned_ms(capsys, mlp_path) == shipped_ms


def test_models_user_errors_are_one_line(capsys):
    assert main(["models", "use", "nope"]) == 2
    assert main(["models", "remove", "default"]) == 2
    assert main(["train", "--install", "../evil", "--no-save"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3
    assert "no installed learned model 'nope'" in err[0]
    assert "cannot be removed" in err[1]
    assert "--no-save saves nothing" in err[2]
