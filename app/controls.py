"""Widgets shared by several pages: the page header and the run configuration (batch, precision,
mode, ...). Built on ``app.state`` (which never imports this module)."""

from __future__ import annotations

import streamlit as st

from roofcast.app import state
from roofcast.predictor.config import MODES, OPTIMIZERS, PRECISIONS

MODE_LABELS = {"infer": "inference", "train": "training step"}


def page_header(page: str, title: str, caption: str) -> None:
    """Open a page: ``state.init_state`` for ``page``, its title and a caption in which
    ``{model}`` becomes the model's name and ``{config}`` the run configuration summary."""
    state.init_state(page)
    st.title(title)
    st.caption(caption.format(model=state.model_label(st.session_state["model_ref"]),
                              config=config_summary()))


def device_kind(device_id: str) -> str:
    table = state.catalog()
    row = table[table["id"] == device_id]
    return str(row["kind"].iloc[0]) if len(row) else "gpu"


def config_controls(device_key: str | None = "device") -> None:
    """Device (optional), batch, precision, mode, optimizer, estimator, threads, fusion, inter-op;
    every value lands in the session state shared by the pages."""
    s = st.session_state
    ref = s["model_ref"]
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        if device_key:
            state.device_select("Device", key=device_key)
        bdim = state.batch_dim(ref)
        state.persistent(st.number_input, "Batch size", "batch", min_value=1,
                         max_value=state.MAX_BATCH, step=1, disabled=bdim is None,
                         help=(f"binds the model's '{bdim}' dim" if bdim else
                               "this model has no batch dim; bind its dims on the Model page"))
    with c2:
        state.persistent(st.selectbox, "Precision", "precision", options=PRECISIONS)
        state.persistent(st.selectbox, "Mode", "mode", options=MODES,
                         format_func=lambda m: MODE_LABELS.get(m, m))
    with c3:
        state.persistent(st.selectbox, "Estimator", "estimator",
                         options=state.estimator_choices(),
                         help="analytical models (roofline family, traffic) or the learned "
                              "efficiency regressors")
        if s["mode"] == "train":
            state.persistent(st.selectbox, "Optimizer", "optimizer", options=OPTIMIZERS)
    with c4:
        state.persistent(st.toggle, "Fusion", "fusion",
                         help="fuse elementwise/activation/normalisation chains into producers")
        state.persistent(st.toggle, "Inter-op parallelism", "inter_op",
                         help="independent ops run concurrently: critical-path time")
        if device_kind(s[device_key or "device"]) == "cpu":
            state.persistent(st.number_input, "CPU threads (empty = all cores)", "threads",
                             min_value=1, max_value=1024, step=1)
        else:
            s["threads"] = None


def config_summary() -> str:
    s = st.session_state
    parts = [f"batch {s['batch']}", s["precision"], MODE_LABELS[s["mode"]], s["estimator"]]
    if s["fusion"]:
        parts.append("fusion")
    if s["inter_op"]:
        parts.append("inter-op")
    if s["threads"]:
        parts.append(f"{s['threads']} threads")
    return " · ".join(parts)
