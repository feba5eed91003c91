"""Plotly figures of the app, built from the library's tables (no physics here).

Units on axes: time in ms or µs as labelled, FLOP/s as GFLOP/s, intensity in FLOP/byte.
The roofline (Williams et al. 2009): attainable FLOP/s = min(peak, bandwidth × intensity); each
op is a point at (its intensity, its FLOPs / predicted time). The time-based roofline
(Wang et al. 2020) plots each kernel's time against its FLOPs and its bytes, with the diagonals
t = FLOPs / peak and t = bytes / bandwidth and the per-kernel launch-overhead floor.
Roofline trajectories (Javed et al. 2019): the same op's point as a setting changes, joined.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

BOUND_COLORS = {"compute": "#4C78A8", "memory": "#F58518", "overhead": "#B279A2"}
PHASE_COLORS = {"forward": "#4C78A8", "backward": "#E45756", "update": "#54A24B"}
TEMPLATE = "plotly_white"
TOP_KERNELS = 20  # kernels in the Predict page's "Slowest kernels" chart
FONT = {"family": "Inter, Segoe UI, Helvetica, Arial, sans-serif", "size": 13}


def fmt_time(seconds: float) -> str:
    """A time with its unit, 4 significant digits: ``1.465 ms``, ``532.1 µs``, ``2.310 s``."""
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


#: pixels of the toolbar (Plotly's mode bar) over the top of every chart: the title goes below it.
TOOLBAR_PX = 32
#: pixels of one row of a horizontal legend, and the width assumed to lay its items out (half
#: of the app's wide layout: a chart in one of two columns).
LEGEND_ROW_PX = 26
LEGEND_WIDTH_PX = 520
#: pixels under the plot for the x tick labels and the axis title, above the legend.
X_AXIS_PX = 62


def _legend_rows(fig: go.Figure) -> int:
    """Rows the figure's horizontal legend takes (0 when it shows none): its items laid out
    in ``LEGEND_WIDTH_PX`` (a symbol of ~40 px and ~7 px a character each)."""
    names = [t.name or "" for t in fig.data if t.showlegend is not False]
    if fig.layout.showlegend is False or (len(names) < 2 and fig.layout.showlegend is None):
        return 0
    return max(1, math.ceil(sum(40 + 7 * len(n) for n in names) / LEGEND_WIDTH_PX))


def _layout(fig: go.Figure, title: str, height: int = 420, legend: str = "below") -> go.Figure:
    """The app's look: the title in a row of its own under the toolbar (never under its
    buttons); the legend (``legend="below"``) in a band of its own at the bottom, below the x
    axis title (never over it), or (``"right"``) a column right of the plot. ``height``: of
    the plot with its axes; the title row and the legend band are added."""
    legend_px = LEGEND_ROW_PX * _legend_rows(fig) if legend == "below" else 0
    fig.update_layout(template=TEMPLATE, height=height + TOOLBAR_PX + legend_px, font=FONT,
                      title={"text": title, "x": 0.0, "xanchor": "left", "xref": "container",
                             "y": 1.0, "yanchor": "top", "yref": "container",
                             "pad": {"t": TOOLBAR_PX, "l": 10}, "font": {"size": 16}},
                      margin={"l": 10, "r": 10, "t": TOOLBAR_PX + 48,
                              "b": (X_AXIS_PX + legend_px) if legend_px else 10},
                      legend={"orientation": "h", "yref": "container", "yanchor": "bottom",
                              "y": 0.0, "x": 0.0, "xanchor": "left"} if legend == "below" else
                      {"orientation": "v", "yref": "paper", "yanchor": "top", "y": 1.0,
                       "x": 1.02, "xanchor": "left", "font": {"size": 11}})
    return fig


def op_mix_bar(mix: pd.DataFrame, by: str = "gflop", top: int = 12) -> go.Figure:
    """The ``top`` op types of ``graph_import.summary.by_op_type`` as horizontal bars, largest on
    top: by FLOPs (``by="gflop"``, each bar labelled with its count and share) or by node count
    (``by="count"``: while dims are unbound or the model does no FLOPs)."""
    df = mix.sort_values(by, ascending=False, kind="stable").head(top).iloc[::-1]
    if by == "gflop":
        text = [f"{n} × · {s:.0%}" for n, s in zip(df["count"], df["flop_share"], strict=True)]
        axis, title = "GFLOPs", "Op mix by FLOPs"
    else:
        text = [f"{n} ×" for n in df["count"]]
        axis, title = "nodes", "Op mix by node count"
    fig = go.Figure(go.Bar(x=df[by], y=df["op_type"], orientation="h", marker_color="#4C78A8",
                           text=text, textposition="auto"))
    fig.update_xaxes(title=axis, rangemode="tozero")
    return _layout(fig, title, height=380)


# ----------------------------------------------------------------------------- breakdowns
def breakdown_bar(table: pd.DataFrame, by: str, title: str, top: int = 15,
                  colors: dict[str, str] | None = None) -> go.Figure:
    """Horizontal bars of time per value of ``by`` (a ``Prediction.by_*`` table), largest on top."""
    df = table.head(top).iloc[::-1]
    ms = df["time_s"] * 1e3
    fig = go.Figure(go.Bar(
        x=ms, y=df[by].astype(str), orientation="h",
        marker_color=[(colors or {}).get(str(v), "#4C78A8") for v in df[by]],
        text=[f"{t:.3g} ms · {s:.0%}" for t, s in zip(ms, df["share"], strict=True)],
        textposition="auto",
        hovertemplate="%{y}: %{x:.4g} ms<extra></extra>"))
    fig.update_xaxes(title="predicted time (ms)")
    return _layout(fig, title, height=max(260, 32 * len(df) + 90))


def kernel_labels(per_op: pd.DataFrame) -> pd.Series:
    """One distinct axis label per kernel: ``node · F`` (forward), ``node · B grad_input0``,
    ``node · U adam``; the row's unique ``key`` where two labels would still collide (a bar
    chart merges equal category labels into one bar)."""
    phase = per_op["phase"].astype(str).str[0].str.upper()
    kernel = per_op["kernel"].astype(str)
    tag = phase.where(kernel == per_op["phase"].astype(str), phase + " " + kernel)
    labels = per_op["fused_nodes"].astype(str) + " · " + tag
    return labels.where(~labels.duplicated(keep=False), per_op["key"].astype(str))


def slowest_first(per_op: pd.DataFrame, time: str = "time_s", compute: str = "compute_s",
                  memory: str = "memory_s") -> pd.DataFrame:
    """Kernels by predicted time, slowest first; ties by the kernel's own work time
    ``max(compute_s, memory_s)`` (without launch overhead), larger first, then graph order.

    Ties are the rule, not the exception: at a small batch on a GPU most kernels sit on the
    launch-overhead floor (ResNet-50, batch 1, H100: all 121 at 5 µs), and a sort by time alone
    lists them in graph order. The work time says which of them grow first with the batch.
    ``time``, ``compute``, ``memory``: the column names (any one unit).
    """
    own = np.maximum(per_op[compute].to_numpy(float), per_op[memory].to_numpy(float))
    order = np.lexsort((-own, -per_op[time].to_numpy(float)))  # last key sorts first
    return per_op.iloc[order]


def top_ops_bar(per_op: pd.DataFrame, top: int = TOP_KERNELS) -> go.Figure:
    """The ``top`` slowest kernels (``slowest_first``), slowest on top, with their
    [lower, upper] interval as error bars, coloured by bound."""
    df = slowest_first(per_op).head(top)
    us = df["time_s"] * 1e6
    labels = kernel_labels(df)
    fig = go.Figure(go.Bar(
        x=us, y=labels, orientation="h",
        marker_color=[BOUND_COLORS.get(b, "#999") for b in df["bound"]],
        error_x={"type": "data", "symmetric": False, "array": (df["upper_s"] - df["time_s"]) * 1e6,
                 "arrayminus": (df["time_s"] - df["lower_s"]) * 1e6, "color": "#555"},
        customdata=np.stack([df["op_type"], df["bound"]], axis=1),
        hovertemplate="%{y}<br>%{customdata[0]}, %{customdata[1]}-bound<br>%{x:.4g} µs"
                      "<extra></extra>"))
    # the listed order, first on top (a category axis otherwise runs bottom-up)
    fig.update_yaxes(categoryorder="array", categoryarray=list(labels), autorange="reversed")
    fig.update_xaxes(title="predicted time (µs), error bar = interval; equal times: larger "
                           "compute or memory time first")
    return _layout(fig, f"Slowest {len(df)} kernels", height=max(300, 24 * len(df) + 90))


# ----------------------------------------------------------------------------- rooflines
def _workful(per_op: pd.DataFrame) -> pd.DataFrame:
    return per_op[(per_op["flops"] > 0) & (per_op["time_s"] > 0)]


def _size(time_s: pd.Series) -> np.ndarray:
    t = time_s.to_numpy(float)
    return 6 + 34 * np.sqrt(t / t.max()) if len(t) and t.max() > 0 else np.full(len(t), 8.0)


def _ceilings(per_op: pd.DataFrame) -> list[tuple[str, float]]:
    peaks = (per_op[per_op["flops"] > 0]
             .groupby(["peak_engine", "peak_dtype"])["peak_flops_per_s"].max())
    return sorted(((f"{e} {d}", float(v)) for (e, d), v in peaks.items() if math.isfinite(v)),
                  key=lambda p: -p[1])


def roofline(per_op: pd.DataFrame, title: str) -> go.Figure:
    """Attainable GFLOP/s vs intensity with every op as a point (sized by time, coloured by
    bound); roofs from the rows' own peak and bandwidth columns (thread-scaled as predicted)."""
    df = _workful(per_op)
    fig = go.Figure()
    bw = float(per_op["mem_bw_Bps"].iloc[0])
    ceilings = _ceilings(per_op)
    lo = max(min(df["intensity_flop_per_byte"].min(), 0.1) / 2, 1e-3) if len(df) else 0.01
    hi = max(df["intensity_flop_per_byte"].max() * 2, 1e3) if len(df) else 1e3
    xs = np.logspace(math.log10(lo), math.log10(hi), 200)
    for i, (name, peak) in enumerate(ceilings):
        fig.add_trace(go.Scatter(x=xs, y=np.minimum(peak, bw * xs) / 1e9, mode="lines",
                                 name=f"roof: {name} {peak / 1e12:.3g} TFLOP/s",
                                 line={"color": "#333" if i == 0 else "#888",
                                       "dash": "solid" if i == 0 else "dot", "width": 2}))
    for bound, part in df.groupby("bound"):
        fig.add_trace(go.Scatter(
            x=part["intensity_flop_per_byte"], y=part["flops"] / part["time_s"] / 1e9,
            mode="markers", name=f"{bound}-bound ops",
            marker={"size": _size(part["time_s"]) if len(df) == len(part) else
                    6 + 34 * np.sqrt(part["time_s"] / df["time_s"].max()),
                    "color": BOUND_COLORS.get(str(bound), "#999"), "opacity": 0.75,
                    "line": {"width": 0.5, "color": "white"}},
            customdata=np.stack([part["fused_nodes"], part["op_type"], part["time_s"] * 1e6],
                                axis=1),
            hovertemplate="%{customdata[0]} (%{customdata[1]})<br>%{x:.3g} FLOP/B, "
                          "%{y:.4g} GFLOP/s<br>%{customdata[2]:.4g} µs<extra></extra>"))
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP / byte)")
    fig.update_yaxes(type="log", title="attained GFLOP/s (FLOPs / predicted time)")
    return _layout(fig, title, height=500)


