"""Plan explorer: how to split a model over a multi-device system, ranked.

Training and inference: ``roofcast.plan`` (as ``roofcast plan``): every (dp, tp, pp, ep,
micro-batches) that divides the model and the global batch, with the ZeRO stages and
recomputation choices asked for, fitting plans first, fastest first; per plan the step split
into compute, exposed communication, pipeline bubble and optimizer (they sum to the step) and
the most loaded device's memory against its capacity. When none fits, the closest one and its
excess.

Serving (LLM configs): every tensor x pipeline split into replicas, ranked by the output
tokens/s of all replicas, with TTFT, TPOT and the fullest device's memory.

The model: a bundled LLM config or a zoo ONNX model; the system: a catalog system or N of a
catalog device.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from roofcast import api
from roofcast.app import charts, state
from roofcast.app.parallel_report import closest_sentence, fit_sentence, plan_rows

MODEL_SOURCES = ("LLM config", "Zoo ONNX model")
PLACEMENTS = ("Catalog system", "Device × count")
MODES = {"train": "training step", "infer": "inference step", "serve": "LLM serving"}
RECOMPUTE = {"both": (False, True), "off": (False,), "on": (True,)}
DEFAULTS: dict[str, Any] = {"plan_model_source": MODEL_SOURCES[0], "plan_llm": "llama-3.1-70b",
                            "plan_zoo": "bert_base", "plan_placement": PLACEMENTS[0],
                            "plan_system": "hgx-h100-x4", "plan_device": "h100-sxm",
                            "plan_count": 8, "plan_mode": "train", "plan_global_batch": 1024,
                            "plan_seq": 4096, "plan_zero": [0, 1], "plan_recompute": "both",
                            "plan_top": 10}
#: table columns shown (``PlanSearch.table`` plus GiB columns).
SHOWN = ("rank", "plan", "micro_batch", "step_s", "compute_s", "exposed_comm_s", "bubble_s",
         "optimizer_s", "samples_per_s", "tokens_per_s", "memory_GiB", "capacity_GiB", "fits",
         "over_GiB")


SERVING_SHOWN = ("rank", "plan", "replicas", "batch", "ttft_ms", "tpot_ms", "tokens_per_s",
                 "comm_tpot_ms", "memory_GiB", "capacity_GiB", "fits", "over_GiB", "notes")


@st.cache_data(max_entries=16, show_spinner="Searching the serving plans…")
def serving(model: str, where: tuple, input_tokens: int) -> pd.DataFrame:
    """``roofcast.plan(mode="serve")``'s ranked table (cached per input)."""
    kw = dict(where)
    return api.plan(model, kw.pop("system", None), **kw, mode="serve", seq_tokens=input_tokens)


@st.cache_data(max_entries=16, show_spinner="Searching the plans…")
def search(model: str, where: tuple, global_batch: int, mode: str, seq: int | None,
           zero: tuple[int, ...], recompute: tuple[bool, ...]) -> tuple[pd.DataFrame, dict, float]:
    """``roofcast.plan``'s table, rejections and search time (cached per input)."""
    kw = dict(where)
    result = api.plan(model, kw.pop("system", None), **kw, global_batch=global_batch, mode=mode,
                      seq_tokens=seq, zero=zero, recompute=recompute)
    return result.table, dict(result.rejected), float(result.elapsed_s)


def controls() -> tuple[str, dict, dict]:
    """The model, the placement keywords of ``roofcast.plan`` and the search settings."""
    s = st.session_state
    for key, value in DEFAULTS.items():
        s.setdefault(key, value)
    c1, c2, c3 = st.columns(3)
    with c1:
        source = st.radio("Model", MODEL_SOURCES, key="plan_model_source", horizontal=True)
        if source == MODEL_SOURCES[0]:
            model = "llm:" + st.selectbox("Bundled LLM config",
                                          api.llm_configs()["name"].tolist(), key="plan_llm")
        else:
            model = "zoo:" + st.selectbox("Zoo model", api.zoo_models(), key="plan_zoo")
    with c2:
        placement = st.radio("Devices", PLACEMENTS, key="plan_placement", horizontal=True)
        if placement == PLACEMENTS[0]:
            df = api.systems()
            ids = df["id"].tolist()
            size = dict(zip(df["id"], df["devices"], strict=True))
            system = st.selectbox("System", ids, key="plan_system",
                                  format_func=lambda i: f"{i} ({size[i]} devices)")
            where = {"system": system}
        else:
            device = st.selectbox("Device", state.catalog()["id"].tolist(), key="plan_device")
            count = st.number_input("Devices", min_value=1, max_value=4096, step=1,
                                    key="plan_count")
            where = {"hw": device, "devices": int(count)}
    with c3:
        mode = st.radio("Mode", tuple(MODES), key="plan_mode", horizontal=True,
                        format_func=MODES.__getitem__)
        global_batch = st.number_input("Global batch (samples per step)", min_value=1,
                                       max_value=1 << 24, step=64, key="plan_global_batch",
                                       disabled=mode == "serve",
                                       help="serving: as many requests as fit per replica")
        seq = st.number_input("Tokens per sample (LLM; serving: prompt tokens)", min_value=1,
                              max_value=1 << 20, step=512, key="plan_seq",
                              help="capped at the model's context; ignored by ONNX models")
    c4, c5, c6 = st.columns(3)
    zero = c4.multiselect("ZeRO stages to try", [0, 1, 2, 3], key="plan_zero")
    recompute = c5.radio("Activation recomputation", tuple(RECOMPUTE), key="plan_recompute",
                         horizontal=True)
    top = c6.slider("Plans shown", min_value=1, max_value=50, key="plan_top")
    settings = {"global_batch": int(global_batch), "mode": mode,
                "seq": int(seq) if source == MODEL_SOURCES[0] else None,
                "zero": tuple(sorted(zero)) or (0,), "recompute": RECOMPUTE[recompute],
                "top": int(top)}
    return model, where, settings


