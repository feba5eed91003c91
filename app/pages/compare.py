"""Compare hardware: one model and configuration on several devices side by side.

Per device (``predict_graph`` each, cached): predicted time with its interval (sums of the per-op
lower / upper bounds), speedup over a baseline = baseline time / device time with the interval
baseline time / device upper .. baseline time / device lower (the baseline's own uncertainty is
not added: the estimators' errors are largely shared across devices), throughput = batch / time,
list price and TDP per unit of throughput, memory fit, and the time split by bound.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from app import charts, controls, state
from app.commands.predict import GIB
from hw_catalog import get_device

DEFAULT_DEVICES = ("a100-80gb-sxm", "h100-sxm", "l4", "mi300x", "rtx-4090")


def compare_table(devices: list[str], baseline: str) -> pd.DataFrame:
    """One row per device (module docstring)."""
    rows = []
    for dev in devices:
        pred = state.predict(dev)
        hw = get_device(dev)
        per_op = pred.per_op
        by_bound = per_op.groupby("bound")["time_s"].sum()
        batch = pred.config.batch or 1
        rows.append({
            "device": dev, "time_ms": pred.time_s * 1e3,
            "lower_ms": float(per_op["lower_s"].sum()) * 1e3,
            "upper_ms": float(per_op["upper_s"].sum()) * 1e3,
            "throughput_per_s": batch / pred.time_s,
            "memory_GiB": pred.memory.total_bytes / GIB,
            "capacity_GiB": hw.mem_capacity_bytes / GIB, "fits": pred.memory.fits(hw),
            "price_usd": hw.price_usd, "tdp_W": hw.tdp_W,
            **{f"{b}_ms": float(by_bound.get(b, 0.0)) * 1e3 for b in charts.BOUND_COLORS},
            "dominant_bound": str(by_bound.idxmax()),
        })
    df = pd.DataFrame(rows)
    base = df.loc[df["device"] == baseline, "time_ms"].iloc[0]
    df["speedup"] = base / df["time_ms"]
    df["speedup_lo"] = base / df["upper_ms"]
    df["speedup_hi"] = base / df["lower_ms"]
    df["usd_per_throughput"] = [p / t if p and not math.isnan(p) else math.nan
                                for p, t in zip(df["price_usd"].astype(float),
                                                df["throughput_per_s"], strict=True)]
    df["W_per_throughput"] = [w / t if w and not math.isnan(w) else math.nan
                              for w, t in zip(df["tdp_W"].astype(float),
                                              df["throughput_per_s"], strict=True)]
    return df


def render() -> None:
    state.init_state("compare")
    s = st.session_state
    st.title("Compare hardware")
    st.caption(f"Model **{state.model_label(s['model_ref'])}** · {controls.config_summary()} "
               "(change the configuration on the Predict page)")
    ids = state.catalog()["id"].tolist()
    if "compare_devices" not in s:
        s["compare_devices"] = [d for d in DEFAULT_DEVICES if d in ids]
    c1, c2 = st.columns([3, 1])
    labels = state.device_labels()
    devices = c1.multiselect("Devices", ids, key="compare_devices", format_func=labels.__getitem__)
    if not devices:
        st.info("Pick at least one device.")
        return
    baseline = c2.selectbox("Baseline", devices, key="compare_baseline")
    try:
        df = compare_table(devices, baseline)
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    left, right = st.columns(2)
    left.plotly_chart(charts.device_time_bars(df), width="stretch")
    right.plotly_chart(charts.speedup_bars(df, baseline), width="stretch")
    left, right = st.columns(2)
    left.plotly_chart(charts.metric_bars(df, "throughput_per_s", "Throughput", "samples / s",
                                         "#54A24B"), width="stretch")
    right.plotly_chart(charts.bound_mix(df), width="stretch")
    left, right = st.columns(2)
    left.plotly_chart(charts.metric_bars(df, "usd_per_throughput", "List price per throughput",
                                         "USD per (sample/s)", "#9D755D"), width="stretch")
    right.plotly_chart(charts.metric_bars(df, "W_per_throughput", "TDP per throughput",
                                          "W per (sample/s)", "#72B7B2"), width="stretch")
    no_fit = df.loc[~df["fits"], "device"].tolist()
    if no_fit:
        st.warning(f"Does not fit in device memory: {', '.join(no_fit)}", icon=":material/warning:")
    show = df[["device", "time_ms", "lower_ms", "upper_ms", "speedup", "throughput_per_s",
               "memory_GiB", "capacity_GiB", "fits", "price_usd", "tdp_W", "usd_per_throughput",
               "W_per_throughput", "dominant_bound"]]
    st.dataframe(show, hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.4g")
                                for c in show.columns if show[c].dtype.kind == "f"})
    st.download_button("Download comparison CSV", show.to_csv(index=False).encode(),
                       file_name="roofcast_compare.csv", mime="text/csv")
    st.caption("Empty price or TDP: the catalog has no figure for that device (never invented). "
               "Speedup error bars use the device's interval with the baseline's point time.")


if __name__ == "__main__":
    render()