def time_roofline(per_op: pd.DataFrame, title: str) -> go.Figure:
    """Kernel time vs FLOPs and vs bytes with the diagonals t = FLOPs/peak and t = bytes/BW and
    the launch-overhead floor (horizontal line)."""
    df = per_op[per_op["time_s"] > 0].assign(bytes=per_op["bytes_read"] + per_op["bytes_written"])
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("time vs FLOPs", "time vs bytes moved"))
    floor_us = float(per_op["launch_overhead_s"].iloc[0]) * 1e6
    bw = float(per_op["mem_bw_Bps"].iloc[0])
    for col, xcol, unit in ((1, "flops", "FLOPs"), (2, "bytes", "bytes")):
        pos = df[df[xcol] > 0]
        if pos.empty:
            continue
        xs = np.logspace(math.log10(pos[xcol].min() / 2), math.log10(pos[xcol].max() * 2), 100)
        if xcol == "flops":
            for i, (name, peak) in enumerate(_ceilings(per_op)[:2]):
                fig.add_trace(go.Scatter(x=xs, y=xs / peak * 1e6, mode="lines",
                                         name=f"t = FLOPs / {name} peak",
                                         line={"color": "#333" if i == 0 else "#888",
                                               "dash": "solid" if i == 0 else "dot"}),
                              row=1, col=col)
        else:
            fig.add_trace(go.Scatter(x=xs, y=xs / bw * 1e6, mode="lines",
                                     name=f"t = bytes / {bw / 1e9:.4g} GB/s",
                                     line={"color": "#F58518"}), row=1, col=col)
        fig.add_trace(go.Scatter(x=[xs[0], xs[-1]], y=[floor_us, floor_us], mode="lines",
                                 name=f"launch-overhead floor {floor_us:.3g} µs",
                                 line={"color": "#B279A2", "dash": "dash"},
                                 showlegend=col == 1), row=1, col=col)
        for bound, part in pos.groupby("bound"):
            fig.add_trace(go.Scatter(
                x=part[xcol], y=part["time_s"] * 1e6, mode="markers", name=f"{bound}-bound",
                showlegend=col == 1, legendgroup=str(bound),
                marker={"size": 8, "color": BOUND_COLORS.get(str(bound), "#999"),
                        "opacity": 0.75},
                customdata=np.stack([part["fused_nodes"], part["op_type"]], axis=1),
                hovertemplate="%{customdata[0]} (%{customdata[1]})<br>%{x:.3g} " + unit
                              + "<br>%{y:.4g} µs<extra></extra>"), row=1, col=col)
        fig.update_xaxes(type="log", title=unit, row=1, col=col)
    fig.update_yaxes(type="log")
    fig.update_yaxes(title="predicted kernel time (µs)", row=1, col=1)
    return _layout(fig, title, height=520)


