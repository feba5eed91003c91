"""Predict page: one device and configuration -> totals with intervals, per-op table, breakdowns,
memory fit."""

from __future__ import annotations

import streamlit as st

from roofcast.app import charts, controls, state
from roofcast.app.commands.predict import GIB, memory_table, op_table
from roofcast.hw_catalog import get_device


def _totals(pred, hw) -> None:
    per_op = pred.per_op
    lower, upper = float(per_op["lower_s"].sum()), float(per_op["upper_s"].sum())
    batch = pred.config.batch or 1
    c = st.columns(4)
    label = "Predicted step time" if pred.config.mode == "train" else "Predicted time"
    c[0].metric(label, charts.fmt_time(pred.time_s))
    if pred.critical_path_s is None:
        c[0].caption(f"interval {charts.fmt_time(lower)} – {charts.fmt_time(upper)}")
    else:
        c[0].caption(f"critical path; sequential sum {charts.fmt_time(pred.total_s)} "
                     f"(interval {charts.fmt_time(lower)} – {charts.fmt_time(upper)})")
    c[1].metric("Throughput (samples/s)", f"{batch / pred.time_s:,.1f}")
    mem = pred.memory
    fits = mem.fits
    c[2].metric(
        "Memory footprint",
        f"{mem.total_bytes / GIB:,.2f} GiB",
        delta=("fits" if fits else "does not fit") + f" in {hw.mem_capacity_bytes / GIB:.0f} GiB",
        delta_color="normal" if fits else "inverse",
    )
    c[3].metric("Kernels", f"{len(per_op)}")
    controls.modelled_caption(hw.kind, pred.road)
    # machine-readable figure for tests and scripts (seconds, full precision)
    st.markdown(f'<span id="roofcast-time-s" data-seconds="{pred.time_s!r}" '
                f'style="display:none">{pred.time_s!r}</span>', unsafe_allow_html=True)
    learned = learned_summary(pred, hw)
    if learned is not None:
        ood = (f" · out of distribution: {learned['ood_reason']}" if learned["ood"] else "")
        st.info(f"Learned end to end: **{charts.fmt_time(learned['e2e_s'])}** (interval "
                f"{charts.fmt_time(learned['e2e_lower_s'])} – "
                f"{charts.fmt_time(learned['e2e_upper_s'])}, {learned['interval_method']}); "
                f"{learned['ops_learned']} kernels timed by learned models, "
                f"{learned['ops_analytical']} by the analytical fallback{ood}",
                icon=":material/model_training:")
    for note in pred.notes:
        st.info(note, icon=":material/info:")


def learned_summary(pred, hw) -> dict | None:
    """``LearnedModel.summarize`` for a learned/auto prediction (model loaded once per folder
    and version with ``st.cache_resource``); None for analytical estimators."""
    from roofcast.predictor.estimators import ESTIMATORS

    if pred.estimator in ESTIMATORS or "predictor" not in pred.per_op:
        return None
    if pred.summary:  # the estimator's own summary (a user layer on the base included)
        return dict(pred.summary)
    from roofcast.predictor.learned.estimator import model_folder

    model = state.learned_model(str(model_folder()), state.learned_version(pred.estimator))
    return model.summarize(pred.per_op, hw.kind)


def render() -> None:
    controls.page_header("predict", "Predict", "Model **{model}** — change it on the Model page.")
    s = st.session_state
    try:
        controls.config_controls()
        hw = get_device(s["device"])
        pred = state.predict()
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    _totals(pred, hw)
    tab_ops, tab_break, tab_table, tab_mem = st.tabs(
        ["Slowest kernels", "Breakdowns", "Per-op table", "Memory"])
    with tab_ops:
        st.plotly_chart(charts.top_ops_bar(pred.per_op), width="stretch")
        shown = charts.slowest_first(pred.per_op).head(charts.TOP_KERNELS)
        floor = shown[(shown["bound"] == "overhead") & shown["time_s"].duplicated(keep=False)]
        if len(floor):
            st.caption(f"{len(floor)} of the {len(shown)} kernels shown are overhead-bound at "
                       f"the same time ({charts.fmt_time(float(floor['time_s'].iloc[0]))}, the "
                       "launch-overhead floor) whatever their work; equal times are ordered by "
                       "the kernel's own compute or memory time, the first to grow with the "
                       "batch.")
    with tab_break:
        st.plotly_chart(charts.breakdown_bar(pred.by_op_type, "op_type", "Time by op type"),
                        width="stretch")
        left, right = st.columns(2)
        left.plotly_chart(charts.breakdown_bar(pred.by_phase, "phase", "Time by phase",
                                               colors=charts.PHASE_COLORS),
                          width="stretch")
        right.plotly_chart(charts.breakdown_bar(pred.by_bound, "bound", "Time by bound",
                                                colors=charts.BOUND_COLORS),
                           width="stretch")
    with tab_table:
        table = charts.slowest_first(op_table(pred, None), "time_us", "compute_us",
                                     "memory_us")
        st.dataframe(table, hide_index=True, width="stretch", height=460,
                     column_config={"share": st.column_config.ProgressColumn(
                         min_value=0.0, max_value=float(table["share"].max() or 1.0),
                         format="%.3f")})
        name = f"{pred.graph_name}_{pred.device}_b{pred.config.batch}_{pred.estimator}.csv"
        st.download_button("Download per-op CSV", table.to_csv(index=False).encode(),
                           file_name=name.replace(":", "_"), mime="text/csv")
    with tab_mem:
        mt = memory_table(pred, hw)
        st.dataframe(mt, hide_index=True, width="stretch",
                     column_config={"GiB": st.column_config.NumberColumn(format="%.3f")})
        if not pred.memory.fits:
            st.error(f"The run needs {pred.memory.total_bytes / GIB:.2f} GiB but {hw.id} has "
                     f"{hw.mem_capacity_bytes / GIB:.0f} GiB: lower the batch or precision.")


if __name__ == "__main__":
    render()
