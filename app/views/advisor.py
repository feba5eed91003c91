"""Advisor page: the predicted-best threads / inter-op / batch / precision / optimisation
settings of the session's model on a device, the reasons, and the roofline trajectories of the
model's ops as threads or batch change (``predictor.advisor``)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from roofcast.app import charts, controls, state, worker
from roofcast.app.controls import MODE_LABELS
from roofcast.app.worker import run_limited
from roofcast.predictor.advisor import OBJECTIVES, Setting, advise, public_table
from roofcast.predictor.config import PRECISIONS

MAX_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@st.cache_data(max_entries=32, show_spinner="Searching settings…")
def _advice(ref: str, dims: tuple, name: str, device: str, objective: str, batch: int,
            max_batch: int, precisions: tuple, estimator: str, learned: str,
            runtime: str | None, _data: bytes | None):
    del learned  # cache key only
    bdim = state.batch_dim(ref)
    settings = {"batch": batch, "max_batch": max_batch, "precisions": list(precisions),
                "estimator": estimator, "runtime": runtime}
    if ref.startswith("upload:"):  # the user's file: imported and searched in the worker
        return run_limited(worker.advise_upload, _data, dict(dims), name, state.MAX_UPLOAD_BYTES,
                           bdim, state.device_spec(device), objective, settings)

    def loader(b: int):
        full = dict(dims)
        if bdim is not None:
            full[bdim] = b
        return state._import_cached(ref, tuple(sorted(full.items())), name, _data)

    return advise(loader, state.device_spec(device), objective, **settings)


def _frames(advice, setting: str) -> list[tuple[int, pd.DataFrame]]:
    """Per-op frames of the recommended setting with one field varied (threads or batch)."""
    r = advice.recommended
    if setting == "threads":
        keys = [k for k in advice.cells if k[:4] == (r.batch, r.precision, r.mode, r.fusion)]
        return sorted((k[4], advice.cells[k].per_op) for k in keys if k[4] is not None)
    keys = [k for k in advice.cells if k[1:] == (r.precision, r.mode, r.fusion, r.threads)]
    return sorted((k[0], advice.cells[k].per_op) for k in keys)


def setting_fields(setting: Setting, device_kind: str) -> dict[str, str]:
    """What a user sets, field by field, in words: intra-op threads only on a CPU (elsewhere the
    framework picks and there is nothing to set); inter-op parallelism as concurrent ops (CPU
    inter-op threads) or concurrent streams (other devices)."""
    fields = {}
    if device_kind == "cpu":
        fields["intra-op threads"] = str(setting.threads)
        fields["inter-op"] = (f"parallel, {setting.inter_op_threads} concurrent ops"
                              if setting.inter_op else "sequential")
    else:
        fields["inter-op"] = "parallel (concurrent streams)" if setting.inter_op else "sequential"
    fields["batch"] = str(setting.batch)
    fields["precision"] = setting.precision
    fields["graph fusions"] = "on" if setting.fusion else "off"
    fields["mode"] = MODE_LABELS.get(setting.mode, setting.mode)
    return fields


def default_label(advice) -> str:
    """The default's name: that of the runtime the advice ran on the chosen device (the
    session's choice, else the device kind's default runtime)."""
    return f"{advice.runtime or state.runtime_for(advice.device_kind)} default"


def _recommendation(advice) -> None:
    """The predicted gain and time of the recommendation against the runtime's default, and both
    settings side by side (a table: long settings are never cut like a metric's value)."""
    rec, dft = advice.row(advice.recommended), advice.row(advice.default)
    default = default_label(advice)
    m = st.columns(3)
    m[0].metric(f"Predicted {advice.objective} gain", f"{advice.predicted_gain:.3g}×")
    if advice.objective == "latency":
        m[1].metric("Recommended: step time", f"{rec['time_ms']:.4g} ms")
        m[2].metric(f"{default}: step time", f"{dft['time_ms']:.4g} ms")
    else:
        m[1].metric("Recommended: samples/s", f"{rec['throughput_samples_per_s']:,.1f}")
        m[2].metric(f"{default}: samples/s", f"{dft['throughput_samples_per_s']:,.1f}")
    ours = setting_fields(advice.recommended, advice.device_kind)
    theirs = setting_fields(advice.default, advice.device_kind)
    st.table(pd.DataFrame({default: theirs, "recommended": ours,
                           "changed": {k: "✔" if ours[k] != theirs[k] else "" for k in ours}}))


def render() -> None:
    controls.page_header("advisor", "Configuration advisor",
                         "Model **{model}** — which run settings make it fastest, predicted "
                         "against the defaults of the runtime that runs on the chosen device")
    choice = _search_controls()
    if choice is None:
        return
    advice = _search(*choice)
    if advice is None:
        return
    controls.modelled_caption(advice.device_kind, advice.estimator)
    _recommendation(advice)
    _why(advice)
    _settings_table(advice)
    _trajectories(advice)


def _search_controls() -> tuple[str, str, int, list[str]] | None:
    """The search's widgets in four columns: (device, objective, largest batch, precisions);
    None (the error shown) when the device's runtime choice is refused."""
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        device = state.device_select("Device", key="device")
        try:
            controls.runtime_control(device)
        except state.USER_ERRORS as exc:
            state.show_error(exc)
            return None
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
    return device, objective, max_batch, precisions


def _search(device: str, objective: str, max_batch: int, precisions: list[str]):
    """The advice for the session's model (cached); None (the error shown) on a user error."""
    s = st.session_state
    ref = s["model_ref"]
    try:
        state.require_complete(state.run_config())
        data = state.upload_bytes(ref)
        dims = state.import_dims(ref)
        bdim = state.batch_dim(ref)
        dims.pop(bdim, None)
        return _advice(ref, tuple(sorted(dims.items())), state.model_label(ref), device,
                       objective, int(s["batch"]), int(max_batch), tuple(precisions or ["fp32"]),
                       s["estimator"], state.learned_version(s["estimator"]), s["runtime"],
                       data)
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return None


def _why(advice) -> None:
    """The reasons for the recommendation, then the advice's notes."""
    st.subheader("Why")
    st.markdown("\n".join(f"- {r}" for r in advice.reasons))
    for note in advice.notes:
        st.info(note, icon="ℹ️")


def _settings_table(advice) -> None:
    """Every setting searched, best first (a slider picks how many rows when there are many)."""
    st.subheader("Settings, best first")
    top = st.slider("Rows", 5, max(5, len(advice.table)), min(15, len(advice.table)),
                    key="adv_top") if len(advice.table) > 5 else None
    table = public_table(advice, top)
    if advice.device_kind != "cpu":  # no thread setting: the framework picks (Setting.label)
        table = table.drop(columns=["intra_threads", "inter_op_threads"])
    st.dataframe(table, hide_index=True)


def _trajectories(advice) -> None:
    """The roofline trajectories of the slowest kernels as threads or batch vary."""
    st.subheader("Roofline trajectories")
    options = (["threads", "batch"] if advice.device_kind == "cpu" else ["batch"])
    setting = st.radio("Vary (other settings as recommended)", options, horizontal=True,
                       key="adv_vary")
    frames = _frames(advice, setting)
    if len(frames) < 2:
        st.info(f"Only one {setting} value was searched; choose the throughput objective to "
                "see a trajectory over batch sizes.")
        return
    n = st.slider("Kernels traced", 3, 20, 8, key="adv_traj_top")
    st.plotly_chart(charts.trajectories(frames, setting, top=n), width="stretch")


if __name__ == "__main__":
    render()