def trajectories(frames: Sequence[tuple[int, pd.DataFrame]], setting: str,
                 top: int = 12) -> go.Figure:
    """Roofline trajectories: ``top`` kernels (the slowest of each op type first, then the slowest
    others, at the last setting) as lines through their (intensity, GFLOP/s) points for each
    value of ``setting``; roofs of the last setting."""
    ranked = _workful(frames[-1][1]).sort_values("time_s", ascending=False)
    per_type = ranked.drop_duplicates("op_type")["key"].tolist()  # every op type shows
    keys = (per_type + [k for k in ranked["key"] if k not in set(per_type)])[:top]
    fig = go.Figure()
    bw = float(frames[-1][1]["mem_bw_Bps"].iloc[0])
    pts = pd.concat([_workful(df).assign(_v=v) for v, df in frames], ignore_index=True)
    pts = pts[pts["key"].isin(keys)]
    if pts.empty:
        return _layout(fig, "No kernel with FLOPs to trace", height=300)
    xs = np.logspace(math.log10(pts["intensity_flop_per_byte"].min() / 3),
                     math.log10(max(pts["intensity_flop_per_byte"].max() * 3, 1e3)), 200)
    for i, (name, peak) in enumerate(_ceilings(frames[-1][1])[:2]):
        fig.add_trace(go.Scatter(x=xs, y=np.minimum(peak, bw * xs) / 1e9, mode="lines",
                                 name=f"roof: {name}", line={"color": "#333" if i == 0 else "#888",
                                                             "dash": "solid" if i == 0 else "dot"}))
    palette = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
               "#9D755D", "#EECA3B", "#BAB0AC", "#1F77B4", "#D62728"]
    for i, key in enumerate(keys):
        tr = pts[pts["key"] == key].sort_values("_v")
        label = f"{tr['fused_nodes'].iloc[0]} ({tr['op_type'].iloc[0]})"
        fig.add_trace(go.Scatter(
            x=tr["intensity_flop_per_byte"], y=tr["flops"] / tr["time_s"] / 1e9,
            mode="lines+markers+text", name=label[:48],
            text=[str(v) if j in (0, len(tr) - 1) else "" for j, v in enumerate(tr["_v"])],
            textposition="top center", textfont={"size": 10},
            line={"color": palette[i % len(palette)], "width": 1.5},
            marker={"size": 6 + 3 * np.arange(len(tr)), "color": palette[i % len(palette)]},
            customdata=np.stack([tr["_v"], tr["time_s"] * 1e6], axis=1),
            hovertemplate=label + f"<br>{setting} %{{customdata[0]}}: %{{x:.3g}} FLOP/B, "
                          "%{y:.4g} GFLOP/s, %{customdata[1]:.4g} µs<extra></extra>"))
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP / byte)")
    fig.update_yaxes(type="log", title="attained GFLOP/s")
    return _layout(fig, f"Roofline trajectories as {setting} grows (marker size grows with "
                        f"{setting})", height=600, legend="right")


