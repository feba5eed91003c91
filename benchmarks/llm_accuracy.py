"""Accuracy of roofcast's LLM serving predictions against measured serving data.

    ROOFCAST_SHARED_DATA=../shared/data .venv/bin/python benchmarks/llm_accuracy.py [--quick]

Tables (all errors are |predicted / measured - 1| in %):

1. Argonne LLM-Inference-Bench (``training_data.public.llm_serving``), single-device fp16 rows,
   per engine: leave-one-device-out (the calibration refitted without the device, then
   predicting it) and in distribution (the shipped fit, ``predictor/data/llm_engines.json``),
   of the batch latency and of the throughput; then LOO per engine x device; and the share of
   rows inside the shipped interval (10-90 %: about 80 % expected).
   1b. Where the in-distribution error is: its median over row groups (waves, short runs, batch
   sizes, hardware labels) and over the rest; nothing is excluded.
2. TTFT and end latency (Fig 22): measured vs predicted (shipped fit and LOO).
3. Quantised weights / KV cache (Fig 3, Llama-3-8B on A100/H100): the shipped fit (fitted on
   fp16 rows only) on each dtype pair; measured and predicted latency relative to fp16. The KV
   conversion's operation counts (``predictor/llm/precision.py``, ``KV_CONVERT_OPS``) were
   chosen on the fp8-KV rows of this table: in distribution for those rows.
4. Power (Fig 16): measured tokens per joule (throughput / average power) against roofcast's
   (predicted throughput / TDP: a lower bound by construction).
5. Vidur's per-op layer timings (fp16; A100 / H100 DGX, A40) against roofcast's kernel times of
   the same shapes (``phases.time_steps`` on one layer; ``tp_workers`` shard the heads and d_ff:
   the QKV and up GEMMs' N, the O and down GEMMs' K).

Also checks that the shipped calibration was fitted on these rows (data hash).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_llm_engines import fit_all, fit_rows

from roofcast.graph_import.llm.load import load_llm
from roofcast.hw_catalog import get_device
from roofcast.predictor.llm.calibration import (
    calibration_document,
    engine_calibration,
)
from roofcast.predictor.llm.calibration_fit import (
    abs_pct,
    loo,
    predict_calibrated,
    request_features,
)
from roofcast.training_data.public.llm_serving import load_serving
from roofcast.training_data.public_kernels import shared_data_dir

#: Vidur's device folders -> catalog ids (Vidur profiles DGX A100 80 GB and DGX H100 nodes and an
#: A40 server: microsoft/vidur data/profiling/compute/{a100,h100,a40}).
VIDUR_DEVICES = {"a100": "a100-80gb-sxm", "h100": "h100-sxm", "a40": "a40"}
VIDUR_MODELS = {
    "meta-llama/Llama-2-7b-hf": "llama-2-7b",
    "meta-llama/Llama-2-70b-hf": "llama-2-70b",
    "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
    "meta-llama/Meta-Llama-3-70B": "llama-3-70b",
    "codellama/CodeLlama-34b-Instruct-hf": "codellama-34b",
    "internlm/internlm-20b": "internlm-20b",
    "Qwen/Qwen-72B": "qwen-72b",
    "microsoft/phi-2": "phi-2",
}
#: Vidur op -> roofcast kernel row names of one layer (``predictor.llm.kernels``).
VIDUR_OPS = {"attn_pre_proj": ("qkv",), "attn_post_proj": ("o_proj",), "mlp_up_proj": ("up",),
             "mlp_down_proj": ("down",), "mlp_act": ("act", "act_mul"),
             "input_layernorm": ("norm1",), "post_attention_layernorm": ("norm2",),
             "attn_rope": ("rotary",), "add": ("residual1",)}


def _variant(fit: dict) -> dict:
    """``loo`` keywords of an engine's shipped choice: vendor factors, per-sequence term (a
    file without the term: not kept)."""
    return {"vendor_factors": fit["variant"] == "vendor factors",
            "per_seq": bool(fit.get("per_sequence_term", {}).get("kept", False))}


def stats(e: np.ndarray) -> str:
    e = np.asarray(e, float)
    e = e[np.isfinite(e)]
    if not len(e):
        return f"{'-':>6} {'-':>6} {'-':>6}"
    return f"{np.median(e):6.1f} {np.mean(e):6.1f} {np.quantile(e, 0.9):6.1f}"


def thr_err(pred_latency: np.ndarray, meas_latency: np.ndarray) -> np.ndarray:
    """Throughput error of a latency prediction (the same tokens): |m/p - 1|."""
    return np.abs(np.asarray(meas_latency, float) / np.asarray(pred_latency, float) - 1) * 100


def section_engines(rows: pd.DataFrame, fits: dict, hws: dict) -> None:
    print("\n## 1. LLM-Inference-Bench, single device, fp16 (errors in %: median mean p90)")
    print(
        f"{'engine':14s} {'rows':>5s} {'dev':>3s} | {'LOO latency':^20s} | "
        f"{'LOO throughput':^20s} | {'in-dist latency':^20s} | {'in-dist thr.':^20s} | in 10-90 %"
    )
    per_dev = []
    for engine, g in rows.groupby("engine"):
        req = g[g["figure"] != "ttft"]
        meas = req["latency_s"].to_numpy(float)
        lo_pred = loo(g, **_variant(fits[engine]))[req.index].to_numpy()
        t, lo, hi = predict_calibrated(engine_calibration(engine), req, hws)
        inside = np.mean((meas >= lo) & (meas <= hi)) * 100
        print(f"{engine:14s} {len(req):5d} {req['device'].nunique():3d} | "
              f"{stats(abs_pct(lo_pred, meas))} | {stats(thr_err(lo_pred, meas))} | "
              f"{stats(abs_pct(t, meas))} | {stats(thr_err(t, meas))} | {inside:5.0f} %")
        for dev, d in req.assign(e=abs_pct(lo_pred, meas), i=abs_pct(t, meas)).groupby("device"):
            per_dev.append((engine, dev, len(d), np.median(d["e"]), np.median(d["i"])))
    print("\nper engine x device (median %):  LOO  in-dist")
    for engine, dev, n, e, i in per_dev:
        print(f"  {engine:14s} {dev:16s} {n:4d} rows  {e:6.1f} {i:6.1f}")


def _subsets(req: pd.DataFrame) -> dict[str, np.ndarray]:
    """Row groups that could dominate the error: waves (KV-capacity-limited batches), short
    runs, each batch size, and the source's hardware labels where one device has several."""
    out = {"waves > 1 (KV capacity-limited)": (req["waves"] > 1).to_numpy(),
           "short runs (< 2 s)": (req["latency_s"] < 2).to_numpy()}
    for b in sorted(set(req["batch"])):
        out[f"batch {b}"] = (req["batch"] == b).to_numpy()
    for dev, g in req.groupby("device"):
        if g["hardware"].nunique() > 1:
            for label in sorted(set(g["hardware"])):
                out[f"{dev} labelled {label!r}"] = ((req["device"] == dev)
                                                    & (req["hardware"] == label)).to_numpy()
    return out


