"""The LLM page's request-rate section: latency percentiles against the request rate per
device (``predictor.llm.sim.run.rate_sweep``: simulated open loops at fractions and multiples
of the chosen rate) and the capacity planner's answer for the rate and SLOs
(``roofcast.plan(..., rate=...)``). Off until asked for: a simulation per rate per device."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from roofcast import api
from roofcast.app import state, wording
from roofcast.graph_import.llm.arch import LLMArch

#: the rates charted, as multiples of the chosen rate.
RATE_STEPS = (0.25, 0.5, 1.0, 1.5, 2.0)
REQUESTS = 300
SIM_KEYS = ("input_tokens", "output_tokens", "weights", "kv_cache", "activations", "runtime")


@st.cache_data(max_entries=16, show_spinner="Simulating request rates…")
def rate_curve(arch: LLMArch, devices: tuple[str, ...], options: tuple, rate: float,
               slos: tuple[float, float]) -> pd.DataFrame:
    """Per device x rate: TTFT / TPOT P50 and P99 (ms), throughput and SLO share."""
    from roofcast.predictor.llm.sim.run import SimSpec, rate_sweep
    from roofcast.predictor.llm.types import ServingConfig

    cfg = ServingConfig(**{k: v for k, v in dict(options).items() if k in SIM_KEYS})
    spec = SimSpec(rate=rate, requests=REQUESTS, slo_ttft_s=slos[0] / 1e3,
                   slo_tpot_s=slos[1] / 1e3)
    rows = []
    for r, res in rate_sweep(arch, [api.device(d) for d in devices], cfg, spec,
                             [rate * k for k in RATE_STEPS]):
        m = res.metrics
        if m is None:
            continue
        rows.append({"device": res.device, "rate": r,
                     **{f"{k}_{q}_ms": m.latency[f"{k}_s"][q] * 1e3
                        for k in ("ttft", "tpot") for q in ("p50", "p99")},
                     "slo_share": m.slo_share, "road": res.road})
    return pd.DataFrame(rows)


@st.cache_data(max_entries=8, show_spinner="Planning capacity…")
def capacity(arch: LLMArch, devices: tuple[str, ...], options: tuple, rate: float,
             slos: tuple[float, float]) -> pd.DataFrame:
    opts = {k: v for k, v in dict(options).items() if k in SIM_KEYS and k != "activations"}
    return api.plan(arch, hw=list(devices), rate=rate, slo_ttft_ms=slos[0],
                    slo_tpot_ms=slos[1], **opts)


def _chart(df: pd.DataFrame, metric: str) -> None:
    long = df.melt(id_vars=["device", "rate"], value_vars=[f"{metric}_p50_ms",
                                                           f"{metric}_p99_ms"],
                   var_name="percentile", value_name="ms")
    long["percentile"] = long["percentile"].str.extract(r"_(p\d+)_")[0]
    fig = px.line(long, x="rate", y="ms", color="device", line_dash="percentile",
                  markers=True, title=f"{metric.upper()} against request rate",
                  labels={"rate": "requests/s", "ms": f"{metric.upper()} (ms)"})
    st.plotly_chart(fig, width="stretch")


def rate_section(arch: LLMArch, devices: list[str], options: dict) -> None:
    """The section (module docstring)."""
    with st.expander("Request rate and SLOs (simulated)", expanded=False):
        c1, c2, c3 = st.columns(3)
        rate = c1.number_input("Requests/s", min_value=0.01, max_value=1e5, value=2.0,
                               key="llm_rate")
        ttft = c2.number_input("TTFT SLO (ms)", min_value=1.0, max_value=1e7, value=1000.0,
                               key="llm_slo_ttft")
        tpot = c3.number_input("TPOT SLO (ms)", min_value=0.1, max_value=1e6, value=50.0,
                               key="llm_slo_tpot")
        if not st.toggle("Simulate", key="llm_simulate"):
            st.caption("A request-level simulation per device and rate (Poisson arrivals, "
                       "the engine's scheduler, paged KV): switch on to run it.")
            return
        key = tuple(sorted(options.items(), key=lambda kv: kv[0]))
        slos = (float(ttft), float(tpot))
        try:
            df = rate_curve(arch, tuple(devices), key, float(rate), slos)
        except state.USER_ERRORS as exc:
            st.error(wording.in_app_words(str(exc)), icon=":material/error:")
            return
        if df.empty:
            st.info("The model fits none of the devices with room for a request's KV cache.")
            return
        st.caption(str(df["road"].iloc[0]).split(",")[0] + " — P50 solid, P99 dashed")
        left, right = st.columns(2)
        with left:
            _chart(df, "ttft")
        with right:
            _chart(df, "tpot")
        if st.button("Plan capacity", key="llm_plan"):
            try:
                plan = capacity(arch, tuple(devices), key, float(rate), slos)
            except state.USER_ERRORS as exc:
                st.error(wording.in_app_words(str(exc)), icon=":material/error:")
                return
            best = plan.iloc[0]
            if bool(best["meets"]):
                st.success(f"Cheapest meeting the SLOs at {rate:g} requests/s: "
                           f"{int(best['replicas'])} x tp{int(best['tp'])} on "
                           f"{best['device']} ({int(best['devices'])} devices)")
            else:
                st.warning("No device meets the SLOs at this rate.")
            st.dataframe(plan, hide_index=True, width="stretch")
