"""LLM serving: a decoder-only model (bundled config, uploaded ``config.json`` or ONNX decoder)
served by an engine on several devices.

The numbers are ``roofcast.llm`` (the same as ``roofcast llm``): per device TTFT (the prefill of
the prompt), TPOT (one decode step at the request's contexts), end-to-end latency, output and
total tokens/s with their intervals, the memory of one replica (weights + KV cache +
activations + the engine's reserve, GiB) against the device's, the largest batch that fits.
The charts sweep the batch (``predictor.llm.serving.serving_table``): output tokens/s per
device, the latency-throughput frontier, and the memory at the chosen batch. A request rate
and SLOs (``llm_rate``): simulated latency percentiles against the rate, the capacity plan.

Uploads: a ``config.json`` is read as JSON (at most ``MAX_CONFIG_BYTES``); an ONNX decoder is
read in the app's limited worker process with the Model page's size limit
(``state.MAX_UPLOAD_MB``), so a hostile file costs a child process, not the server.
"""

from __future__ import annotations

import hashlib
import math

import pandas as pd
import streamlit as st

from roofcast import api
from roofcast.app import charts, controls, state, wording
from roofcast.app.views.llm_rate import rate_section
from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.predictor.llm.types import (
    ACTIVATION_DTYPES,
    KV_DTYPES,
    WEIGHT_DTYPES,
    ServingConfig,
)

SOURCES = ("Bundled config", "Upload config.json", "Upload ONNX decoder")
BATCHING = ("Static batch", "Concurrency", "As many as fit")
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_DEVICES = ("h100-sxm", "h200", "mi300x")
MAX_CONFIG_BYTES = 2**20
MAX_TOKENS = 1 << 20
#: batches the charts sweep (those that do not fit are left out of the lines).
CHART_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
DEFAULT_ENGINE = "default engine of each device"
#: a metric that was not predicted (the model does not fit); the page says why beside it.
NOT_PREDICTED = "—"
METRIC_LABELS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_latency_ms": "End-to-end",
                 "output_tokens_per_s": "Output tokens/s"}


@st.cache_data(max_entries=32, show_spinner=False)
def bundled_configs() -> pd.DataFrame:
    return api.llm_configs()


@st.cache_data(max_entries=16, show_spinner="Reading config.json…")
def arch_from_config(digest: str, _data: bytes) -> LLMArch:
    """An uploaded ``config.json`` (its bytes; ``digest`` keys the cache) as an ``LLMArch``."""
    del digest
    if len(_data) > MAX_CONFIG_BYTES:
        raise ModelImportError(f"config.json is {len(_data) / 2**10:.0f} KiB, over the "
                               f"{MAX_CONFIG_BYTES // 2**10} KiB limit of a model config")
    return api.llm_arch(_data)  # load_llm reads bytes that start with "{" as a config.json


@st.cache_data(max_entries=16, show_spinner="Reading the ONNX decoder…")
def arch_from_onnx(digest: str, _data: bytes) -> LLMArch:
    """An uploaded ONNX decoder as an ``LLMArch``, read in the limited worker (module
    docstring)."""
    from roofcast.app.worker import run_limited
    from roofcast.graph_import.llm.load import load_llm

    del digest
    if len(_data) > state.MAX_UPLOAD_BYTES:
        raise ModelImportError(
            f"the file is {len(_data) / 2**20:.1f} MB, over the upload limit of "
            f"{state.MAX_UPLOAD_MB} MB: export the decoder with its weights as external data "
            "(roofcast never reads weights) or use `roofcast llm FILE` on the command line")
    return run_limited(load_llm, _data)


@st.cache_data(max_entries=256, show_spinner="Predicting…")
def predict_rows(arch: LLMArch, device: str, options: tuple) -> pd.DataFrame:
    """``roofcast.llm`` on one device as a one-row frame (``api.llm_frame``)."""
    return api.llm_frame([api.llm(arch, device, **dict(options))])


@st.cache_data(max_entries=64, show_spinner="Sweeping the batch…")
def sweep(arch: LLMArch, devices: tuple[str, ...], options: tuple) -> pd.DataFrame:
    """``serving_table`` over ``CHART_BATCHES`` for the charts: static batches, or
    concurrencies when the run is continuous batching (the table's batches replace the run's
    own batch or concurrency)."""
    from roofcast.predictor.llm.serving import serving_table

    opts = dict(options)
    estimator = opts.pop("estimator", None)
    continuous = opts.get("concurrency") is not None
    opts.update(batch=None if continuous else 1, concurrency=1 if continuous else None)
    cfg = ServingConfig(**opts)
    kwargs = {} if estimator is None else {"estimator": estimator}
    return serving_table(arch, [api.device(d) for d in devices], cfg, list(CHART_BATCHES),
                         **kwargs)


