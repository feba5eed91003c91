"""Train, validate and calibrate the learned predictors.

``train(ts)``: drops implausible rows (faster than ``IMPLAUSIBLE_FRACTION`` x the physical bound),
splits by model key (road / op family; keys under ``MIN_ROWS`` rows fall back to the analytical
estimator), cross-validates every candidate (``model.CANDIDATES``) with folds grouped by device
(GPU) or model (CPU), picks the best by the mean of the median and time-weighted median APE,
refits it on the key's rows, calibrates conformal intervals on the out-of-fold residuals
(``intervals``), keeps OOD data (``ood``) and, for whole-model runs, an end-to-end factor
validated leave-one-model-out. ``validation_tables(result)``: per-family, per-group and
end-to-end error tables beside the analytical baseline. APE = |predicted − measured| / measured.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.learned.training).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators.roofline import TimeRoofline
from roofcast.predictor.learned.data import TrainingSet
from roofcast.predictor.learned.features import learned_features, model_keys, roofline_terms
from roofcast.predictor.learned.intervals import (
    ALPHA,
    BinnedIntervals,
    EndToEnd,
    conformal_quantiles,
    group_adjusted_alpha,
    nested_group_coverage,
)
from roofcast.predictor.learned.model import CANDIDATES, ROW_FLOOR, FamilyModel
from roofcast.predictor.learned.ood import DeviceSet, Ranges
from roofcast.predictor.learned.predictor import LearnedModel
from roofcast.predictor.learned.roads import primary_runtimes, runtime_column, training_roads
from roofcast.predictor.learned.stats import weighted_median

MIN_ROWS = 30
MAX_FOLDS = 8
RANDOM_FOLDS = 5
BASELINE = TimeRoofline.name  # the analytical baseline of the tables (and the fallback)
IMPLAUSIBLE_FRACTION = 0.25
WEIGHT_POWER = 0.5
QUICK_XGB = {"n_estimators": 60, "max_depth": 4}


def fold_ids(groups: np.ndarray, max_folds: int = MAX_FOLDS) -> np.ndarray:
    """Fold number per row (module docstring, point 2)."""
    names, inv, counts = np.unique(groups, return_inverse=True, return_counts=True)
    if len(names) <= max_folds:
        return inv
    order = np.argsort(-counts, kind="stable")
    fold_of = np.empty(len(names), dtype=int)
    own = max_folds - 2
    fold_of[order[:own]] = np.arange(own)
    fold_of[order[own:]] = own + (np.arange(len(names) - own) % 2)
    return fold_of[inv]


def ape(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(np.asarray(pred) - meas) / meas


def cv_score(pred: np.ndarray, meas: np.ndarray, folds: np.ndarray) -> float:
    """(median APE + time-weighted median APE) / 2 over all out-of-fold rows, the candidate
    score of point 3 (module docstring). Row weights ``1 / n_f`` (``n_f``: rows of the row's
    fold) in the median, so every held-out fold weighs the same however many rows it has;
    ``t / n_f`` in the time-weighted median, so within a fold longer kernels count more and a
    fold counts in proportion to its mean measured time ``t``. A non-finite error scores
    ``inf``."""
    e = ape(pred, meas)
    if not np.isfinite(e).all():
        return float("inf")
    _, inv, counts = np.unique(folds, return_inverse=True, return_counts=True)
    w = 1.0 / counts[inv]
    return float(weighted_median(e, w) + weighted_median(e, w * meas)) / 2.0


@dataclass
class KeyResult:
    key: str
    candidate: str
    cv: str
    rows: np.ndarray  # positions in the training set
    oof_s: np.ndarray  # out-of-fold predicted seconds of the chosen candidate
    covered: np.ndarray
    candidate_errors: dict[str, float]


@dataclass
class TrainResult:
    model: LearnedModel
    ts: TrainingSet
    keys: dict[str, KeyResult]
    oof_s: np.ndarray  # per training row: out-of-fold learned time (analytical where no model)
    baseline_s: np.ndarray
    e2e: pd.DataFrame  # per run: model, group, kind, measured, learned, analytical, interval
    notes: list[str] = field(default_factory=list)


#: how one candidate is fitted: ``FamilyModel.fit``'s signature (``(key, candidate, F, meas_s,
#: t_bound, groups, xgb_params, weight) -> FamilyModel``); ``distributed`` passes one that fits
#: the XGBoost candidate with ``xgboost.dask`` on a cluster.
Fitter = Callable[..., FamilyModel]


def _cv_predict(candidate: str, F: pd.DataFrame, meas: np.ndarray, bound: np.ndarray,
                groups: np.ndarray, folds: np.ndarray, key: str, xgb_params: dict | None,
                weight: np.ndarray | None, fit: Fitter = FamilyModel.fit) -> np.ndarray:
    """Out-of-fold predicted seconds: each fold by a model (and floor) fitted without it."""
    out = np.empty(len(meas))
    for f in np.unique(folds):
        test = folds == f
        w = None if weight is None else weight[~test]
        fm = fit(key, candidate, F.iloc[~test], meas[~test], bound[~test],
                             groups[~test], xgb_params, w)
        out[test] = fm.predict_time(F.iloc[test], bound[test])
    return out


def time_weights(meas_s: np.ndarray, power: float) -> np.ndarray | None:
    """Sample weights ``(t / median t)^power`` clipped to [0.1, 10] (None when power is 0):
    longer kernels count more, since they make up a run's time."""
    if power == 0:
        return None
    w = (np.asarray(meas_s, float) / np.median(meas_s)) ** power
    return np.clip(w, 0.1, 10.0)


