"""What-if device: scale a catalog device's bandwidth, peak FLOP/s, cache, unit count and launch
overhead; see the predicted speedup, which ops gain, what dominates (a kernel costs at least
max(runtime dispatch floor, device launch overhead): docs/design/road.md), and save the device
into the user folder."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from roofcast.app import charts, controls, state
from roofcast.hw_catalog import get_device
from roofcast.hw_catalog.user_devices import save_user_device

FACTORS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 8.0)
KNOBS = (  # scale key, label, how the base value is shown
    ("mem_bw_scale", "Memory bandwidth", lambda hw: f"{hw.mem_bw_Bps / 1e9:,.0f} GB/s"),
    ("peak_scale", "Peak FLOP/s (all engines)", lambda hw: _peak_text(hw)),
    ("l2_scale", "Last-level cache", lambda hw: f"{hw.l2_bytes / 2**20:,.0f} MB"),
    ("units_scale", "Compute units (SMs / cores)", lambda hw: f"{hw.units} {hw.unit_name}"),
    ("launch_overhead_scale", "Launch overhead",
     lambda hw: f"{hw.launch_overhead_s * 1e6:.3g} µs"),
)


def _peak_text(hw) -> str:
    """The matrix peak at the session's precision (the vector one when no matrix path)."""
    precision = st.session_state.get("precision", "fp32")
    for engine in ("matrix", "vector"):
        try:
            look = hw.peak(engine, precision)
        except state.USER_ERRORS:
            continue
        return f"{look.flops_per_s / 1e12:,.1f} TFLOP/s {look.engine_used} {look.dtype_used}"
    return "no peak at this precision"


def op_gains(base: pd.DataFrame, new: pd.DataFrame, top: int = 15) -> pd.DataFrame:
    """Per kernel: time on base and what-if device, speedup, bound before and after."""
    m = base[["key", "fused_nodes", "op_type", "time_s", "bound"]].merge(
        new[["key", "time_s", "bound"]], on="key", suffixes=("_base", "_whatif"))
    m["speedup"] = m["time_s_base"] / m["time_s_whatif"]
    m["saved_us"] = (m["time_s_base"] - m["time_s_whatif"]) * 1e6
    m["time_base_us"] = m["time_s_base"] * 1e6
    m["time_whatif_us"] = m["time_s_whatif"] * 1e6
    cols = ["fused_nodes", "op_type", "speedup", "time_base_us", "time_whatif_us", "saved_us",
            "bound_base", "bound_whatif"]
    return m.sort_values("saved_us", ascending=False)[cols].head(top)


def render() -> None:
    controls.page_header("whatif", "What-if device", "Model **{model}** · {config}")
    try:
        base_id = state.device_select("Start from", key="device")
        controls.runtime_control(base_id)
        hw = get_device(base_id)
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    changes = _knobs(hw)
    try:
        base = state.predict(base_id)
        new = state.predict(base_id, changes=changes) if changes else base
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    _metrics(base_id, base, new)
    st.caption(dominance(hw, new, changes.get("launch_overhead_scale", 1.0)))
    controls.modelled_caption(hw.kind, new.road)
    if not changes:
        st.info("Move a slider to define the what-if device.")
    _gains(base, new)
    _marker(changes, new.time_s)
    st.divider()
    _save_form(base_id, hw, changes)


def _knobs(hw) -> dict[str, float]:
    """One slider per knob, the base value under it; the factors moved off 1."""
    cols = st.columns(len(KNOBS))
    changes: dict[str, float] = {}
    for col, (key, label, show) in zip(cols, KNOBS, strict=True):
        with col:
            f = st.select_slider(label, FACTORS, value=1.0, key=f"whatif_{key}",
                                 format_func=lambda x: f"{x:g}×")
            st.caption(f"base {show(hw)}")
            if f != 1.0:
                changes[key] = f
    return changes


