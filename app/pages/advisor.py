"""Advisor page: the predicted-best threads / inter-op / batch / precision / optimisation
settings of the session's model on a device, the reasons, and the roofline trajectories of the
model's ops as threads or batch change (``predictor.advisor``)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from roofcast.app import charts, state
from roofcast.predictor.advisor import OBJECTIVES, advise, public_table

MAX_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")


@st.cache_data(max_entries=32, show_spinner="Searching settings…")
def _advice(ref: str, dims: tuple, name: str, device: str, objective: str, batch: int,
            max_batch: int, precisions: tuple, estimator: str, learned: str,
            _data: bytes | None):
    del learned  # cache key only
    bdim = state.batch_dim(ref)

    def loader(b: int):
        full = dict(dims)
        if bdim is not None:
            full[bdim] = b
        return state._import_cached(ref, tuple(sorted(full.items())), name, _data)

    return advise(loader, state.device_spec(device), objective, batch=batch,
                  max_batch=max_batch, precisions=list(precisions), estimator=estimator)


def _frames(advice, setting: str) -> list[tuple[int, pd.DataFrame]]:
    """Per-op frames of the recommended setting with one field varied (threads or batch)."""
    r = advice.recommended
    if setting == "threads":
        keys = [k for k in advice.cells if k[:4] == (r.batch, r.precision, r.mode, r.fusion)]
        return sorted((k[4], advice.cells[k].per_op) for k in keys if k[4] is not None)
    keys = [k for k in advice.cells if k[1:] == (r.precision, r.mode, r.fusion, r.threads)]
    return sorted((k[0], advice.cells[k].per_op) for k in keys)


def render() -> None:
    state.page_header("advisor", "Configuration advisor", "Model **{model}** — which run settings "
                      "make it fastest, predicted against ONNX Runtime's defaults")
    s = st.session_state
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        device = state.device_select("Device", key="device")
    with c2:
        objective = st.radio("Objective", OBJECTIVES, horizontal=True, key="adv_objective",
                             help="latency: your batch; throughput: samples/s, batch searched")
    with c3:
        max_batch = st.selectbox("Largest batch tried", MAX_BATCHES, index=6, key="adv_max_b",
                                 disabled=objective == "latency")
    with c4:
        precisions = st.multiselect("Precisions", PRECISIONS, default=["fp32", "fp16", "bf16"],
                                    key="adv_precisions",
                                    help="only those the device runs natively are kept")
    ref = s["model_ref"]
    try:
        data = state.upload_bytes(ref)
        dims = state.import_dims(ref)
        bdim = state.batch_dim(ref)
        dims.pop(bdim, None)
        advice = _advice(ref, tuple(sorted(dims.items())), state.model_label(ref), device,
                         objective, int(s["batch"]), int(max_batch), tuple(precisions or ["fp32"]),
                         s["estimator"], state.learned_version(s["estimator"]), data)
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    m = st.columns(3)
    m[0].metric("Recommended", advice.recommended.label())
    m[1].metric(f"Predicted {objective} gain", f"{advice.predicted_gain:.3g}×")
    m[2].metric("ONNX Runtime default", advice.default.label())
    st.subheader("Why")
    st.markdown("\n".join(f"- {r}" for r in advice.reasons))
    for note in advice.notes:
        st.info(note, icon="ℹ️")
    st.subheader("Settings, best first")
    top = st.slider("Rows", 5, max(5, len(advice.table)), min(15, len(advice.table)),
                    key="adv_top") if len(advice.table) > 5 else None
    st.dataframe(public_table(advice, top), hide_index=True)
    st.subheader("Roofline trajectories")
    options = (["threads", "batch"] if advice.device_kind == "cpu" else ["batch"])
    setting = st.radio("Vary (other settings as recommended)", options, horizontal=True,
                       key="adv_vary")
    frames = _frames(advice, setting)
    if len(frames) < 2:
        st.info(f"Only one {setting} value was searched; use the throughput objective (batch) "
                "or a CPU device (threads) to see a trajectory.")
        return
    n = st.slider("Kernels traced", 3, 20, 8, key="adv_traj_top")
    st.plotly_chart(charts.trajectories(frames, setting, top=n), width="stretch")


if __name__ == "__main__":
    render()
