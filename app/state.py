"""Shared state of the Streamlit app and the cached calls into the library.

Session state holds what every page shares: the model reference (``zoo:<name>`` or
``upload:<sha256>``, the bytes under ``upload_bytes``), the dim bindings, the batch size, the
device and the run configuration; widgets write into these keys through :func:`persistent` so a
value survives switching pages. Graph imports, predictions, comparisons and the catalog are
cached with ``st.cache_data`` (keyed by model reference, dims, device, config, estimator and
learned-model version), trained models with ``st.cache_resource``. Uploaded models are
imported and predicted in ``app.worker``'s limited child process; zoo models in-process.
Rationale: docs/design/app.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from roofcast.app import wording, worker
from roofcast.app.worker import run_limited
from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.graph_import import import_model
from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.types import Graph
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.training_data import zoo
from roofcast.training_data.errors import MeasurementError

#: every error a user can cause; pages show them with ``st.error``, never a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (ModelImportError, HardwareSpecError,
                                                PredictionError, MeasurementError)
MAX_UPLOAD_MB = 200
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 2**20
MAX_BATCH = 65536
DEFAULT_MODEL = "zoo:resnet50"
DEFAULT_DEVICE = "h100-sxm"

DEFAULTS: dict[str, Any] = {
    "model_ref": DEFAULT_MODEL,
    "upload_name": None,
    "upload_bytes": None,
    "dims": {},          # symbolic dim -> size, every dim but the batch dim
    "batch": 1,
    "device": DEFAULT_DEVICE,
    "precision": "fp32",
    "mode": "infer",
    "optimizer": "adam",
    "fusion": False,
    "inter_op": False,
    "estimator": GRAPH_ESTIMATOR,
    "threads": None,
    "runtime": None,     # None: each device kind's default runtime; else a runtime name
}


def init_state(page: str | None = "other") -> None:
    """Fill missing session-state keys with their defaults (called by every page with its
    name, which scopes its widget keys: :func:`widget_key`)."""
    if page is not None:
        st.session_state["_page"] = page
    for key, value in DEFAULTS.items():
        if key not in st.session_state:
            st.session_state[key] = dict(value) if isinstance(value, dict) else value
    if "_dims_for" not in st.session_state:
        set_model(st.session_state["model_ref"])


def widget_key(key: str) -> str:
    """The widget key of session value ``key`` on the current page: ``_w_<page>_<key>``.

    Per page, because a widget of the same key on another page is another widget to Streamlit:
    on a page switch the old page's widget value would not carry over and the new widget would
    start from its default (the first option) instead of the shared value.
    """
    return f"_w_{st.session_state.get('_page', 'app')}_{key}"


def persistent(widget: Callable[..., Any], label: str, key: str, **kwargs: Any) -> Any:
    """Render ``widget`` bound to the session-state value ``key`` (kept across pages)."""
    wkey = widget_key(key)
    if wkey not in st.session_state:
        st.session_state[wkey] = st.session_state[key]
    value = widget(label, key=wkey, **kwargs)
    st.session_state[key] = value
    return value


# ----------------------------------------------------------------------------- model
def model_label(ref: str) -> str:
    """Name of a model reference: the zoo name or the uploaded file's stem."""
    if ref.startswith("zoo:"):
        return ref.removeprefix("zoo:")
    return Path(st.session_state.get("upload_name") or "uploaded model").stem


def default_dims(ref: str) -> dict[str, int]:
    """Zoo models: the dims they were exported with (batch excluded); uploads: none bound."""
    if not ref.startswith("zoo:"):
        return {}
    meta = zoo.model_meta(ref.removeprefix("zoo:"))
    return {k: int(v) for k, v in meta.get("export_dims", {}).items() if k != "batch"}


def set_model(ref: str, *, keep_batch: bool = True) -> None:
    """Select a model and reset its dim bindings to the defaults."""
    st.session_state["model_ref"] = ref
    st.session_state["dims"] = default_dims(ref)
    st.session_state["_dims_for"] = ref
    for key in [k for k in st.session_state if str(k).startswith("_w_dim_")]:
        del st.session_state[key]
    if not keep_batch:
        st.session_state["batch"] = 1


