"""Model page: pick a zoo model or upload an ONNX file, bind its symbolic dims, see its work."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from roofcast.app import charts, controls, state, wording
from roofcast.graph_import import summary
from roofcast.graph_import.dims import MAX_DIM
from roofcast.training_data import zoo


def _pick_zoo() -> None:
    choice = st.session_state.get("zoo_choice")
    if choice:
        state.set_model(f"zoo:{choice}")
        st.session_state.pop("_upload_error", None)


def _take_upload() -> None:
    s = st.session_state
    up = s.get("onnx_upload")
    s.pop("_upload_error", None)
    if up is None:
        return
    try:
        state.set_upload(up.name, up.getvalue())
    except state.USER_ERRORS as exc:
        s["_upload_error"] = f"{up.name}: {wording.in_app_words(str(exc))}"
        return
    s.pop("zoo_choice", None)


def _source_picker() -> None:
    s = st.session_state
    zoo_names = zoo.list_models()
    left, right = st.columns([1, 1])
    with left:
        st.subheader("Model zoo")
        current = s["model_ref"].removeprefix("zoo:") if s["model_ref"].startswith("zoo:") else None
        if "zoo_choice" not in s:
            s["zoo_choice"] = current
        st.selectbox(
            "Bundled model", zoo_names, key="zoo_choice", on_change=_pick_zoo,
            placeholder="choose a zoo model",
            format_func=lambda n: f"{n} — {zoo.model_meta(n).get('description', '')[:60]}")
    with right:
        st.subheader("Your ONNX file")
        st.file_uploader(
            f"Upload an .onnx file (up to {state.MAX_UPLOAD_MB} MB; weightless exports welcome — "
            "weights are never read)", type=["onnx"], key="onnx_upload", on_change=_take_upload)
        if s.get("_upload_error"):
            st.error(s["_upload_error"], icon=":material/error:")


def _dims_editor(ref: str) -> None:
    s = st.session_state
    names = state.symbolic_dims(ref)
    if not names:
        st.caption("This model has no symbolic dims: every shape is fixed.")
        return
    bdim = state.batch_dim(ref)
    st.markdown("**Symbolic dims** — bind each to a size")
    cols = st.columns(min(len(names), 4))
    dims = dict(s["dims"])
    for i, name in enumerate(names):
        with cols[i % len(cols)]:
            if name == bdim:
                state.persistent(st.number_input, f"{name} (batch size)", "batch", min_value=1,
                                 max_value=state.MAX_BATCH, step=1)
                continue
            wkey = f"_w_dim_{name}"
            if wkey not in s:
                s[wkey] = dims.get(name)
            value = st.number_input(name, min_value=1, max_value=MAX_DIM, step=1, key=wkey,
                                    placeholder="unbound")
            dims[name] = None if value is None else int(value)
    s["dims"] = dims


def node_counts(tot: dict, kernels: int) -> str:
    """The graph's nodes in one sentence: how many are costed kernels (the per-op table), free
    shape/view ops (costed at zero: no kernel) and not costed (unbound dims, unsupported op
    types)."""
    free = tot["costed_nodes"] - kernels
    uncosted = tot["nodes"] - tot["costed_nodes"]
    return (f"{tot['nodes']} nodes: {kernels} costed kernels, {free} free shape or view "
            f"op(s) (no kernel), {uncosted} not costed")


def node_mix(graph) -> pd.DataFrame:
    """Every node of ``graph`` counted by op type (costed or not), most first: the op mix
    while dims are unbound and no FLOPs are known."""
    types = pd.Series([op.op_type for op in graph.ops()], dtype=str)
    return types.value_counts().rename_axis("op_type").reset_index(name="count")


def _op_mix(graph, mix: pd.DataFrame) -> None:
    """The op mix chart and table: by FLOPs, or by node count (with the dims to bind named)
    while some dims are unbound or the model does no FLOPs."""
    by_flops = not graph.unbound_dims and mix["gflop"].sum() > 0
    if graph.unbound_dims:
        st.info(f"The op mix by FLOPs needs a size for {', '.join(graph.unbound_dims)}: give "
                "each one above. Until then the chart counts every node by op type.",
                icon=":material/info:")
    shown = mix if by_flops else node_mix(graph)
    left, right = st.columns([3, 2])
    if not shown.empty:
        left.plotly_chart(charts.op_mix_bar(shown, "gflop" if by_flops else "count"),
                          width="stretch")
    with right:
        st.markdown("**By op type**")
        st.dataframe(shown, hide_index=True, width="stretch", height=340,
                     column_config={"gflop": st.column_config.NumberColumn(format="%.3f"),
                                    "mb_moved": st.column_config.NumberColumn(format="%.2f"),
                                    "flop_share": st.column_config.ProgressColumn(
                                        min_value=0.0, max_value=1.0, format="percent",
                                        width="small")})


def _summary(graph) -> None:
    tot = summary.totals(graph)
    ops = summary.op_table(graph)
    c = st.columns(5)
    c[0].metric("GFLOPs (forward)", f"{tot['gflop']:,.2f}")
    c[1].metric("Parameters", f"{tot['params'] / 1e6:,.2f} M")
    c[2].metric("Weights", f"{tot['weight_mb']:,.1f} MB")
    c[3].metric("Activations", f"{tot['activation_mb']:,.1f} MB")
    c[4].metric("Nodes", f"{tot['nodes']:,}")
    st.caption(node_counts(tot, len(ops)) + ".")
    if graph.unbound_dims:
        st.warning(f"Symbolic dims not bound: **{', '.join(graph.unbound_dims)}** — "
                   f"{len(graph.unresolved)} node(s) stay unresolved and cannot be predicted. "
                   "Give each a size above.", icon=":material/warning:")
    problems = summary.problems_table(graph)
    problems["detail"] = problems["detail"].map(wording.in_app_words)
    if not problems.empty:
        n_uns = sum(graph.unsupported.values())
        st.warning(
            f"{n_uns} node(s) of unsupported op types and {len(graph.unresolved)} "
            "unresolved node(s): they are not costed (never counted as free).",
            icon=":material/warning:",
        )
        st.dataframe(problems, hide_index=True, width="stretch", key="problems")
    _op_mix(graph, summary.by_op_type(ops))
    with st.expander(f"Per-op costs ({len(ops)} costed kernels)"):
        st.dataframe(ops, hide_index=True, width="stretch")


def render() -> None:
    controls.page_header("model", "Model",
                         "The workload: an ONNX graph with concrete shapes and per-op FLOPs and "
                         "bytes (1 multiply-add = 2 FLOPs; bytes = what unfused kernels read and "
                         "write).")
    _source_picker()
    st.divider()
    s = st.session_state
    ref = s["model_ref"]
    st.subheader(f"Current model: {state.model_label(ref)}")
    try:
        if ref.startswith("zoo:"):
            st.caption(zoo.model_meta(ref.removeprefix("zoo:")).get("description", ""))
        _dims_editor(ref)
        graph = state.current_graph()
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    _summary(graph)


if __name__ == "__main__":
    render()