def section_attribution(rows: pd.DataFrame, hws: dict) -> None:
    print("\n## 1b. Where the in-distribution error is (shipped fit; median % of the group, "
          "of the rest; measured / predicted median of the group; nothing is excluded)")
    for engine, g in rows.groupby("engine"):
        req = g[g["figure"] != "ttft"]
        t, _, _ = predict_calibrated(engine_calibration(engine), req, hws)
        meas = req["latency_s"].to_numpy(float)
        e = abs_pct(t, meas)
        print(f"{engine}: all {len(req)} rows {np.median(e):.1f}")
        for name, m in _subsets(req).items():
            if m.any() and (~m).any():
                print(f"  {name:44s} {m.sum():4d} rows {np.median(e[m]):6.1f}  rest "
                      f"{np.median(e[~m]):5.1f}  meas/pred {np.median(meas[m] / t[m]):5.2f}")


def section_ttft(rows: pd.DataFrame, fits: dict, hws: dict) -> None:
    print("\n## 2. TTFT and end latency, 1024 in, batch 16 (Fig 22; s)")
    print(f"{'device':14s} {'engine':13s} {'model':11s} {'TTFT':>6s} {'pred':>6s} {'LOO':>6s} | "
          f"{'e2e':>6s} {'pred':>6s} {'LOO':>6s}")
    errs = {"ttft": [], "ttft_loo": [], "e2e": [], "e2e_loo": []}
    for engine, g in rows.groupby("engine"):
        tt = g[g["figure"] == "ttft"]
        if tt.empty:
            continue
        lp = loo(g, **_variant(fits[engine]))
        t, _, _ = predict_calibrated(engine_calibration(engine), g, hws)
        t = pd.Series(t, index=g.index)
        full = g[(g["figure"] == "all") & (g["input_tokens"] == 1024) & (g["batch"] == 16)]
        for i, r in tt.iterrows():
            m = full[(full["device"] == r["device"]) & (full["model"] == r["model"])]
            e2e, pe, le = (m["latency_s"].iloc[0], t[m.index[0]], lp[m.index[0]]) if len(m) \
                else (np.nan,) * 3
            print(f"{r['device']:14s} {engine:13s} {r['model']:11s} {r['ttft_s']:6.2f} "
                  f"{t[i]:6.2f} {lp[i]:6.2f} | {e2e:6.2f} {pe:6.2f} {le:6.2f}")
            errs["ttft"].append(abs_pct(t[i], r["ttft_s"]))
            errs["ttft_loo"].append(abs_pct(lp[i], r["ttft_s"]))
            errs["e2e"].append(abs_pct(pe, e2e))
            errs["e2e_loo"].append(abs_pct(le, e2e))
    for k, v in errs.items():
        print(f"  {k:9s} median mean p90: {stats(np.array(v, float))}")