def set_upload(name: str, data: bytes) -> str:
    """Remember an uploaded model (bytes checked against the size limit) and select it."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise ModelImportError(
            f"{name} is {len(data) / 2**20:.1f} MB, over the upload limit of {MAX_UPLOAD_MB} MB: "
            "export the model with its weights as external data (roofcast never reads weights) "
            "or use `roofcast predict FILE` on the command line")
    digest = hashlib.sha256(data).hexdigest()
    ref = f"upload:{digest}"
    _import_cached(ref, (), Path(name).stem, data)  # a bad file raises here and changes nothing
    st.session_state["upload_name"] = name
    st.session_state["upload_bytes"] = data
    if st.session_state.get("model_ref") != ref:
        set_model(ref)
    return ref


@st.cache_data(max_entries=64, show_spinner="Importing the model…")
def _import_cached(ref: str, dims: tuple[tuple[str, int], ...], name: str,
                   _data: bytes | None) -> Graph:
    if ref.startswith("upload:"):
        return run_limited(worker.import_upload, _data, dict(dims), name, MAX_UPLOAD_BYTES)
    return import_model(zoo.model_path(ref.removeprefix("zoo:")), dims=dict(dims), name=name,
                        max_bytes=MAX_UPLOAD_BYTES)


def upload_bytes(ref: str) -> bytes | None:
    """The uploaded file's bytes for an ``upload:`` reference (None for a zoo model)."""
    if not ref.startswith("upload:"):
        return None
    data = st.session_state.get("upload_bytes")
    if data is None:
        raise ModelImportError("the uploaded model is no longer in this session: upload it "
                               "again on the Model page")
    return data


def load_graph(ref: str, dims: Mapping[str, int]) -> Graph:
    """The imported graph of ``ref`` with ``dims`` (cached)."""
    return _import_cached(ref, tuple(sorted(dims.items())), model_label(ref), upload_bytes(ref))


@st.cache_data(max_entries=64, show_spinner=False)
def _symbolic_dims_cached(ref: str, name: str, _data: bytes | None) -> tuple[str, ...]:
    return tuple(_import_cached(ref, (), name, _data).unbound_dims)


def symbolic_dims(ref: str) -> tuple[str, ...]:
    """The model's symbolic dim names (those unbound when importing with no bindings); cached on
    its own so a rerun does not unpickle a whole graph to learn them."""
    return _symbolic_dims_cached(ref, model_label(ref), upload_bytes(ref))


@st.cache_data(max_entries=64, show_spinner=False)
def _gaps_cached(ref: str, dims: tuple, name: str, _data: bytes | None) -> tuple:
    graph = _import_cached(ref, dims, name, _data)
    return tuple(graph.unbound_dims), dict(graph.unresolved), dict(graph.unsupported)


def require_complete(config: RunConfig) -> None:
    """PredictionError in the app's words (``wording.incomplete_message``) when the session's
    model at ``config``'s batch has work that cannot be costed; checked before predicting, so
    the user reads about the Model page, not about command-line flags. The gaps are cached on
    their own (no whole graph is unpickled for them)."""
    ref, dims, name, data = _model_key(config)
    message = wording.incomplete_message(name, *_gaps_cached(ref, dims, name, data))
    if message is not None:
        raise PredictionError(message)


def batch_dim(ref: str) -> str | None:
    """The model's batch dim: ``batch`` or the first symbolic dim whose name contains it."""
    names = symbolic_dims(ref)
    if "batch" in names:
        return "batch"
    return next((n for n in names if "batch" in n.lower()), None)


def import_dims(ref: str | None = None, batch: int | None = None) -> dict[str, int]:
    """Dims passed to the importer: the bound dims plus the batch on the model's batch dim."""
    ref = ref or st.session_state["model_ref"]
    dims = {k: v for k, v in st.session_state["dims"].items() if v is not None}
    bdim = batch_dim(ref)
    if bdim is not None:
        dims[bdim] = int(batch if batch is not None else st.session_state["batch"])
    return dims


def current_graph(batch: int | None = None) -> Graph:
    ref = st.session_state["model_ref"]
    return load_graph(ref, import_dims(ref, batch))


# ----------------------------------------------------------------------------- config
def run_config(**changes: Any) -> RunConfig:
    """The RunConfig of the session state (``changes`` override fields, e.g. batch=8)."""
    s = st.session_state
    batch = int(changes.pop("batch", s["batch"]))
    dims = {k: v for k, v in s["dims"].items() if v is not None and ":" not in k}
    fields = {"precision": s["precision"], "mode": s["mode"], "optimizer": s["optimizer"],
              "fusion": s["fusion"], "inter_op": bool(s["inter_op"]),
              "threads": s["threads"], "runtime": s["runtime"], **changes}
    return RunConfig(dims={**dims, "batch": batch}, **fields)


def config_key(config: RunConfig) -> tuple:
    return (tuple(sorted(config.dims.items())), config.precision, config.mode, config.threads,
            config.inter_op, config.fusion, config.optimizer, config.overlap, config.runtime)