# ----------------------------------------------------------------------------- compare
#: share of a device chart's width the bars take; the rest is the column of value labels.
BAR_DOMAIN = 0.62


def _device_rows(fig: go.Figure, devices: pd.Series, texts: Sequence[str]) -> go.Figure:
    """Devices down the y axis in the listed order (first on top; labels never rotate) and each
    device's figures in a column right of the plot area, where no bar, whisker or marker can
    cover them and no narrow column clips them."""
    fig.update_yaxes(categoryorder="array", categoryarray=list(devices), autorange="reversed")
    fig.update_xaxes(domain=[0.0, BAR_DOMAIN], rangemode="tozero")
    for device, text in zip(devices, texts, strict=True):
        fig.add_annotation(x=BAR_DOMAIN + 0.02, xref="paper", y=device, yref="y", text=text,
                           showarrow=False, xanchor="left", align="left",
                           font={"size": 12, "color": "#333"})
    return fig


def device_time_bars(df: pd.DataFrame) -> go.Figure:
    """Predicted time per device (horizontal bars) with the [lower, upper] interval as a whisker;
    the time and its interval written beside the plot."""
    fig = go.Figure(go.Bar(
        x=df["time_ms"], y=df["device"], orientation="h", marker_color="#4C78A8",
        error_x={"type": "data", "symmetric": False, "array": df["upper_ms"] - df["time_ms"],
                 "arrayminus": df["time_ms"] - df["lower_ms"], "color": "#333"},
        hovertemplate="%{y}: %{x:.4g} ms<extra></extra>"))
    fig.update_xaxes(title="predicted time (ms), whisker = interval")
    _device_rows(fig, df["device"], [
        f"<b>{t:.4g} ms</b><br>{lo:.2g} – {hi:.2g}" for t, lo, hi in
        zip(df["time_ms"], df["lower_ms"], df["upper_ms"], strict=True)])
    return _layout(fig, "Predicted time per device", height=max(260, 52 * len(df) + 110))