def section_quant(table, rows: pd.DataFrame, hws: dict) -> None:
    print("\n## 3. Quantised weights / KV (Fig 3, Llama-3-8B; shipped fit, fitted on fp16 only;"
          " x/fp16: latency relative to the same configuration in fp16, from Fig 3 or else"
          " All_results; the KV conversion counts were chosen on the fp8-KV rows: in"
          " distribution)")
    q = table.rows[table.rows["figure"] == "quant"].reset_index(drop=True)
    f = request_features(q)
    f = f[f["max_batch"] >= 1]
    fp16 = rows[(rows["figure"] == "all") & (rows["model"] == "llama-3-8b")
                & rows["device"].isin(set(f["device"])) & rows["engine"].isin(set(f["engine"]))]
    f = pd.concat([f, fp16.assign(figure="all")], ignore_index=True)
    preds = []
    for engine, g in f.groupby("engine"):
        t, _, _ = predict_calibrated(engine_calibration(engine), g, hws)
        preds.append(pd.Series(t, index=g.index))
    f = f.assign(pred=pd.concat(preds))
    f["err"] = abs_pct(f["pred"], f["latency_s"])
    key = ["device", "engine", "input_tokens", "batch"]
    plain = (f["weights"] == "fp16") & (f["kv_cache"] == "fp16")
    base = f[plain].sort_values("figure", ascending=False).drop_duplicates(key).set_index(key)
    f = f[~plain | (f["figure"] == "quant")]
    print(
        f"{'device':14s} {'engine':13s} {'W':5s} {'KV':5s} {'rows':>4s} | "
        f"{'err % med mean p90':^20s} | meas/fp16  pred/fp16"
    )
    for (dev, eng, w, kv), g in f.groupby(["device", "engine", "weights", "kv_cache"]):
        idx = pd.MultiIndex.from_frame(g[key])
        ok = idx.isin(base.index)
        mr = (g["latency_s"].to_numpy()[ok] / base.loc[idx[ok], "latency_s"].to_numpy())
        pr = (g["pred"].to_numpy()[ok] / base.loc[idx[ok], "pred"].to_numpy())
        rel = (f"{np.median(mr):9.2f}  {np.median(pr):9.2f}" if ok.any()
               else "    (no fp16 rows)")
        print(f"{dev:14s} {eng:13s} {w:5s} {kv:5s} {len(g):4d} | {stats(g['err'])} | {rel}")
    quantised = (f["weights"] != "fp16") | (f["kv_cache"] != "fp16")
    print(f"  all quantised rows: {stats(f.loc[quantised, 'err'])}")


def section_power(table, hws: dict) -> None:
    print("\n## 4. Power (Fig 16): tokens per joule, measured = throughput / average power;"
          " roofcast = predicted throughput / TDP")
    p = table.rows[table.rows["figure"] == "power"].reset_index(drop=True)
    f = request_features(p)
    f = f[f["max_batch"] >= 1]
    print(f"{'device':14s} {'engine':13s} {'model':11s} {'batch':>5s} {'avg W':>6s} {'TDP':>5s} "
          f"{'tok/J':>6s} {'pred':>6s}")
    ratios = []
    for engine, g in f.groupby("engine"):
        t, _, _ = predict_calibrated(engine_calibration(engine), g, hws)
        for (_, r), tp in zip(g.iterrows(), t, strict=True):
            tok = r["requests"] * (r["input_tokens"] + r["output_tokens"])
            meas = tok / r["latency_s"] / r["avg_power_W"]
            tdp = hws[r["device"]].tdp_W
            pred = tok / tp / tdp
            ratios.append(pred / meas)
            print(f"{r['device']:14s} {engine:13s} {r['model']:11s} {r['batch']:5d} "
                  f"{r['avg_power_W']:6.0f} {tdp:5.0f} {meas:6.2f} {pred:6.2f}")
    ratios = np.array(ratios)
    print(f"  predicted / measured tokens per joule: median {np.median(ratios):.2f} "
          f"(range {ratios.min():.2f}-{ratios.max():.2f}); TDP exceeds the measured average "
          "power, so below 1 is expected")