def _upload_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_picker() -> LLMArch | None:
    """The model controls; the chosen model's ``LLMArch`` (None until one is given)."""
    s = st.session_state
    source = st.radio("Model", SOURCES, key="llm_source", horizontal=True)
    if source == SOURCES[0]:
        configs = bundled_configs()
        names = configs["name"].tolist()
        if s.get("llm_model") not in names:
            s["llm_model"] = DEFAULT_MODEL if DEFAULT_MODEL in names else names[0]
        params = dict(zip(configs["name"], configs["params"], strict=True))
        name = st.selectbox("Bundled config", names, key="llm_model",
                            format_func=lambda n: f"{n} ({params[n] / 1e9:.3g} B parameters)")
        return api.llm_arch(name)
    if source == SOURCES[1]:
        up = st.file_uploader("A Hugging Face config.json (no weights needed)", type=["json"],
                              key="llm_config_upload")
        if up is None:
            return None
        data = up.getvalue()
        return arch_from_config(_upload_digest(data), data)
    up = st.file_uploader(f"An ONNX decoder export (up to {state.MAX_UPLOAD_MB} MB; weightless "
                          "exports welcome — weights are never read)", type=["onnx"],
                          key="llm_onnx_upload")
    if up is None:
        return None
    data = up.getvalue()
    return arch_from_onnx(_upload_digest(data), data)


def serving_engines() -> list[str]:
    """The runtimes that are serving engines (an ``ExecutionProfile`` with ``serving``)."""
    from roofcast.predictor.runtimes import get_runtime

    usable, _ = state.runtimes()
    return [name for name, _kinds, _ in usable if get_runtime(name).serving is not None]


def run_controls(arch: LLMArch) -> tuple[list[str], dict]:
    """Devices, lengths, batching, dtypes and engine; the devices and ``roofcast.llm``'s
    keywords."""
    s = st.session_state
    ids = state.catalog()["id"].tolist()
    if "llm_devices" not in s:
        s["llm_devices"] = [d for d in DEFAULT_DEVICES if d in ids]
    labels = state.device_labels()
    devices = st.multiselect("Devices", ids, key="llm_devices", format_func=labels.__getitem__)
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        input_tokens = st.number_input(
            "Input tokens", min_value=1, max_value=MAX_TOKENS, value=512, step=128,
            key="llm_input", help=f"prompt length; the model's context is {arch.max_context}")
        output_tokens = st.number_input("Output tokens", min_value=1, max_value=MAX_TOKENS,
                                        value=128, step=64, key="llm_output")
    with c2:
        batching = st.radio("Batching", BATCHING, key="llm_batching",
                            help="static: requests start and finish together; concurrency: "
                                 "continuous batching with that many requests in flight")
        count = st.number_input("Requests", min_value=1, max_value=state.MAX_BATCH, value=1,
                                step=1, key="llm_count", disabled=batching == BATCHING[2])
    with c3:
        weights = st.selectbox("Weights", WEIGHT_DTYPES, index=WEIGHT_DTYPES.index("fp16"),
                               key="llm_weights", help="below 16 bits: weight-only quantisation")
        kv = st.selectbox("KV cache", (None, *KV_DTYPES), key="llm_kv",
                          format_func=lambda d: "as activations" if d is None else d)
        activations = st.selectbox("Activations", ACTIVATION_DTYPES,
                                   index=ACTIVATION_DTYPES.index("fp16"), key="llm_activations")
    with c4:
        engine = st.selectbox("Engine", (DEFAULT_ENGINE, *serving_engines()), key="llm_engine")
        choices = state.estimator_choices()
        if s.get("llm_estimator") not in choices:
            s["llm_estimator"] = SERVING_ESTIMATOR if SERVING_ESTIMATOR in choices else choices[0]
        estimator = st.selectbox("Estimator", choices, key="llm_estimator",
                                 help=f"kernel-time estimator ({SERVING_ESTIMATOR}: each "
                                      "engine's own kernel model, engine-tables for vllm, "
                                      "tensorrt-llm and sglang)")
    options = {"input_tokens": int(input_tokens), "output_tokens": int(output_tokens),
               "weights": weights, "kv_cache": kv, "activations": activations,
               "runtime": None if engine == DEFAULT_ENGINE else engine, "estimator": estimator}
    if batching == BATCHING[0]:
        options["batch"] = int(count)
    else:
        options["concurrency"] = "max" if batching == BATCHING[2] else int(count)
    return devices, options