def speedup_bars(df: pd.DataFrame, baseline: str) -> go.Figure:
    """Speedup over the baseline (bars) and, as markers, the speedup with both devices at their
    lower bounds (◆) and at their upper bounds (▲) (``speedup_at_lower`` / ``speedup_at_upper``);
    the three figures written beside the plot."""
    colors = ["#999" if d == baseline else ("#54A24B" if s >= 1 else "#E45756")
              for d, s in zip(df["device"], df["speedup"], strict=True)]
    fig = go.Figure([
        go.Bar(x=df["speedup"], y=df["device"], orientation="h", marker_color=colors,
               name="predicted", hovertemplate="%{y}: %{x:.3f}×<extra></extra>"),
        go.Scatter(x=df["speedup_at_lower"], y=df["device"], mode="markers",
                   name="both at their lower bound",
                   marker={"symbol": "diamond", "size": 11, "color": "#333"},
                   hovertemplate="%{y}: %{x:.3f}× with both at their lower bound"
                                 "<extra></extra>"),
        go.Scatter(x=df["speedup_at_upper"], y=df["device"], mode="markers",
                   name="both at their upper bound",
                   marker={"symbol": "triangle-up", "size": 11, "color": "#F58518"},
                   hovertemplate="%{y}: %{x:.3f}× with both at their upper bound"
                                 "<extra></extra>"),
    ])
    fig.add_vline(x=1.0, line={"color": "#666", "dash": "dash"})
    _device_rows(fig, df["device"], [
        f"<b>{s:.3g}×</b><br>◆ {lo:.2g}  ▲ {hi:.2g}" for s, lo, hi in
        zip(df["speedup"], df["speedup_at_lower"], df["speedup_at_upper"], strict=True)])
    fig.update_xaxes(title="baseline time / device time")
    return _layout(fig, f"Speedup over {baseline}", height=max(280, 52 * len(df) + 110))


def _stacked_bars(parts: Iterable[tuple[pd.Series, str, str]], rows: pd.Series, unit: str
                  ) -> go.Figure:
    """Horizontal bars stacked along ``rows``: one trace per (values, name, color) part, its
    values hovered in ``unit``."""
    fig = go.Figure()
    for values, name, color in parts:
        fig.add_trace(go.Bar(x=values, y=rows, orientation="h", name=name, marker_color=color,
                             hovertemplate=f"%{{y}}: %{{x:.4g}} {unit} {name}<extra></extra>"))
    return fig.update_layout(barmode="stack")


def _capacity_ticks(fig: go.Figure, capacity_gib: pd.Series, rows: pd.Series, size: int) -> None:
    """A black tick at each row's device capacity (GiB) over its stacked memory bar."""
    fig.add_trace(go.Scatter(x=capacity_gib, y=rows, mode="markers", name="device capacity",
                             marker={"symbol": "line-ns-open", "size": size, "color": "#000",
                                     "line": {"width": 3}},
                             hovertemplate="%{y}: capacity %{x:.4g} GiB<extra></extra>"))


def bound_mix(df: pd.DataFrame) -> go.Figure:
    """Stacked horizontal bars: each device's predicted time split by bound (ms)."""
    fig = _stacked_bars(((df[f"{bound}_ms"], bound, color) for bound, color in BOUND_COLORS.items()
                         if f"{bound}_ms" in df), df["device"], "ms")
    total = sum(df[f"{b}_ms"] for b in BOUND_COLORS if f"{b}_ms" in df)
    _device_rows(fig, df["device"], [f"<b>{t:.4g} ms</b>" for t in total])
    return _layout(fig, "Bottleneck mix (predicted ms by bound)",
                   height=max(280, 52 * len(df) + 110))


def _short(v: float) -> str:
    if pd.isna(v):
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def metric_bars(df: pd.DataFrame, col: str, title: str, axis: str, color: str) -> go.Figure:
    """One horizontal bar per device with its value written right of the bar ("n/a" where the
    catalog has no figure)."""
    values = df[col].astype(float)
    fig = go.Figure(go.Bar(x=values, y=df["device"], orientation="h", marker_color=color,
                           hovertemplate="%{y}: %{x:.4g}<extra></extra>"))
    fig.update_xaxes(title=axis)
    _device_rows(fig, df["device"], [f"<b>{_short(v)}</b>" for v in values])
    return _layout(fig, title, height=max(240, 40 * len(df) + 100))