def _vidur_arch(model: str, tp: int):
    a = load_llm(VIDUR_MODELS[model])
    return dataclasses.replace(a, n_heads=a.n_heads // tp, n_kv_heads=max(1, a.n_kv_heads // tp),
                               d_ff=a.d_ff // tp, name=f"{a.name}/tp{tp}")


def vidur_rows(quick: bool, estimator: str | None = None) -> pd.DataFrame:
    """Vidur's fp16 per-op layer timings beside roofcast's kernels of the same shapes (one row
    per measured op: device, op, meas_ms, pred_ms, err, ratio); ``estimator``: the kernel-time
    road (None: the serving default)."""
    from roofcast.predictor.llm.kernels import Segment
    from roofcast.predictor.llm.phases import Step, time_steps
    from roofcast.predictor.llm.precision import TensorDtypes
    from roofcast.predictor.llm.types import ServingConfig
    from roofcast.predictor.runtimes import get_runtime

    v = pd.read_csv(shared_data_dir() / "llm" / "vidur_llm_layer_ops.csv.gz")
    v = v[v["op"].isin(list(VIDUR_OPS)) & v["model"].isin(list(VIDUR_MODELS))]
    v = v[v["precision"] == "fp16"]
    tokens = sorted(v["num_tokens"].unique())
    if quick:
        keep = set(tokens[:: max(1, len(tokens) // 12)])
        v = v[v["num_tokens"].isin(keep)]
    hws = [get_device(d) for d in VIDUR_DEVICES.values()]
    dtypes = TensorDtypes.of(ServingConfig())
    prof = get_runtime("vllm")
    out = []
    for (model, tp), g in v.groupby(["model", "tp_workers"]):
        arch = _vidur_arch(model, int(tp))
        ts = sorted(g["num_tokens"].unique())
        steps = [Step(f"t{t}", (Segment(1, int(t), int(t)),)) for t in ts]
        st = time_steps(arch, hws, steps, dtypes, prof,
                        **({} if estimator is None else {"estimator": estimator}))
        tab = st.table
        per_layer = tab["kernel_s"] / tab["count"]
        tab = tab.assign(per_layer_ms=per_layer * 1e3)
        for dev_name, dev_id in VIDUR_DEVICES.items():
            gd = g[g["device"] == dev_name]
            td = tab[tab["device"] == dev_id]
            for op, names in VIDUR_OPS.items():
                go = gd[gd["op"] == op]
                for row in go.itertuples():
                    sel = td[(td["step"] == f"t{row.num_tokens}") & td["node"].isin(names)]
                    if sel.empty:
                        continue
                    out.append((dev_name, op, row.median_ms, float(sel["per_layer_ms"].sum())))
    r = pd.DataFrame(out, columns=["device", "op", "meas_ms", "pred_ms"])
    r["err"] = abs_pct(r["pred_ms"], r["meas_ms"])
    r["ratio"] = r["pred_ms"] / r["meas_ms"]
    return r


def section_vidur(quick: bool) -> None:
    print("\n## 5. Vidur per-op layer timings (fp16) vs roofcast kernels of the same shapes "
          "(vllm profile: fused attention, no eager passes)")
    r = vidur_rows(quick)
    print(f"{'device':6s} {'op':25s} {'rows':>5s} | {'err % med mean p90':^20s} | pred/meas median")
    for (dev, op), g in r.groupby(["device", "op"]):
        print(f"{dev:6s} {op:25s} {len(g):5d} | {stats(g['err'])} | {np.median(g['ratio']):6.2f}")
    gemm = r["op"].str.contains("proj")
    print(f"  all GEMM ops: {stats(r.loc[gemm, 'err'])}   other ops: {stats(r.loc[~gemm, 'err'])}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a subset of Vidur's token counts")
    ap.add_argument("--skip-vidur", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    table = load_serving()
    print(table.summary())
    doc = calibration_document()
    same = doc.get("data_hash") == table.data_hash
    print(f"shipped calibration data hash {'matches' if same else 'DIFFERS from'} these rows "
          f"({str(doc.get('data_hash'))[:12]} vs {table.data_hash[:12]})")
    rows, excluded = fit_rows(table)
    for why, n in sorted(excluded.items(), key=lambda kv: -kv[1]):
        print(f"  left out of the fit: {n:5d}  {why}")
    hws = {d: get_device(d) for d in table.rows["device"].unique()}
    fits = fit_all(rows)
    section_engines(rows, fits, hws)
    section_attribution(rows, hws)
    section_ttft(rows, fits, hws)
    section_quant(table, rows, hws)
    section_power(table, hws)
    if not args.skip_vidur:
        section_vidur(args.quick)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