def metric_text(key: str, value: float) -> str:
    """A metric tile's value in human units: times (``*_ms`` columns) through
    ``charts.fmt_time`` (15.18 s, 81.72 ms, 532.1 µs), rates with thousands separators; a dash
    where nothing was predicted (the model does not fit)."""
    if value is None or not math.isfinite(value):
        return NOT_PREDICTED
    if key.endswith("_ms"):
        return charts.fmt_time(value / 1e3)
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def device_metrics(df: pd.DataFrame) -> None:
    """Per device: TTFT, TPOT, end-to-end latency and output tokens/s as metrics (value, with
    the interval in the help; a dash, explained, where the model does not fit)."""
    for row in df.to_dict("records"):
        if row["fits"]:
            st.markdown(f"**{row['device']}** · engine {row['runtime']} · batch {row['batch']} "
                        f"(largest that fits: {row['max_batch']})")
        else:
            st.markdown(f"**{row['device']}** · engine {row['runtime']} · does not fit: "
                        f"{row['memory_GiB']:.4g} GiB needed, {row['capacity_GiB']:.4g} GiB "
                        "there")
            st.caption(f"{NOT_PREDICTED} = not predicted, the model does not fit on "
                       f"{row['device']}; the notes say how many devices it needs")
        cols = st.columns(len(METRIC_LABELS))
        for col, (key, label) in zip(cols, METRIC_LABELS.items(), strict=True):
            lower, upper = row[f"{key}_lower"], row[f"{key}_upper"]
            col.metric(label, metric_text(key, row[key]),
                       help=f"interval {metric_text(key, lower)} – {metric_text(key, upper)}"
                       if row["fits"] else "not predicted: the model does not fit")


def render() -> None:
    controls.page_header("llm", "LLM serving",
                         "Prefill and decode with a KV cache: time to first token, time per "
                         "output token, tokens/s and memory fit of a decoder-only LLM served "
                         "by an engine, on each device.")
    try:
        arch = model_picker()
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    st.session_state["llm_label"] = "" if arch is None else arch.name  # for the sidebar
    if arch is None:
        st.info("Upload a file, or pick a bundled config.")
        return
    _arch_caption(arch)
    devices, options = run_controls(arch)
    if not devices:
        st.info("Pick at least one device.")
        return
    key = tuple(sorted(options.items(), key=lambda kv: kv[0]))
    df, failed = _predictions(arch, devices, key)
    if df is None:
        return
    device_metrics(df)
    _notes(df)
    _sweep_charts(arch, [d for d in devices if d not in failed], key, options)
    st.plotly_chart(charts.llm_memory_bars(df), width="stretch")
    _table(df)
    rate_section(arch, [d for d in devices if d not in failed], options)


def _arch_caption(arch: LLMArch) -> None:
    """The model's size and shape in one line."""
    st.caption(f"**{arch.name}**: {arch.params / 1e9:.4g} B parameters "
               f"({arch.active_params / 1e9:.4g} B active), {arch.n_layers} layers, "
               f"{arch.n_heads} heads / {arch.n_kv_heads} KV heads of {arch.head_dim}, "
               f"context {arch.max_context} tokens")


def _predictions(arch: LLMArch, devices: list[str],
                 key: tuple) -> tuple[pd.DataFrame | None, list[str]]:
    """One row per device with the speedup over the first (None when none was predicted), and
    the devices that failed (each error shown)."""
    frames, failed = [], []
    for device in devices:
        try:
            frames.append(predict_rows(arch, device, key))
        except state.USER_ERRORS as exc:
            failed.append(device)
            st.error(f"{device}: {wording.in_app_words(str(exc))}", icon=":material/error:")
    if not frames:
        return None, failed
    df = pd.concat(frames, ignore_index=True)
    base = float(df["output_tokens_per_s"].iloc[0])
    df["speedup"] = df["output_tokens_per_s"] / base if base > 0 else float("nan")
    return df, failed


def _notes(df: pd.DataFrame) -> None:
    """Every device's notes in an expander (open when the model does not fit somewhere)."""
    notes = [f"**{r['device']}**: {n}" for r in df.to_dict("records")
             for n in r["notes"]]
    if notes:
        with st.expander(f"Notes ({len(notes)})", expanded=not df["fits"].all()):
            st.markdown("\n".join(f"- {n}" for n in notes))


def _sweep_charts(arch: LLMArch, ok: list[str], key: tuple, options: dict) -> None:
    """Output tokens/s over the batch and the latency-throughput frontier (``sweep``)."""
    try:
        table = sweep(arch, tuple(ok), key)
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    shown = table[table["fits"]]  # a batch that does not fit has no metrics
    latency = st.radio("Frontier latency", tuple(charts.LLM_LATENCIES), horizontal=True,
                       key="llm_frontier_latency",
                       format_func=lambda c: "TPOT" if c == "tpot_ms" else "end-to-end")
    what = "concurrency" if "concurrency" in options else "batch"
    left, right = st.columns(2)
    left.plotly_chart(charts.llm_throughput_vs_batch(shown, what), width="stretch")
    right.plotly_chart(charts.llm_frontier(shown, latency, what), width="stretch")


def _table(df: pd.DataFrame) -> None:
    """The full table, its CSV download, and what its columns mean."""
    show = df.drop(columns=["notes"])
    st.dataframe(show, hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.4g")
                                for c in show.columns if show[c].dtype.kind == "f"})
    st.download_button("Download CSV", show.to_csv(index=False).encode(),
                       file_name="roofcast_llm.csv", mime="text/csv")
    st.caption("Speedup: output tokens/s over the first device's. Intervals: the engine "
               "calibration's. $ per million output tokens and tokens per joule are empty "
               "where the catalog has no price or power figure (never invented).")


if __name__ == "__main__":
    render()