# ----------------------------------------------------------------------------- what-if
def gain_by_op_type(base: pd.DataFrame, new: pd.DataFrame, top: int = 15) -> go.Figure:
    """Per op type: time on the base device and on the what-if device (ms), grouped bars."""
    m = base[["op_type", "time_s"]].merge(new[["op_type", "time_s"]], on="op_type",
                                          suffixes=("_base", "_new"), how="outer").fillna(0.0)
    m = m.nlargest(top, "time_s_base").iloc[::-1]
    fig = go.Figure([
        go.Bar(y=m["op_type"], x=m["time_s_base"] * 1e3, orientation="h", name="base device",
               marker_color="#BAB0AC"),
        go.Bar(y=m["op_type"], x=m["time_s_new"] * 1e3, orientation="h", name="what-if device",
               marker_color="#4C78A8",
               text=[f"{b / n:.2f}×" if n > 0 else "" for b, n in
                     zip(m["time_s_base"], m["time_s_new"], strict=True)],
               textposition="outside", cliponaxis=False),
    ])
    fig.update_layout(barmode="group", margin={"r": 50})
    fig.update_xaxes(title="predicted time (ms)")
    return _layout(fig, "Which op types gain", height=max(320, 40 * len(m) + 100))


# ----------------------------------------------------------------------------- measurements
def measured_vs_predicted(df: pd.DataFrame, pred_col: str, title: str) -> go.Figure:
    """Log-log scatter of predicted vs measured seconds (µs on axes), coloured by family, with
    the y = x line and the ±2× band."""
    fig = go.Figure()
    meas = df["measured_s"] * 1e6
    pred = df[pred_col] * 1e6
    lo = float(min(meas.min(), pred.min())) / 2
    hi = float(max(meas.max(), pred.max())) * 2
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = measured",
                             line={"color": "#333"}))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[2 * lo, 2 * hi], mode="lines", name="2× off",
                             line={"color": "#aaa", "dash": "dot"}))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo / 2, hi / 2], mode="lines", showlegend=False,
                             line={"color": "#aaa", "dash": "dot"}))
    for fam, part in df.groupby("family"):
        fig.add_trace(go.Scatter(
            x=part["measured_s"] * 1e6, y=part[pred_col] * 1e6, mode="markers", name=str(fam),
            marker={"size": 7, "opacity": 0.7},
            customdata=np.stack([part["op_type"], part["device_id"]], axis=1),
            hovertemplate="%{customdata[0]} on %{customdata[1]}<br>measured %{x:.4g} µs<br>"
                          "predicted %{y:.4g} µs<extra></extra>"))
    fig.update_xaxes(type="log", title="measured (µs)")
    fig.update_yaxes(type="log", title="predicted (µs)")
    return _layout(fig, title, height=480)


def error_by_family(table: pd.DataFrame, cols: Sequence[str], title: str) -> go.Figure:
    """Grouped bars of median absolute percentage error per op family for each column."""
    palette = ["#4C78A8", "#F58518", "#54A24B", "#E45756"]
    fig = go.Figure([go.Bar(x=table["family"], y=table[c], name=c, marker_color=palette[i % 4],
                            hovertemplate="%{x}: %{y:.3g}%<extra></extra>")
                     for i, c in enumerate(cols)])
    fig.update_layout(barmode="group")
    fig.update_yaxes(title="median |error| (%)")
    return _layout(fig, title, height=380)


# ----------------------------------------------------------------------------- LLM serving
#: memory parts of an LLM replica (``roofcast.api.llm_row`` columns, GiB) and their colours.
LLM_MEMORY_PARTS = {"weights_GiB": ("weights", "#4C78A8"), "kv_cache_GiB": ("KV cache", "#F58518"),
                    "activations_GiB": ("activations", "#54A24B"),
                    "reserve_GiB": ("engine reserve", "#BAB0AC")}
#: latency axes of the frontier: column -> axis title.
LLM_LATENCIES = {"tpot_ms": "time per output token (ms)",
                 "e2e_latency_ms": "end-to-end latency of a request (ms)"}


#: x-axis words of the serving charts: static batch or continuous-batching concurrency.
LLM_BATCH_WORDS = {"batch": "batch (requests started together)",
                   "concurrency": "concurrency (requests in flight)"}


def llm_throughput_vs_batch(table: pd.DataFrame, what: str = "batch") -> go.Figure:
    """Output tokens/s against the batch or concurrency (``what``; log-2 axis), one line per
    device (rows of ``predictor.llm.serving.serving_table``: device, batch,
    output_tokens_per_s)."""
    fig = go.Figure()
    for device, rows in table.groupby("device", sort=False):
        fig.add_trace(go.Scatter(
            x=rows["batch"], y=rows["output_tokens_per_s"], mode="lines+markers", name=device,
            hovertemplate=f"{device}<br>{what} %{{x}}: %{{y:,.4g}} tokens/s<extra></extra>"))
    fig.update_xaxes(title=LLM_BATCH_WORDS[what], type="log", dtick=math.log10(2))
    fig.update_yaxes(title="output tokens/s", rangemode="tozero")
    return _layout(fig, f"Output tokens/s vs {what}")


