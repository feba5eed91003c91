"""Where the GPU leave-one-device-out error comes from: spec-sheet transfer vs oracles.

Run: ``python benchmarks/gpu_transfer.py [--cap N] [--coverage DEVICE] [--format table|csv|json]``

For every GPU op family and every NeuSight GPU held out, the learned family model
(``predictor.learned.model.FamilyModel``, xgboost candidate, trained exactly as ``roofcast
train`` does on every other device's public rows) predicts the held-out device. Besides that
honest figure (``spec``: catalog figures only, the issue's acceptance) it prints what the error
would be if the model were told something about the held-out device that no catalog holds —
**oracles**, which use the held-out device's own measurements and are therefore *not*
achievable figures, only a map of where the error lives:

* ``own_floor``: the held-out device's own harness floor (``harness_floor`` of its rows: the
  PyTorch dispatch time of its host) replaces the training devices' median at prediction;
* ``measured_peaks``: every NeuSight GPU's best achieved FLOP/s (its fastest GEMM row) and
  bandwidth (its fastest elementwise row) replace the catalog's peak and DRAM bandwidth, for
  the training devices and the held-out one alike, i.e. a perfect ``hw calibrate`` of each GPU;
* ``bias_removed``: the spec predictions divided by their median ratio to the measurement on
  the held-out device — the best any per-device constant could do;
* ``bias``: that median ratio (predicted / measured; > 1: the device is faster than predicted);
* ``same_shape_spec`` (honest, no held-out data, but only for kernels measured on the other
  GPUs): no model — the held-out device's time of a kernel predicted from the *measured* times
  of the very same kernel on the other NeuSight GPUs, each scaled by the ratio of the
  roofline bounds (catalog figures) of the held-out GPU and that GPU, geometric mean:
  ``exp(mean_o(log t_o - log b_o) + log b_d)``;
* ``same_shape_oracle``: no model at all — the held-out device's time of a kernel predicted as
  the geometric mean of the *measured* times of the very same kernel (same op and shape) on the
  other NeuSight GPUs, scaled by the held-out device's own median ratio to that mean (all rows,
  not capped; kernels measured on every NeuSight GPU of the family). Where even this is above
  a target, transfer across these GPUs cannot reach it: per kernel, the GPUs disagree by more.

Median APE in percent per (family, held-out device) and pooled over the rows of a family (as
the acceptance table of ``learned_accuracy.py``).

``auto`` is the one road of ``roofcast compare`` (``predictor.learned.transfer``): the same
held-out model, with rows out of the training distribution (ranges or device distance fitted on
the training GPUs) given the family's clipped efficiency. Table ``estimators`` puts it beside
every analytical estimator on the same held-out rows (pooled median APE per family and over all
rows): the input for choosing the default estimator.

``--coverage DEVICE``: train the whole learned model as ``roofcast train`` does (grouped CV,
conformal intervals) without DEVICE, and report on DEVICE's rows the median APE and the 90 %
interval coverage of ``learned`` (in-distribution intervals) and ``auto`` (rows out of
distribution transferred, intervals widened by ``transfer.widening``): table
``transfer_coverage`` (several minutes).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.learned_accuracy import NEUSIGHT_GPUS
from roofcast.app.output import add_format_arg, emit
from roofcast.predictor.estimator_registry import make_estimator
from roofcast.predictor.learned.data import DEFAULT_CAP, public_set
from roofcast.predictor.learned.features import learned_features, roofline_terms
from roofcast.predictor.learned.model import FamilyModel, bounded_time, harness_floor
from roofcast.predictor.learned.ood import DEVICE_DISTANCE, DeviceSet, Ranges
from roofcast.predictor.learned.training import WEIGHT_POWER, ape, time_weights
from roofcast.predictor.learned.transfer import clip_efficiency

FAMILIES = ("conv", "elementwise", "matmul", "normalization", "softmax")
VARIANTS = ("spec", "auto", "own_floor", "measured_peaks", "bias_removed", "same_shape_spec",
            "same_shape_oracle")
#: analytical estimators compared with the learned ones on the held-out rows.
ANALYTICAL = ("time-roofline", "roofline+eff", "traffic", "roofline")


def measured_peaks(X: pd.DataFrame, meas: np.ndarray, device: str) -> tuple[float, float]:
    """(best achieved FLOP/s of a GEMM row, best achieved bytes/s of an elementwise row); not
    conv rows: Winograd/FFT kernels do fewer FLOPs than the direct convolution they are
    credited with (up to 2.2x the V100's peak in the NeuSight data)."""
    on = (X["device"] == device).to_numpy()
    mat = on & (X["family"] == "matmul").to_numpy() & (X["flops"] > 0).to_numpy()
    ew = on & (X["family"] == "elementwise").to_numpy()
    moved = (X["bytes_read"] + X["bytes_written"]).to_numpy(float)
    return (float(np.max(X["flops"].to_numpy(float)[mat] / meas[mat])),
            float(np.max(moved[ew] / meas[ew])))


def with_measured_figures(X: pd.DataFrame, meas: np.ndarray) -> pd.DataFrame:
    """X with every NeuSight GPU's peak and DRAM bandwidth replaced by ``measured_peaks``."""
    out = X.copy()
    for device in NEUSIGHT_GPUS:
        on = out["device"] == device
        out.loc[on, "peak_flops_per_s"], out.loc[on, "mem_bw_Bps"] = measured_peaks(X, meas, device)
    return out


SHAPE_KEY = ("op_type", "flops", "bytes_read", "bytes_written", "gemm_batch", "gemm_m", "gemm_n",
             "gemm_k", "inner_elems")


def same_shape() -> dict[tuple[str, str, str], np.ndarray]:
    """(family, held-out device, variant) -> APE of the two same-shape predictors (module
    docstring): ``same_shape_spec`` (honest) and ``same_shape_oracle``."""
    ts = public_set(devices=list(NEUSIGHT_GPUS), cap=None)
    X = ts.X[[*SHAPE_KEY, "family", "device"]].copy()
    X["t"] = ts.y_s
    X["bound"] = roofline_terms(ts.X)[2]
    out = {}
    for family, rows in X.groupby("family"):
        keyed = rows.fillna({c: -1.0 for c in SHAPE_KEY if c != "op_type"})
        logs, log_bound = (np.log(keyed.pivot_table(index=list(SHAPE_KEY), columns="device",
                                                    values=v, aggfunc="median"))
                           for v in ("t", "bound"))
        ok = logs.notna().all(axis=1) & np.isfinite(log_bound).all(axis=1)
        logs, log_bound = logs[ok], log_bound[ok]
        for device in logs.columns:
            others = logs.columns != device
            r = logs[device] - logs.loc[:, others].mean(axis=1)
            out[(str(family), str(device), "same_shape_oracle")] = \
                np.abs(np.exp(r - np.median(r)) - 1).to_numpy()
            spec = (logs.loc[:, others] - log_bound.loc[:, others]).mean(axis=1) + log_bound[device]
            out[(str(family), str(device), "same_shape_spec")] = \
                np.abs(np.exp(spec - logs[device]) - 1).to_numpy()
    return out


@dataclass(frozen=True)
class Featurized:
    """A public-kernel table with its learned features and physical bounds, computed once."""

    X: pd.DataFrame
    meas: np.ndarray
    F: pd.DataFrame
    bound: np.ndarray

    @classmethod
    def of(cls, X: pd.DataFrame, meas: np.ndarray) -> Featurized:
        return cls(X, meas, learned_features(X), roofline_terms(X)[2])


def fit_without(t: Featurized, family: str, device: str) -> tuple[FamilyModel, np.ndarray]:
    """(the family's model trained on every other GPU's rows, mask of ``device``'s rows)."""
    fam = ((t.X["family"] == family).to_numpy() & (t.X["device_kind"] == "gpu").to_numpy()
           & (t.bound > 0))
    test = fam & (t.X["device"] == device).to_numpy()
    train = fam & ~test
    fm = FamilyModel.fit(f"gpu/{family}", "xgboost", t.F[train], t.meas[train], t.bound[train],
                         t.X["device"].to_numpy()[train],
                         weight=time_weights(t.meas[train], WEIGHT_POWER))
    return fm, test


def transferred_time(t: Featurized, fm: FamilyModel, family: str, test: np.ndarray
                     ) -> np.ndarray:
    """``auto``'s time of the ``test`` rows: rows outside the training ranges or far from the
    training GPUs (fitted on the family's other rows) get the clipped efficiency."""
    fam = ((t.X["family"] == family).to_numpy() & (t.X["device_kind"] == "gpu").to_numpy()
           & (t.bound > 0))
    train = fam & ~test
    ranges = Ranges.fit(t.F[train])
    devices = DeviceSet.fit(t.F[train], t.X["device"].to_numpy()[train])
    flag = ranges.outside(t.F[test])[0] | (devices.distance(t.F[test])[0] > DEVICE_DISTANCE)
    y = fm.predict_log(t.F[test])
    y = np.where(flag, clip_efficiency(y, fm.y_range), y)
    return bounded_time(t.bound[test], y, fm.floor_s)


def transfer_coverage(ts, device: str) -> pd.DataFrame:
    """``--coverage`` (module docstring)."""
    from roofcast.predictor.learned.training import train

    held = (ts.X["device"] == device).to_numpy()
    if not held.any():
        raise SystemExit(f"no public rows for {device}; choose one of {', '.join(NEUSIGHT_GPUS)}")
    model = train(ts.subset(~held)).model
    test = ts.subset(held)
    out = []
    for mode in ("learned", "auto"):
        ex = model.explain(test.X, mode=mode)
        cov = (ex["lower_s"] <= test.y_s) & (test.y_s <= ex["upper_s"])
        moved = ex["predictor"].str.startswith("learned (transferred)").to_numpy()
        out.append({"held_out_device": device, "mode": mode, "rows": len(ex),
                    "median_ape_pct": 100 * float(np.median(ape(ex["time_s"].to_numpy(),
                                                                test.y_s))),
                    "coverage_pct": 100 * float(cov.mean()),
                    "transferred_rows": int(moved.sum()),
                    "median_log10_width": float(np.median(np.log10(ex["upper_s"]
                                                                   / ex["lower_s"])))})
    return pd.DataFrame(out)


def held_out_ape(t: Featurized, fm: FamilyModel, test: np.ndarray) -> np.ndarray:
    """APE of ``fm`` on the rows of ``test``."""
    return ape(fm.predict_time(t.F[test], t.bound[test]), t.meas[test])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=DEFAULT_CAP,
                        help="public rows per (family, device), as roofcast train")
    parser.add_argument("--coverage", metavar="DEVICE",
                        help="also train the whole model without DEVICE and report its interval "
                             "coverage, learned vs auto (slow)")
    add_format_arg(parser)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    ts = public_set(cap=args.cap)
    X, meas = ts.X.reset_index(drop=True), ts.y_s
    rows, errors = [], {}
    shapes = same_shape()
    spec, calibrated = Featurized.of(X, meas), Featurized.of(with_measured_figures(X, meas), meas)
    analytical = {name: make_estimator(name).predict(X) for name in ANALYTICAL}
    est_errors: dict[tuple[str, str], list] = {}
    for device in NEUSIGHT_GPUS:
        for family in FAMILIES:
            if not ((X["family"] == family) & (X["device"] == device)).any():
                continue
            fm, test = fit_without(spec, family, device)
            pred, m = fm.predict_time(spec.F[test], spec.bound[test]), meas[test]
            ratio = float(np.median(pred / m))
            own = replace(fm, floor_s=harness_floor(m, spec.bound[test], X["device"][test]))
            auto = ape(transferred_time(spec, fm, family, test), m)
            for name, err in (("learned", ape(pred, m)), ("auto", auto),
                              *((n, ape(t[test], m)) for n, t in analytical.items())):
                est_errors.setdefault((family, name), []).append(err)
            e = {"spec": ape(pred, m), "auto": auto,
                 "own_floor": held_out_ape(spec, own, test),
                 "measured_peaks": held_out_ape(calibrated, *fit_without(calibrated, family,
                                                                         device)),
                 "bias_removed": ape(pred / ratio, m),
                 **{v: shapes.get((family, device, v), np.array([np.nan]))
                    for v in ("same_shape_spec", "same_shape_oracle")}}
            for k, v in e.items():
                errors.setdefault((family, k), []).append(v)
            rows.append({"family": family, "held_out_device": device, "rows": len(m),
                         **{k: 100 * float(np.median(v)) for k, v in e.items()}, "bias": ratio})
    per_device = pd.DataFrame(rows)
    pooled = pd.DataFrame([{"family": f, **{k: 100 * float(np.median(np.concatenate(
        errors[(f, k)]))) for k in VARIANTS}} for f in FAMILIES if (f, "spec") in errors])
    names = ("learned", "auto", *ANALYTICAL)
    estimators = pd.DataFrame([{"family": f, **{n: 100 * float(np.median(np.concatenate(
        est_errors[(f, n)]))) for n in names}} for f in FAMILIES if (f, "learned") in est_errors]
        + [{"family": "ALL rows", **{n: 100 * float(np.median(np.concatenate(
            [e for (f, k), v in est_errors.items() if k == n for e in v]))) for n in names}}])
    tables = {"pooled": pooled.round(1), "per_device": per_device.round(2),
              "estimators": estimators.round(1)}
    if args.coverage:
        tables["transfer_coverage"] = transfer_coverage(ts, args.coverage).round(2)
    emit(tables, args.format,
         extra={"cap_per_family_device": args.cap, "rows": len(X),
                "elapsed_s": round(time.perf_counter() - t0, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