def rate_text(per_s: float) -> str:
    """A rate for a metric tile: whole numbers with thousands separators from 1000 up
    (41,830), 4 significant digits below."""
    return f"{per_s:,.0f}" if per_s >= 1000 else f"{per_s:.4g}"


def verdict(rows: list[dict]) -> None:
    """The best plan as metrics, or a warning naming the closest plan and its excess."""
    closest = closest_sentence(rows)
    if closest is not None:
        st.warning(closest, icon=":material/memory:")
        return
    best = next(r for r in rows if r["fits"])
    cols = st.columns([2, 1, 1, 1])
    cols[0].metric("Best plan", best["plan"])
    cols[1].metric("Step time", charts.fmt_time(best["step_s"]),
                   help=f"interval {charts.fmt_time(best['lower_s'])} – "
                        f"{charts.fmt_time(best['upper_s'])}")
    rate = best["tokens_per_s"]
    known = rate is not None and rate == rate
    cols[2].metric("Tokens/s" if known else "Samples/s",
                   rate_text(rate if known else best["samples_per_s"]))
    cols[3].metric("Memory per device", f"{best['memory_GiB']:.4g} GiB",
                   help=fit_sentence(best))


def render() -> None:
    state.init_state("plan")
    st.title("Plan explorer")
    st.caption("Split a model over a multi-device system: every data / tensor / pipeline / "
               "expert-parallel plan that divides the model and the batch, ranked by step time, "
               "with its breakdown and the memory of each device.")
    model, where, settings = controls()
    st.session_state["plan_label"] = f"{model} on {where.get('system') or where['hw']}"
    if settings["mode"] == "serve":
        render_serving(model, where, settings)
        return
    try:
        table, rejected, elapsed = search(model, tuple(where.items()),
                                          settings["global_batch"], settings["mode"],
                                          settings["seq"], settings["zero"],
                                          settings["recompute"])
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    rows = plan_rows(table)
    verdict(rows)
    top = table.head(settings["top"])
    st.caption(f"{len(table)} plans evaluated in {elapsed:.2f} s, "
               f"{sum(r['fits'] for r in rows)} fit; {sum(rejected.values())} skipped or "
               f"refused.")
    if len(top):
        left, right = st.columns(2)
        left.plotly_chart(charts.plan_step_bars(top), width="stretch")
        right.plotly_chart(charts.plan_memory_bars(top), width="stretch")
        shown = pd.DataFrame(rows[:settings["top"]])[list(SHOWN)]
        st.dataframe(shown, hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="%.4g")
                                    for c in shown.columns if shown[c].dtype.kind == "f"})
        st.download_button("Download CSV", table.drop(columns=["notes"]).to_csv(index=False)
                           .encode(), file_name="roofcast_plans.csv", mime="text/csv")
    if rejected:
        with st.expander(f"Skipped or refused ({sum(rejected.values())})"):
            st.dataframe(pd.DataFrame({"reason": list(rejected), "plans": list(rejected.values())}),
                         hide_index=True)
    notes = sorted({n for r in rows[:settings["top"]] for n in r["notes"]})
    if notes:
        with st.expander(f"Notes ({len(notes)})"):
            st.markdown("\n".join(f"- {n}" for n in notes))


def render_serving(model: str, where: dict, settings: dict) -> None:
    """The serving plans: the best as metrics (or the closest plan's excess), the tokens/s
    chart and the ranked table."""
    if not model.startswith("llm:"):
        st.info("Serving plans are for LLM configs: pick one under Model.")
        return
    try:
        table = serving(model, tuple(where.items()), settings["seq"] or 512)
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    fits = table[table["fits"]]
    if len(fits):
        best = fits.iloc[0]
        cols = st.columns(4)
        cols[0].metric("Best plan", best["plan"])
        cols[1].metric("Output tokens/s", rate_text(best["tokens_per_s"]))
        cols[2].metric("TPOT", charts.fmt_time(best["tpot_ms"] / 1e3))
        cols[3].metric("Memory per device", f"{best['memory_GiB']:.4g} GiB")
    elif len(table):
        close = table.loc[table["over_GiB"].idxmin()]
        st.warning(f"no serving plan fits: the closest, {close['plan']}, needs "
                   f"{close['memory_GiB']:.4g} GiB per device, {close['over_GiB']:.4g} GiB over "
                   f"the {close['capacity_GiB']:.4g} GiB", icon=":material/memory:")
    top = table.head(settings["top"])
    st.plotly_chart(charts.serving_plan_bars(top), width="stretch")
    shown = top[list(SERVING_SHOWN)]
    st.dataframe(shown, hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.4g")
                                for c in shown.columns if shown[c].dtype.kind == "f"})


if __name__ == "__main__":
    render()
