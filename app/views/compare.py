"""Compare hardware: one model and configuration on several devices side by side.

The numbers are ``predictor.compare.compare_devices`` (as ``roofcast compare``; cached through
``state.compare``): per device the predicted time with its interval (sums of the per-op lower /
upper bounds), speedup = baseline time / time, throughput = batch / time, list price and TDP
per unit of throughput, memory fit, and the time split by bound.

The speedup markers are like-by-like ratios: both devices at their lower bound
(``speedup_at_lower``) and both at their upper bound (``speedup_at_upper``); a device's interval
over the baseline's point time is not shown (why: docs/design/app.md).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from roofcast.app import charts, controls, state
from roofcast.app.commands.predict import GIB

INTERVAL_NOTE = (
    "Time whisker: the estimator's interval (analytical estimators: from the pure roofline "
    "without launch overhead to compute, memory and launch serialised; learned: its calibrated "
    "interval). The bounds are assumptions shared by every device, so the speedup markers divide "
    "like by like: both devices at their lower bound (◆) and both at their upper bound (▲). "
    "Where they sit close to the bar the speedup holds whatever the assumption; where they are "
    "far apart it depends on it (at small batches, mostly on launch overhead).")
DEFAULT_DEVICES = ("a100-80gb-sxm", "h100-sxm", "l4", "mi300x", "rtx-4090")


def compare_table(devices: list[str], baseline: str) -> pd.DataFrame:
    """One row per device (module docstring), times in ms and memory in GiB."""
    df = state.compare(devices, baseline)
    return pd.DataFrame({
        "device": df["device"],
        "runtime": df["device"].map(lambda d: state.runtime_for(controls.device_kind(d))),
        "time_ms": df["time_s"] * 1e3, "lower_ms": df["lower_s"] * 1e3,
        "upper_ms": df["upper_s"] * 1e3, "speedup": df["speedup"],
        "speedup_at_lower": df["speedup_at_lower"], "speedup_at_upper": df["speedup_at_upper"],
        "throughput_per_s": df["throughput_samples_per_s"],
        "memory_GiB": df["memory_bytes"] / GIB, "capacity_GiB": df["mem_capacity_bytes"] / GIB,
        "fits": df["fits"], "price_usd": df["price_usd"], "tdp_W": df["tdp_W"],
        "usd_per_throughput": df["usd_per_throughput"], "W_per_throughput": df["W_per_throughput"],
        **{f"{b}_ms": df[f"{b}_bound_s"] * 1e3 for b in charts.BOUND_COLORS},
        "dominant_bound": df["dominant_bound"], "road": df["road"].fillna("its own runtime's road"),
    })


def render() -> None:
    controls.page_header("compare", "Compare hardware",
                         "Model **{model}** · {config} (change the configuration on the Predict "
                         "page)", devices=True)
    s = st.session_state
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
    show = df[["device", "runtime", "time_ms", "lower_ms", "upper_ms", "speedup",
               "speedup_at_lower", "speedup_at_upper", "throughput_per_s",
               "memory_GiB", "capacity_GiB", "fits", "price_usd", "tdp_W", "usd_per_throughput",
               "W_per_throughput", "dominant_bound"]]
    st.dataframe(show, hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.4g")
                                for c in show.columns if show[c].dtype.kind == "f"})
    st.download_button("Download comparison CSV", show.to_csv(index=False).encode(),
                       file_name="roofcast_compare.csv", mime="text/csv")
    st.caption(f"Modelled: {controls.runtime_words()} ("
               + ", ".join(f"{d}: {r}" for d, r in zip(df["device"], df["runtime"], strict=True))
               + f") · estimator **{st.session_state['estimator']}**; road per device: "
               + "; ".join(f"{d}: {r}" for d, r in zip(df["device"], df["road"], strict=True)))
    st.caption(INTERVAL_NOTE)
    st.caption("Empty price or TDP: the catalog has no figure for that device (never invented).")


if __name__ == "__main__":
    render()