def borrowing_rows(X: pd.DataFrame, kinds: np.ndarray, measured_rt: np.ndarray,
                   primary: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """(runtime each row trains the road of, own floor per row or NaN): a row whose
    ``learned_from`` is set to its kind's primary runtime (and differs from its own runtime)
    trains that runtime's road with its ``dispatch_floor_s`` as floor, as ``roads`` predicts it
    (one model per family); other rows train their own runtime's road with the harness floor."""
    learned = X["learned_from"].fillna("").astype(str).to_numpy()
    prim = np.array([primary[k] for k in kinds], dtype=object)
    borrow = (learned != "") & (learned == prim) & (measured_rt != prim)
    floor = np.where(borrow, X["dispatch_floor_s"].to_numpy(float), np.nan)
    return np.where(borrow, prim, measured_rt), floor


def train(ts: TrainingSet, *, candidates: tuple[str, ...] = CANDIDATES, quick: bool = False,
          alpha: float = ALPHA, progress: Callable[[str], None] | None = None,
          meta: dict[str, Any] | None = None, weight_power: float = WEIGHT_POWER,
          fit: Fitter = FamilyModel.fit) -> TrainResult:
    """Fit, cross-validate and calibrate (module docstring); ``fit`` fits one candidate
    (``Fitter``; ``distributed.train_on_cluster`` passes the Dask one)."""
    settings = _FitSettings(candidates, QUICK_XGB if quick else None, alpha, weight_power, fit,
                            progress or (lambda _msg: None))
    X = ts.X
    notes: list[str] = []
    F = learned_features(X)
    kinds = X["device_kind"].astype(str).to_numpy()
    measured_rt = runtime_column(X, "runtime")
    primary = primary_runtimes(kinds, measured_rt)
    road_rt, F[ROW_FLOOR] = borrowing_rows(X, kinds, measured_rt, primary)
    roads, runtimes = training_roads(kinds, road_rt, primary)
    keys = np.array([f"{r}/{f}" for r, f in zip(roads, X["family"].astype(str), strict=True)],
                    dtype=object)
    _, _, bound = roofline_terms(X)
    meas = ts.y_s
    groups = X["_group"].astype(str).to_numpy()
    baseline = TimeRoofline().predict(X)
    oof_all = baseline.copy()
    usable = _usable_rows(bound, meas, notes)
    models, intervals, ranges, results = {}, {}, {}, {}
    for key in sorted(set(keys[usable])):
        rows = np.flatnonzero(usable & (keys == key))
        if len(rows) < MIN_ROWS:
            notes.append(f"{key}: {len(rows)} rows < {MIN_ROWS}: no learned model (analytical)")
            continue
        models[key], intervals[key], ranges[key], results[key] = _train_key(
            key, rows, F, meas, bound, groups, settings
        )
        oof_all[rows] = results[key].oof_s
    devices = {k: DeviceSet.fit(F[kinds == k], X.loc[kinds == k, "device"].to_numpy())
               for k in sorted(set(kinds))}
    e2e_table, e2e_cal = _end_to_end(X, meas, oof_all, baseline, alpha)
    info = {"data_hash": ts.data_hash, "source": ts.source, "rows": len(ts), "alpha": alpha,
            "dropped_rows": ts.dropped, "notes": notes, "runtimes": runtimes, **(meta or {})}
    model = LearnedModel(models, intervals, ranges, devices, e2e_cal, info)
    result = TrainResult(model, ts, results, oof_all, baseline, e2e_table, notes)
    model.meta["validation"] = {name: t.to_dict(orient="records")
                                for name, t in validation_tables(result).items()}
    return result


@dataclass(frozen=True)
class _FitSettings:
    """What ``train`` fits with, the same for every model key."""

    candidates: tuple[str, ...]
    xgb_params: dict[str, Any] | None
    alpha: float
    weight_power: float
    fit: Fitter
    say: Callable[[str], None]


def _usable_rows(bound: np.ndarray, meas: np.ndarray, notes: list[str]) -> np.ndarray:
    """Rows with work and a measurement, less those measured implausibly fast (noted)."""
    usable = (bound > 0) & (meas > 0)
    implausible = usable & (meas < IMPLAUSIBLE_FRACTION * bound)
    if implausible.any():
        notes.append(f"{int(implausible.sum())} rows measured faster than {IMPLAUSIBLE_FRACTION} x "
                     "the physical bound (mis-attributed or mis-costed): not used")
        usable &= ~implausible
    return usable


def _folds(gk: np.ndarray) -> tuple[np.ndarray, str]:
    """(fold per row, how the folds were made): by group, or random with one group only."""
    folds = fold_ids(gk)
    cv = f"grouped ({len(np.unique(gk))} groups, {len(np.unique(folds))} folds)"
    if len(np.unique(folds)) < 2:
        folds = np.random.default_rng(0).integers(0, RANDOM_FOLDS, len(gk))
        cv = f"random {RANDOM_FOLDS}-fold (one group only: not a transfer estimate)"
    return folds, cv


def _train_key(
    key: str,
    rows: np.ndarray,
    F: pd.DataFrame,
    meas: np.ndarray,
    bound: np.ndarray,
    groups: np.ndarray,
    s: _FitSettings,
) -> tuple[FamilyModel, BinnedIntervals, Ranges, KeyResult]:
    """Cross-validate every candidate on ``key``'s rows, fit the best and calibrate it."""
    Fk, gk = F.iloc[rows], groups[rows]
    wk = time_weights(meas[rows], s.weight_power)
    folds, cv = _folds(gk)
    errs, oofs = {}, {}
    for cand in s.candidates:
        oofs[cand] = _cv_predict(cand, Fk, meas[rows], bound[rows], gk, folds, key,
                                 s.xgb_params, wk, s.fit)
        errs[cand] = cv_score(oofs[cand], meas[rows], folds)
    best = min(s.candidates, key=lambda c: (errs[c], CANDIDATES.index(c)))
    s.say(f"{key}: {len(rows)} rows, {cv}; CV error (median + time-weighted median "
          "APE)/2, rows weighted 1/(rows of their fold): "
          + ", ".join(f"{c} {100 * e:.1f}%" for c, e in errs.items()) + f" -> {best}")
    model = s.fit(key, best, Fk, meas[rows], bound[rows], gk, s.xgb_params, wk)
    oof = oofs[best]
    lp = np.log10(oof)
    resid = np.log10(meas[rows]) - lp
    level = group_adjusted_alpha(lp, resid, folds, s.alpha)
    intervals = BinnedIntervals.calibrate(lp, resid, level)
    cov = nested_group_coverage(lp, resid, folds, s.alpha)
    return model, intervals, Ranges.fit(Fk), KeyResult(key, best, cv, rows, oof, cov, errs)


def _end_to_end(X: pd.DataFrame, meas: np.ndarray, oof: np.ndarray, baseline: np.ndarray,
                alpha: float) -> tuple[pd.DataFrame, dict[str, EndToEnd]]:
    """Per-run end-to-end table and per-kind calibration (module docstring, point 6)."""
    e2e = X["_e2e_s"].to_numpy(float)
    groups = X["_group"].astype(str)
    ok = np.isfinite(e2e) & groups.str.startswith("model:").to_numpy() & \
        (groups != "model:micro").to_numpy()
    cols = ["run", "group", "kind", "device", "measured_s", "sum_ops_learned_s",
            "sum_ops_measured_s", "analytical_s", "learned_s", "lower_s", "upper_s", "covered"]
    if not ok.any():
        return pd.DataFrame(columns=cols), {}
    df = pd.DataFrame(
        {
            "run": X["_run"].to_numpy()[ok],
            "group": groups.to_numpy()[ok],
            "kind": X["device_kind"].to_numpy()[ok],
            "device": X["device"].to_numpy()[ok],
            "e2e": e2e[ok],
            "oof": oof[ok],
            "meas": meas[ok],
            "base": baseline[ok],
        }
    )
    runs = (
        df.groupby("run")
        .agg(
            group=("group", "first"),
            kind=("kind", "first"),
            device=("device", "first"),
            measured_s=("e2e", "median"),
            sum_ops_learned_s=("oof", "sum"),
            sum_ops_measured_s=("meas", "sum"),
            analytical_s=("base", "sum"),
        )
        .reset_index()
    )
    runs["log_ratio"] = np.log10(runs["measured_s"] / runs["sum_ops_learned_s"])
    cal: dict[str, EndToEnd] = {}
    parts = []
    for kind, r in runs.groupby("kind"):
        r, cal[str(kind)] = _calibrate_kind_runs(r.copy(), alpha)
        parts.append(r)
    return pd.concat(parts, ignore_index=True)[cols], cal


def _calibrate_kind_runs(r: pd.DataFrame, alpha: float) -> tuple[pd.DataFrame, EndToEnd]:
    """One device kind's runs with leave-one-model-out learned times and intervals, and the
    kind's end-to-end calibration."""
    g = r["group"].to_numpy()
    lr = r["log_ratio"].to_numpy()
    factor = np.array(
        [np.median(lr[g != gi]) if (g != gi).any() else np.median(lr) for gi in g]
    )
    r["learned_s"] = r["sum_ops_learned_s"] * 10.0 ** factor
    resid = np.log10(r["measured_s"].to_numpy() / r["learned_s"].to_numpy())
    lp = np.log10(r["learned_s"].to_numpy())
    lo = np.full(len(r), -np.inf)
    hi = np.full(len(r), np.inf)
    for gi in np.unique(g):  # interval of each model's runs: calibrated without that model
        if (g != gi).sum():
            level = group_adjusted_alpha(lp[g != gi], resid[g != gi], g[g != gi], alpha)
            lo[g == gi], hi[g == gi] = conformal_quantiles(resid[g != gi], level)
    r["lower_s"] = r["learned_s"] * 10.0 ** lo
    r["upper_s"] = r["learned_s"] * 10.0 ** hi
    r["covered"] = (r["lower_s"] <= r["measured_s"]) & (r["measured_s"] <= r["upper_s"])
    q_lo, q_hi = conformal_quantiles(resid, group_adjusted_alpha(lp, resid, g, alpha))
    return r, EndToEnd(float(np.median(lr)), q_lo, q_hi, len(r), alpha)


def _stats(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    e = ape(pred, meas)
    return {
        "median_ape_pct": 100 * float(np.median(e)),
        "p90_ape_pct": 100 * float(np.quantile(e, 0.9)),
        "time_weighted_median_ape_pct": 100 * weighted_median(e, meas),
    }


def validation_tables(res: TrainResult) -> dict[str, pd.DataFrame]:
    """Per-family, per-(family, group) and end-to-end validation tables (module docstring)."""
    meas = res.ts.y_s
    groups = res.ts.X["_group"].astype(str).to_numpy()
    fam_rows, grp_rows = [], []
    for key, kr in sorted(res.keys.items()):
        fam_rows.append(_family_row(res, key, kr, meas, groups))
        grp_rows += _group_rows(res, key, kr, meas, groups)
    tables = {"per_family": pd.DataFrame(fam_rows), "per_group": pd.DataFrame(grp_rows),
              "per_runtime": _runtime_rows(res, meas)}
    all_rows = (
        np.concatenate([kr.rows for kr in res.keys.values()]) if res.keys else np.array([], int)
    )
    if len(all_rows):
        tables["per_op_pooled"] = _pooled_table(res, all_rows, meas)
    if len(res.e2e):
        tables["end_to_end"] = _end_to_end_table(res.e2e)
    return tables


def _family_row(res: TrainResult, key: str, kr: KeyResult, meas: np.ndarray,
                groups: np.ndarray) -> dict[str, Any]:
    m = meas[kr.rows]
    learned, base = _stats(kr.oof_s, m), _stats(res.baseline_s[kr.rows], m)
    return {
        "key": key, "candidate": kr.candidate, "rows": len(kr.rows),
        "groups": len(np.unique(groups[kr.rows])), "cv": kr.cv,
        **{f"learned_{k}": v for k, v in learned.items()},
        **{f"analytical_{k}": v for k, v in base.items()},
        "coverage_pct": 100 * float(kr.covered.mean()),
        **{f"cv_{c}_score_pct": 100 * e for c, e in kr.candidate_errors.items()},
    }


def _runtime_rows(res: TrainResult, meas: np.ndarray) -> pd.DataFrame:
    """Per (model key, measured runtime): out-of-fold learned vs analytical errors (a family
    model trained on eager and graph-captured rows, each judged on its own)."""
    rt = runtime_column(res.ts.X, "runtime")
    out = []
    for key, kr in sorted(res.keys.items()):
        for r in np.unique(rt[kr.rows]):
            sel = rt[kr.rows] == r
            m = meas[kr.rows][sel]
            lm, bm = _stats(kr.oof_s[sel], m), _stats(res.baseline_s[kr.rows][sel], m)
            out.append({"key": key, "runtime": str(r), "rows": int(sel.sum()),
                        "learned_median_ape_pct": lm["median_ape_pct"],
                        "learned_p90_ape_pct": lm["p90_ape_pct"],
                        "analytical_median_ape_pct": bm["median_ape_pct"],
                        "coverage_pct": 100 * float(kr.covered[sel].mean())})
    return pd.DataFrame(out)


def _group_rows(res: TrainResult, key: str, kr: KeyResult, meas: np.ndarray,
                groups: np.ndarray) -> list[dict[str, Any]]:
    m = meas[kr.rows]
    g = groups[kr.rows]
    out = []
    for gi in np.unique(g):
        sel = g == gi
        lm, bm = _stats(kr.oof_s[sel], m[sel]), _stats(res.baseline_s[kr.rows][sel], m[sel])
        out.append({"key": key, "group": gi, "rows": int(sel.sum()),
                    "learned_median_ape_pct": lm["median_ape_pct"],
                    "learned_p90_ape_pct": lm["p90_ape_pct"],
                    "analytical_median_ape_pct": bm["median_ape_pct"],
                    "coverage_pct": 100 * float(kr.covered[sel].mean())})
    return out


def _pooled_table(res: TrainResult, all_rows: np.ndarray, meas: np.ndarray) -> pd.DataFrame:
    kinds = res.ts.X["device_kind"].astype(str).to_numpy()
    pooled = []
    for kind in sorted(set(kinds[all_rows])):
        r = all_rows[kinds[all_rows] == kind]
        cov = np.concatenate([kr.covered for kr in res.keys.values()])[kinds[all_rows] == kind]
        pooled.append(
            {
                "kind": kind,
                "rows": len(r),
                **{f"learned_{k}": v for k, v in _stats(res.oof_s[r], meas[r]).items()},
                **{f"analytical_{k}": v for k, v in _stats(res.baseline_s[r], meas[r]).items()},
                "coverage_pct": 100 * float(cov.mean()),
            }
        )
    return pd.DataFrame(pooled)


def _end_to_end_table(e: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (kind, grp), g in [(("ALL", "ALL"), e), *e.groupby(["kind", "group"])]:
        m = g["measured_s"].to_numpy()
        rows.append(
            {
                "kind": kind,
                "group": grp,
                "runs": len(g),
                "learned_median_ape_pct": 100 * float(np.median(ape(g["learned_s"], m))),
                "learned_p90_ape_pct": 100 * float(np.quantile(ape(g["learned_s"], m), 0.9)),
                "analytical_median_ape_pct": 100 * float(np.median(ape(g["analytical_s"], m))),
                "analytical_p90_ape_pct": 100
                * float(np.quantile(ape(g["analytical_s"], m), 0.9)),
                "coverage_pct": 100 * float(g["covered"].mean()),
            }
        )
    return pd.DataFrame(rows)


def split_holdout(ts: TrainingSet, devices: list[str] = (), models: list[str] = ()
                  ) -> tuple[TrainingSet, TrainingSet | None]:
    """(training rows, held-out rows): rows of the held-out devices and models leave training."""
    if not devices and not models:
        return ts, None
    from roofcast.hw_catalog.catalog import get_device

    ids = {get_device(d).id for d in devices}
    X = ts.X
    mask = (
        X["device"].isin(ids).to_numpy()
        | X["_group"].isin([f"model:{m}" for m in models]).to_numpy()
    )
    if not mask.any():
        raise PredictionError(f"no training rows belong to the held-out devices {sorted(ids)} or "
                              f"models {list(models)}; check the names (`roofcast data list`)")
    if mask.all():
        raise PredictionError("every training row is held out; nothing would be left to train on")
    return ts.subset(~mask), ts.subset(mask)


def evaluate_holdout(model: LearnedModel, ts: TrainingSet) -> dict[str, pd.DataFrame]:
    """Errors of a trained model on held-out rows: per family and, for whole-model runs, end to
    end (learned vs the analytical baseline; interval coverage)."""
    X = ts.X
    meas = ts.y_s
    ex = model.explain(X, mode="learned", fallback=TimeRoofline())
    keys = np.where(model.row_keys(X)[0] != "", model.row_keys(X)[0], model_keys(X))
    pred, base = ex["time_s"].to_numpy(float), ex["analytical_s"].to_numpy(float)
    cov = (ex["lower_s"].to_numpy() <= meas) & (meas <= ex["upper_s"].to_numpy())
    rows = []
    for key in sorted(set(keys)):
        sel = keys == key
        rows.append({"key": key, "rows": int(sel.sum()),
                     "predictor": ex["predictor"][sel].mode().iloc[0],
                     **{f"learned_{k}": v for k, v in _stats(pred[sel], meas[sel]).items()},
                     **{f"analytical_{k}": v for k, v in _stats(base[sel], meas[sel]).items()},
                     "coverage_pct": 100 * float(cov[sel].mean()),
                     "ood_pct": 100 * float(ex["ood"][sel].mean())})
    out = {"holdout_per_family": pd.DataFrame(rows)}
    e2e = X["_e2e_s"].to_numpy(float)
    ok = np.isfinite(e2e) & (X["_group"] != "model:micro").to_numpy() & \
        X["_group"].str.startswith("model:").to_numpy()
    if ok.any():
        df = pd.DataFrame({"run": X["_run"][ok], "group": X["_group"][ok],
                           "kind": X["device_kind"][ok], "e2e": e2e[ok], "pred": pred[ok],
                           "base": base[ok]})
        runs = df.groupby("run").agg(group=("group", "first"), kind=("kind", "first"),
                                     measured_s=("e2e", "median"), sum_pred=("pred", "sum"),
                                     analytical_s=("base", "sum"))
        recs = []
        for run, r in runs.iterrows():
            cal = model.e2e.get(str(r["kind"]))
            p, lo, hi = cal.apply(r["sum_pred"]) if cal else (r["sum_pred"], np.nan, np.nan)
            recs.append({"run": run, "group": r["group"], "measured_ms": 1e3 * r["measured_s"],
                         "learned_ms": 1e3 * p, "analytical_ms": 1e3 * r["analytical_s"],
                         "lower_ms": 1e3 * lo, "upper_ms": 1e3 * hi,
                         "learned_ape_pct": 100 * abs(p - r["measured_s"]) / r["measured_s"],
                         "analytical_ape_pct": 100 * abs(r["analytical_s"] - r["measured_s"])
                         / r["measured_s"],
                         "covered": bool(lo <= r["measured_s"] <= hi)})
        out["holdout_end_to_end"] = pd.DataFrame(recs)
    return out