def estimator_choices() -> tuple[str, ...]:
    """Every estimator the predictor accepts (analytical, then learned when present)."""
    from roofcast.predictor import estimator_registry as estimators

    names = getattr(estimators, "estimator_names", None)
    return tuple(names()) if names else tuple(estimators.ESTIMATORS)


def learned_version(estimator: str) -> str:
    """Cache-key part for learned estimators: the model folder and its metadata time."""
    from roofcast.predictor import estimator_registry as estimators

    if estimator in estimators.ESTIMATORS:
        return ""
    try:
        from roofcast.predictor.learned.estimator import model_folder
        from roofcast.predictor.learned.persistence import METADATA
    except ImportError:
        return ""
    meta = model_folder() / METADATA
    return f"{meta}:{meta.stat().st_mtime_ns if meta.is_file() else 0}"


def device_spec(device: str, changes: tuple[tuple[str, float], ...] = ()):
    """A catalog device, or a what-if device derived from it with scale/override ``changes``."""
    from roofcast.hw_catalog import derive, get_device

    base = get_device(device)
    return derive(base, **dict(changes)) if changes else base


@st.cache_data(max_entries=256, show_spinner="Predicting…")
def _predict_cached(ref: str, dims: tuple, name: str, device: str, changes: tuple, cfg: tuple,
                    estimator: str, learned: str, devices: str, _data: bytes | None):
    from roofcast.predictor.simulate import predict_graph

    del devices  # part of the cache key only
    graph = _import_cached(ref, dims, name, _data)
    config = _config_from_key(cfg)
    if ref.startswith("upload:"):
        return run_limited(worker.predict_upload, graph, device, changes, config, estimator)
    return predict_graph(graph, device_spec(device, changes), config,
                         _estimator(estimator, learned))


@st.cache_resource(max_entries=8, show_spinner=False)
def _estimator(name: str, learned: str) -> Any:
    """The estimator object of ``name`` (a learned one with its model loaded), kept across
    predictions: each slider move predicts a new what-if device, and rebuilding a learned
    estimator re-reads its boosters. ``learned``: the model version (``learned_version``), so
    a retrained or adopted model builds a new one."""
    from roofcast.predictor.estimator_registry import as_estimator

    del learned  # part of the cache key only
    return as_estimator(name)


@st.cache_data(max_entries=64, show_spinner="Predicting…")
def _compare_cached(ref: str, dims: tuple, name: str, devices: tuple[str, ...], baseline: str,
                    cfg: tuple, estimator: str, learned: str, stamp: str, _data: bytes | None):
    from roofcast.predictor.compare import compare_devices

    del learned, stamp  # part of the cache key only
    graph = _import_cached(ref, dims, name, _data)
    if ref.startswith("upload:"):
        return run_limited(worker.compare_upload, graph, list(devices), _config_from_key(cfg),
                           estimator, baseline)
    return compare_devices(lambda _batch: graph, list(devices), _config_from_key(cfg), estimator,
                           baseline=baseline)


def _config_from_key(cfg: tuple) -> RunConfig:
    dims, precision, mode, threads, inter_op, fusion, optimizer, overlap, runtime = cfg
    return RunConfig(dims=dict(dims), precision=precision, mode=mode, threads=threads,
                     inter_op=inter_op, fusion=fusion, optimizer=optimizer, overlap=overlap,
                     runtime=runtime)


def _model_key(config: RunConfig) -> tuple[str, tuple, str, bytes | None]:
    """(reference, import dims, name, upload bytes) of the session's model at ``config``'s batch:
    the leading arguments of the cached calls."""
    ref = st.session_state["model_ref"]
    return (ref, tuple(sorted(import_dims(ref, config.batch).items())), model_label(ref),
            upload_bytes(ref))


def predict(device: str | None = None, *, changes: Mapping[str, float] | None = None,
            estimator: str | None = None, **config_changes: Any):
    """``predict_graph`` for the session's model and config (cached); ``device`` defaults to the
    session's device, ``changes`` make it a what-if device, keyword args override the config."""
    config = run_config(**config_changes)
    require_complete(config)
    ref, dims, name, data = _model_key(config)
    est = estimator or st.session_state["estimator"]
    return _predict_cached(ref, dims, name, device or st.session_state["device"],
                           tuple(sorted((changes or {}).items())), config_key(config), est,
                           learned_version(est), user_folder_stamp(), data)


def compare(devices: list[str], baseline: str):
    """``predictor.compare.compare_devices`` for the session's model, config and estimator on
    catalog ``devices`` (cached): one row per device. The session's runtime (None: each
    device's default) must run on every device."""
    from roofcast.predictor.runtimes import resolve_runtime

    config = run_config()
    require_complete(config)
    for device in devices:  # a chosen runtime is refused on a device kind it does not run on
        resolve_runtime(config.runtime, device_spec(device).kind)
    ref, dims, name, data = _model_key(config)
    est = st.session_state["estimator"]
    return _compare_cached(ref, dims, name, tuple(devices), baseline, config_key(config), est,
                           learned_version(est), user_folder_stamp(), data)