def llm_frontier(table: pd.DataFrame, latency: str = "tpot_ms", what: str = "batch") -> go.Figure:
    """The latency-throughput frontier: per device, ``latency`` (a column of
    ``LLM_LATENCIES``) against output tokens/s as the batch (or concurrency: ``what``) grows,
    each point labelled with it; down and right is better."""
    fig = go.Figure()
    for device, rows in table.groupby("device", sort=False):
        fig.add_trace(go.Scatter(
            x=rows["output_tokens_per_s"], y=rows[latency], mode="lines+markers+text",
            name=device, text=[f"{b}" for b in rows["batch"]], textposition="top center",
            textfont={"size": 10},
            hovertemplate=(f"{device}<br>%{{x:,.4g}} tokens/s, %{{y:.4g}} ms"
                           f"<br>{what} %{{text}}<extra></extra>")))
    fig.update_xaxes(title="output tokens/s", rangemode="tozero")
    fig.update_yaxes(title=LLM_LATENCIES[latency], rangemode="tozero")
    return _layout(fig, f"Latency-throughput frontier (labels: {what})")


def llm_memory_bars(df: pd.DataFrame) -> go.Figure:
    """Per device (rows of ``roofcast.api.llm_frame``): weights, KV cache, activations and the
    engine reserve stacked (GiB) against the device capacity (a black tick); the total over the
    capacity written beside the plot."""
    fig = _stacked_bars(((df[col], name, color) for col, (name, color) in
                         LLM_MEMORY_PARTS.items()), df["device"], "GiB")
    _capacity_ticks(fig, df["capacity_GiB"], df["device"], 26)
    fig.update_xaxes(title="GiB")
    _device_rows(fig, df["device"], [
        f"<b>{t:.4g} / {c:.4g} GiB</b><br>{'fits' if f else 'does not fit'}" for t, c, f in
        zip(df["memory_GiB"], df["capacity_GiB"], df["fits"], strict=True)])
    return _layout(fig, "Memory per device", height=max(240, 52 * len(df) + 110))


# ----------------------------------------------------------------------------- parallel plans
#: parts of a plan's step (``ParallelPrediction`` fields, seconds; they sum to ``step_s``).
PLAN_STEP_PARTS = {"compute_s": ("compute", "#4C78A8"),
                   "exposed_comm_s": ("exposed communication", "#F58518"),
                   "bubble_s": ("pipeline bubble", "#BAB0AC"),
                   "optimizer_s": ("optimizer", "#54A24B")}
#: per-device memory parts (``ParallelPrediction.as_dict`` keys, bytes).
PLAN_MEMORY_PARTS = {"weights_bytes": ("weights", "#4C78A8"),
                     "gradients_bytes": ("gradients", "#E45756"),
                     "optimizer_bytes": ("optimizer states", "#54A24B"),
                     "activations_bytes": ("activations", "#F58518"),
                     "other_bytes": ("working set", "#BAB0AC")}


def plan_step_bars(table: pd.DataFrame) -> go.Figure:
    """One horizontal bar per plan (rows of ``PlanSearch.table``, best first, labelled by
    ``plan``): compute, exposed communication, pipeline bubble and optimizer stacked (seconds);
    the step time and fit written beside each bar."""
    fig = _stacked_bars(((table[col], name, color) for col, (name, color) in
                         PLAN_STEP_PARTS.items()), table["plan"], "s")
    fig.update_xaxes(title="seconds per step")
    _device_rows(fig, table["plan"], [
        f"<b>{s:.4g} s</b><br>{'fits' if f else 'does not fit'}"
        for s, f in zip(table["step_s"], table["fits"], strict=True)])
    return _layout(fig, "Step time per plan", height=max(240, 40 * len(table) + 110))


def plan_memory_bars(table: pd.DataFrame) -> go.Figure:
    """Per plan: the most loaded device's weights, gradients, optimizer states, activations and
    working set stacked (GiB) against the device capacity (a black tick)."""
    gib = 2.0**30
    fig = _stacked_bars(((table[col] / gib, name, color) for col, (name, color) in
                         PLAN_MEMORY_PARTS.items()), table["plan"], "GiB")
    _capacity_ticks(fig, table["capacity_bytes"] / gib, table["plan"], 22)
    fig.update_xaxes(title="GiB per device")
    _device_rows(fig, table["plan"], [
        f"<b>{t / gib:.4g} / {c / gib:.4g} GiB</b>" for t, c in
        zip(table["memory_bytes"], table["capacity_bytes"], strict=True)])
    return _layout(fig, "Memory per device", height=max(240, 40 * len(table) + 110))


