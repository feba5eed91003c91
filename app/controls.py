"""Widgets shared by several pages: the page header and the run configuration (batch, precision,
mode, runtime, ...). Built on ``app.state`` (which never imports this module)."""

from __future__ import annotations

import streamlit as st

from roofcast.app import state
from roofcast.predictor.config import MODES, OPTIMIZERS, PRECISIONS

MODE_LABELS = {"infer": "inference", "train": "training step"}
FUSION_CHOICES: tuple[bool | None, ...] = (None, True, False)


def page_header(page: str, title: str, caption: str, *, devices: bool = False) -> None:
    """Open a page: ``state.init_state`` for ``page``, its title and a caption in which
    ``{model}`` becomes the model's name and ``{config}`` the run configuration summary (with
    the session device's runtime; ``devices``: a page over several devices, each with its
    kind's default runtime unless one was chosen)."""
    state.init_state(page)
    st.title(title)
    device = None if devices else st.session_state["device"]
    st.caption(caption.format(model=state.model_label(st.session_state["model_ref"]),
                              config=config_summary(device)))


def device_kind(device_id: str) -> str:
    table = state.catalog()
    row = table[table["id"] == device_id]
    return str(row["kind"].iloc[0]) if len(row) else "gpu"


def runtime_control(device_id: str) -> str:
    """The "Runtime" selector for a device: the runtimes that run on its kind, the kind's
    default first selected and marked; its one-line description under it. The session keeps
    None for the default (so a comparison over devices of several kinds gives each its own
    default) and the name otherwise. Returns the runtime in force."""
    from roofcast.predictor.runtimes import default_runtime_name

    s = st.session_state
    kind = device_kind(device_id)
    usable, problems = state.runtimes()
    names = [n for n, kinds, _ in usable if kind in kinds]
    default = default_runtime_name(kind)
    wkey = state.widget_key("runtime")
    if st.session_state.get(wkey) not in names:  # first shown, or the device's kind changed
        current = state.runtime_for(kind)
        st.session_state[wkey] = current if current in names else default
    name = st.selectbox("Runtime", names, key=wkey,
                        format_func=lambda n: f"{n} (default on a {kind})" if n == default else n,
                        help="the execution runtime modelled: which kernels it launches, its "
                             "per-kernel dispatch floor and math defaults")
    s["runtime"] = None if name == default else name
    st.caption(state.runtime_description(name))
    for problem in problems:
        st.warning(f"A user runtime profile is not used: {problem}", icon=":material/warning:")
    return name


def fusion_label(choice: bool | None) -> str:
    return {None: "runtime default", True: "on", False: "off"}[choice]


def config_controls(device_key: str | None = "device") -> None:
    """Device (optional), runtime, batch, precision, mode, optimizer, estimator, threads,
    fusion, inter-op; every value lands in the session state shared by the pages."""
    s = st.session_state
    ref = s["model_ref"]
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        if device_key:
            state.device_select("Device", key=device_key)
            runtime_control(s[device_key])
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
        state.persistent(st.selectbox, "Fusion", "fusion", options=FUSION_CHOICES,
                         format_func=fusion_label,
                         help="the runtime's graph-optimiser fusions: its own default, forced "
                              "on or forced off")
        state.persistent(st.toggle, "Inter-op parallelism", "inter_op",
                         help="independent ops run concurrently: critical-path time")
        if device_kind(s[device_key or "device"]) == "cpu":
            state.persistent(st.number_input, "CPU threads (empty = all cores)", "threads",
                             min_value=1, max_value=1024, step=1)
        else:
            s["threads"] = None


def runtime_words(device_id: str | None = None) -> str:
    """The runtime in force, for captions: the session's choice, else ``device_id``'s kind's
    default (with no device: each device's default)."""
    s = st.session_state
    if s["runtime"] is not None:
        return f"runtime {s['runtime']}"
    if device_id is None:
        return "each device's default runtime"
    return f"runtime {state.runtime_for(device_kind(device_id))}"


def config_summary(device_id: str | None = None) -> str:
    """The run configuration in words: batch, precision, mode, runtime and estimator modelled,
    then the options that are on."""
    s = st.session_state
    parts = [f"batch {s['batch']}", s["precision"], MODE_LABELS[s["mode"]],
             runtime_words(device_id), f"estimator {s['estimator']}"]
    if s["fusion"] is not None:
        parts.append(f"fusion {fusion_label(s['fusion'])}")
    if s["inter_op"]:
        parts.append("inter-op")
    if s["threads"]:
        parts.append(f"{s['threads']} threads")
    return " · ".join(parts)


def modelled_caption(kind: str, estimator: str) -> None:
    """What the numbers on the page model: the runtime on a device of ``kind`` (with its
    one-line description) and the estimator."""
    name = state.runtime_for(kind)
    st.caption(f"Modelled: runtime **{name}** ({state.runtime_description(name)}) · estimator "
               f"**{estimator}**")
