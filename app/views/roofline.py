"""Roofline page: every op on the device's roofline, the time-based roofline with the
launch-overhead floor, and roofline trajectories as batch size or CPU threads change."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from roofcast.app import charts, controls, state

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
THREADS = (1, 2, 4, 8, 16, 32, 64)


def _trajectory(setting: str, values: list[int]) -> list[tuple[int, pd.DataFrame]]:
    frames = []
    for v in values:
        pred = state.predict(**{setting: v})
        frames.append((v, pred.per_op))
    return frames


def render() -> None:
    controls.page_header("roofline", "Roofline",
                         "Model **{model}** · {config} (change the configuration on the Predict "
                         "page)")
    s = st.session_state
    try:
        state.device_select("Device", key="device")
        controls.runtime_control(s["device"])
        pred = state.predict()
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    controls.modelled_caption(controls.device_kind(s["device"]), pred.road)
    per_op = pred.per_op
    no_flops = int(((per_op["flops"] <= 0) & (per_op["time_s"] > 0)).sum())
    tab_roof, tab_time, tab_traj = st.tabs(["Roofline", "Time-based roofline", "Trajectories"])
    with tab_roof:
        st.plotly_chart(charts.roofline(per_op, f"{pred.device}: ops on the roofline "
                                                f"(size = predicted time)"), width="stretch")
        if no_flops:
            st.caption(f"{no_flops} data-movement kernel(s) without FLOPs are not on this chart "
                       "(zero intensity); see the time-based view.")
    with tab_time:
        st.plotly_chart(charts.time_roofline(per_op, f"{pred.device}: time-based roofline"),
                        width="stretch")
        st.caption("Each kernel pays at least the launch overhead; kernels on the floor are "
                   "overhead-bound, whatever their FLOPs or bytes.")
    with tab_traj:
        kind = controls.device_kind(s["device"])
        options = ["batch size"] + (["CPU threads"] if kind == "cpu" else [])
        setting = st.radio("Vary", options, horizontal=True, key="traj_setting")
        if setting == "batch size":
            values = st.multiselect("Batch sizes", BATCHES, default=[1, 4, 16, 64],
                                    key="traj_batches")
            key = "batch"
        else:
            values = st.multiselect("Thread counts", THREADS, default=[1, 2, 4, 8],
                                    key="traj_threads")
            key = "threads"
        top = st.slider("Kernels traced", 3, 20, 8, key="traj_top")
        if len(values) < 2:
            st.info("Pick at least two values to draw trajectories.")
            return
        try:
            frames = _trajectory(key, sorted(values))
        except state.USER_ERRORS as exc:
            state.show_error(exc)
            return
        st.plotly_chart(charts.trajectories(frames, setting, top=top), width="stretch")
        totals = pd.DataFrame({setting: [v for v, _ in frames],
                               "time_ms": [df["time_s"].sum() * 1e3 for _, df in frames]})
        st.dataframe(totals, hide_index=True)


if __name__ == "__main__":
    render()