# ----------------------------------------------------------------------------- catalog
@st.cache_data(show_spinner=False)
def _devices(folder: str, stamp: str) -> pd.DataFrame:
    from roofcast.hw_catalog import list_devices

    del folder, stamp  # cache key only
    return pd.DataFrame([{"id": s.id, "name": s.name, "kind": s.kind, "vendor": s.vendor,
                          "origin": s.origin} for s in list_devices()],
                        columns=["id", "name", "kind", "vendor", "origin"])


def catalog() -> pd.DataFrame:
    """id, name, kind, vendor, origin of every catalog device (built-in and user folder);
    cached, keyed by the user folder's files so a newly saved device shows at once."""
    from roofcast.hw_catalog import user_dir

    return _devices(str(user_dir()), user_folder_stamp())


def user_folder_stamp() -> str:
    """Names and modification times of the user device files (part of cache keys, so an edited
    or newly saved device is never served from a stale cache)."""
    from roofcast.hw_catalog import user_dir

    return folder_stamp(user_dir())


def folder_stamp(folder: Path) -> str:
    """Names, modification times and sizes of the TOML files in ``folder`` (a cache-key part)."""
    if not folder.is_dir():
        return str(folder)
    return f"{folder}|" + ";".join(f"{p.name}:{p.lstat().st_mtime_ns}:{p.lstat().st_size}"
                                   for p in sorted(folder.glob("*.toml")))


def device_label(device_id: str) -> str:
    """``id — name`` of a catalog device (the id alone when it is not in the catalog)."""
    return device_labels().get(device_id, device_id)


def device_labels() -> dict[str, str]:
    table = catalog()
    return {i: f"{i} — {n}" for i, n in zip(table["id"], table["name"], strict=True)}


def device_select(label: str, key: str = "device", **kwargs: Any) -> str:
    """A selectbox over the catalog bound to the session key ``key``."""
    labels = device_labels()
    ids = list(labels)
    if st.session_state.get(key) not in ids:
        st.session_state[key] = DEFAULT_DEVICE if DEFAULT_DEVICE in ids else ids[0]
        st.session_state.pop(widget_key(key), None)
    return persistent(st.selectbox, label, key, options=ids, format_func=labels.__getitem__,
                      **kwargs)


# ----------------------------------------------------------------------------- runtimes
@st.cache_data(show_spinner=False)
def _runtimes(folder: str, stamp: str) -> tuple[tuple[tuple[str, tuple[str, ...], str], ...],
                                                tuple[str, ...]]:
    from roofcast.predictor.runtimes import get_runtime, runtime_names

    del folder, stamp  # cache key only
    good, bad = [], []
    for name in runtime_names():
        try:
            prof = get_runtime(name)
        except PredictionError as exc:
            bad.append(str(exc))
            continue
        good.append((prof.name, prof.device_kinds, prof.description))
    return tuple(good), tuple(bad)


def runtimes() -> tuple[tuple[tuple[str, tuple[str, ...], str], ...], tuple[str, ...]]:
    """((name, device kinds, description) of every usable runtime profile, the problems of the
    user profiles that cannot be used); cached, keyed by the user runtime folder's files so an
    edited profile shows at once. A broken user folder (a profile shadowing a built-in) raises
    PredictionError."""
    from roofcast.predictor.runtimes import user_dir

    return _runtimes(str(user_dir()), folder_stamp(user_dir()))


def runtime_for(device_kind: str) -> str:
    """The runtime a prediction on a device of ``device_kind`` models: the session's choice,
    or the kind's default when it made none."""
    from roofcast.predictor.runtimes import default_runtime_name

    return st.session_state["runtime"] or default_runtime_name(device_kind)


def runtime_description(name: str) -> str:
    """The one-line description of runtime ``name`` ("" when it is not among the usable ones)."""
    return next((d for n, _, d in runtimes()[0] if n == name), "")


# ----------------------------------------------------------------------------- learned
@st.cache_resource(show_spinner=False)
def learned_model(folder: str, stamp: str):
    """A trained learned model loaded once per folder and version (shared across sessions)."""
    from roofcast.predictor.learned.persistence import load

    del stamp
    return load(folder)


def show_error(exc: BaseException) -> None:
    """A user error as a message on the page (never a traceback), in the app's words: the
    library's advice that names command-line flags names the app's controls instead."""
    st.error(wording.in_app_words(str(exc)), icon=":material/error:")