def serving_plan_bars(table: pd.DataFrame) -> go.Figure:
    """Output tokens/s of all replicas per serving plan (rows of
    ``predictor.llm.serving_plan.serving_plan_search``, best first), with TPOT and the memory
    of the fullest device written beside each bar; a plan that does not fit has no bar."""
    fig = go.Figure(go.Bar(x=table["tokens_per_s"], y=table["plan"], orientation="h",
                           marker_color="#4C78A8", name="output tokens/s",
                           hovertemplate="%{y}: %{x:,.4g} tokens/s<extra></extra>"))
    fig.update_xaxes(title="output tokens/s (all replicas)")
    _device_rows(fig, table["plan"], [
        f"<b>TPOT {t:.4g} ms</b><br>{m:.4g} / {c:.4g} GiB" if f else
        f"<b>does not fit</b><br>{o:.4g} GiB over"
        for t, m, c, f, o in zip(table["tpot_ms"], table["memory_GiB"], table["capacity_GiB"],
                                 table["fits"], table["over_GiB"], strict=True)])
    return _layout(fig, "Serving plans", height=max(280, 40 * len(table) + 150))


# ----------------------------------------------------------------------------- sweeps
#: colours of a sweep's models (cycled), one per model in the order given
SWEEP_COLORS = ("#4C78A8", "#F58518", "#E45756", "#72B7B2", "#54A24B", "#EECA3B", "#B279A2",
                "#FF9DA6", "#9D755D", "#BAB0AC")


def _cell_text(rows: pd.DataFrame) -> list[str]:
    """Hover text of sweep cells: the ``hardware`` column where the rows have it (the spec's
    entry: a device or ``system:ID``), else the device; the plan when not ``single``, runtime,
    batch, precision, mode."""
    hardware = rows["hardware"] if "hardware" in rows else rows["device"]
    plans = rows["plan"] if "plan" in rows else pd.Series("single", index=rows.index)
    return [f"{d}{'' if pl == 'single' else ' · ' + pl} · {r} · batch {b} · {p} · {m}"
            for d, pl, r, b, p, m in zip(hardware, plans, rows["runtime"], rows["batch"],
                                         rows["precision"], rows["mode"], strict=True)]


def sweep_pareto(cells: pd.DataFrame, front: pd.DataFrame, *,
                 title: str = "Latency vs $/throughput", cost: str = "usd_per_throughput",
                 group: str = "model", x_title: str = "predicted time per step (ms)",
                 rate: str = "sample/s") -> go.Figure:
    """Latency vs cost of throughput for a sweep's cells (rows with ``CELL_COLUMNS``): each
    cell a faint point at (``time_s`` in ms, ``cost``: default ``usd_per_throughput`` = list
    price / samples per s; the explorer passes $ per token/s for LLM cells and names the unit
    ``rate``), both axes log; per ``group`` (default the model) the Pareto front (``front``:
    the cells no other cell of the group beats on both) as a line with larger markers. Down and
    left is better. Cells without a finite, positive time and cost are not drawn (the page says
    how many)."""
    fig = go.Figure()
    groups = list(dict.fromkeys([*front[group], *cells[group]]))
    for i, name in enumerate(groups):
        color = SWEEP_COLORS[i % len(SWEEP_COLORS)]
        rows = _drawable(cells[cells[group] == name], cost)
        if len(rows):
            fig.add_trace(go.Scattergl(
                x=rows["time_s"] * 1e3, y=rows[cost], mode="markers",
                name=f"{name} cells", legendgroup=name, text=_cell_text(rows),
                marker={"color": color, "size": 5, "opacity": 0.35},
                hovertemplate=(f"{name}<br>%{{text}}<br>%{{x:.4g}} ms, "
                               f"$%{{y:.4g}} per {rate}<extra></extra>")))
        best = _drawable(front[front[group] == name], cost).sort_values("time_s")
        if len(best):
            fig.add_trace(go.Scatter(
                x=best["time_s"] * 1e3, y=best[cost], mode="lines+markers",
                name=f"{name} Pareto front", legendgroup=name, text=_cell_text(best),
                line={"color": color, "width": 2, "shape": "hv"},
                marker={"color": color, "size": 9, "line": {"color": "#000", "width": 1}},
                hovertemplate=(f"<b>{name}</b> (front)<br>%{{text}}<br>%{{x:.4g}} ms, "
                               f"$%{{y:.4g}} per {rate}<extra></extra>")))
    fig.update_xaxes(title=x_title, type="log")
    fig.update_yaxes(title=f"$ per ({rate})  (list price / throughput)", type="log")
    return _layout(fig, title, height=520)


def _drawable(rows: pd.DataFrame, cost: str = "usd_per_throughput") -> pd.DataFrame:
    """Rows a log-log latency/cost plot can show: finite, positive time and cost."""
    t = pd.to_numeric(rows["time_s"], errors="coerce")
    c = pd.to_numeric(rows[cost], errors="coerce")
    return rows[np.isfinite(t) & np.isfinite(c) & (t > 0) & (c > 0)]