def _metrics(base_id: str, base, new) -> None:
    """Time on both devices, the speedup, and what the what-if device is now bound by."""
    speedup = base.time_s / new.time_s
    c = st.columns(4)
    c[0].metric(f"On {base_id}", charts.fmt_time(base.time_s))
    c[1].metric("On the what-if device", charts.fmt_time(new.time_s),
                delta=f"{(new.time_s / base.time_s - 1):+.1%}", delta_color="inverse")
    c[2].metric("Speedup", f"{speedup:.3f}×")
    shares = new.per_op.groupby("bound")["time_s"].sum() / new.total_s
    c[3].metric("Now bound by", str(shares.idxmax()))
    c[3].caption(f"{shares.max():.0%} of the what-if device's time")


def dominance(hw, pred, launch_scale: float) -> str:
    """What sets the what-if device's time: the share of kernels bound by their per-kernel
    overhead, the host cost each pays (``max(runtime floor, launch overhead)``, which of the
    two sets it) and the most the bandwidth / peak knobs can then gain (Amdahl)."""
    from roofcast.predictor.runtimes import get_runtime

    per_op = pred.per_op
    total = float(per_op["time_s"].sum())
    over = per_op["bound"] == "overhead"
    share = float(per_op.loc[over, "time_s"].sum()) / total if total > 0 else 0.0
    launch_s = hw.launch_overhead_s * launch_scale
    profile = get_runtime(pred.runtime)
    cost_s = profile.dispatch_floor_s(hw.kind, launch_s)
    who = ("the device's launch overhead" if cost_s <= launch_s
           else f"{profile.name}'s host dispatch floor (launch overhead below it changes nothing)")
    text = (f"{share:.0%} of the time is in {int(over.sum())} overhead-bound kernels; a kernel "
            f"costs at least {cost_s * 1e6:.3g} µs = max({profile.name} floor, launch "
            f"{launch_s * 1e6:.3g} µs), set by {who}.")
    if share >= 0.5:
        text += (f" Bandwidth and peak scale only the other {1 - share:.0%}: at most "
                 f"{1 / share:.3g}× from them.")
    return text


def _gains(base, new) -> None:
    """The gain by op type (chart) beside the kernels that gain most (table)."""
    left, right = st.columns([1, 1])
    left.plotly_chart(charts.gain_by_op_type(base.by_op_type, new.by_op_type), width="stretch")
    with right:
        st.markdown("**Kernels that gain most**")
        st.dataframe(op_gains(base.per_op, new.per_op), hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="%.4g") for c in
                                    ("time_base_us", "time_whatif_us", "speedup", "saved_us")})


def _marker(changes: dict[str, float], time_s: float) -> None:
    """Machine-readable marker (benchmarks, scripts): the what-if changes and time shown."""
    desc = ",".join(f"{k}={v:g}" for k, v in sorted(changes.items())) or "none"
    st.markdown(f'<span id="roofcast-whatif" data-changes="{desc}" data-seconds="{time_s!r}"'
                ' style="display:none"></span>', unsafe_allow_html=True)


def _save_form(base_id: str, hw, changes: dict[str, float]) -> None:
    """The form that saves the what-if device into the user folder."""
    st.subheader("Save as a user device")
    st.caption("Written as a derived device file (base + scale factors) into the user folder; "
               "it then appears in every device list and in `roofcast hw list`.")
    with st.form("save_device"):
        c1, c2 = st.columns(2)
        new_id = c1.text_input("Device id (lowercase, digits, dashes)",
                               value=f"{base_id}-whatif", key="whatif_id")
        name = c2.text_input("Name", value=f"{hw.name} (what-if)", key="whatif_name")
        overwrite = st.checkbox("Overwrite my device of the same id", key="whatif_overwrite")
        submitted = st.form_submit_button("Save device", disabled=not changes)
    if submitted:
        try:
            path = save_user_device(base_id, changes, new_id, name=name, overwrite=overwrite)
        except state.USER_ERRORS as exc:
            state.show_error(exc)
        else:
            st.success(f"Saved {new_id} to {path}")


if __name__ == "__main__":
    render()
