"""Step times of prefill and decode on one or many devices (uncalibrated kernel sums).

``time_steps`` builds every step's rows (``kernels.steps_workload``) and times them on all
devices in one ``predictor.simulate.evaluate`` call. Step time (s) = sum of ``time_s x count``
+ the engine's ``serving.step_overhead_us``, kernels timed by the engine's ``kernel_estimator``
when the run names the serving default (``step_estimator``); a ``Dequantize`` / ``KvConvert``
row overlapping a kernel makes it ``max(kernel, its compute)`` on the devices its ``applies``
names; a decode step off the powers of two is timed at its corners and interpolated
(``ladder``: the kernel model is monotone there, not between).
``request_model_times``: a static batch's prefill and its ``M - 1`` decode steps, timed at
``DECODE_POINTS`` contexts and interpolated linearly (decode is near-affine in the context).
Design notes: docs/design/decoder.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.dtypes import peak_key
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.config import RunConfig
from roofcast.predictor.engine_tables.estimator import LABEL as ENGINE_TABLE_LABEL
from roofcast.predictor.engine_tables.estimator import RATIO_LABEL as ENGINE_RATIO_LABEL
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import as_estimator
from roofcast.predictor.llm import ladder
from roofcast.predictor.llm.kernels import MoeRouting, Segment, steps_workload
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.runtimes import ExecutionProfile, resolve_engine
from roofcast.predictor.simulate import evaluate

DECODE_POINTS = 3


@dataclass(frozen=True)
class Step:
    """One engine step to time: a ``label`` and its ``segments``."""

    label: str
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class StepTimes:
    """Times of ``labels`` (steps) on ``devices``: arrays (steps, devices) in seconds.
    ``table``: the evaluated rows (device-major) with ``kernel_s`` = folded time x count."""

    labels: tuple[str, ...]
    devices: tuple[str, ...]
    time_s: np.ndarray
    lower_s: np.ndarray
    upper_s: np.ndarray
    table: pd.DataFrame = field(repr=False, compare=False)
    notes: tuple[str, ...] = ()
    #: (step, device) -> positions of its rows in ``table``.
    rows_of: dict = field(default_factory=dict, repr=False, compare=False)

    def of(self, label: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(time, lower, upper) per device of step ``label``."""
        i = self.labels.index(label)
        return self.time_s[i], self.lower_s[i], self.upper_s[i]

    def kernels(self, label: str, device: str) -> pd.DataFrame:
        """The rows of step ``label`` on ``device``."""
        return self.table.iloc[self.rows_of[(label, device)]].reset_index(drop=True)

    def device_rows(self, device: str, labels: Sequence[str] | None = None) -> pd.DataFrame:
        """The rows of ``labels`` (None: every step) on ``device``."""
        pos = [p for lb in (self.labels if labels is None else labels)
               for p in self.rows_of[(lb, device)]]
        return self.table.iloc[pos]


def engine_profile(runtime: str | ExecutionProfile | None, hw: HardwareSpec) -> ExecutionProfile:
    """The serving engine's profile on ``hw``: ``runtime``, else the device kind's default
    serving engine; refused (naming the engines that run there) when it does not run on the
    device's kind or vendor (``runtimes.catalog.resolve_engine``; a plain runtime without a
    ``[serving]`` table serves on the defaults)."""
    return resolve_engine(runtime, hw, allow_plain=True)


#: ``applies`` condition of an overlapping row -> whether a device meets it (fp8 units given).
APPLIES: dict[str, object] = {
    "": lambda fp8: np.ones_like(fp8, dtype=bool),
    "fp8-units": lambda fp8: fp8,
    "no-fp8-units": lambda fp8: ~fp8,
}


def has_fp8_units(hws: Sequence[HardwareSpec]) -> np.ndarray:
    """Per device: whether it has fp8 matrix units (and so fp8 convert instructions)."""
    return np.array([hw.peak_flops_or_none("matrix", "fp8") is not None for hw in hws], bool)


def fold_dequant(table: pd.DataFrame, n_rows: int, n_dev: int,
                 fp8_units: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-row (devices, rows) arrays of time/lower/upper with dequant and KV-conversion rows
    folded into the kernels they overlap (module docstring); ``fp8_units``: per device (None:
    none has them), for the rows' ``applies`` conditions."""
    out = {c: table[c].to_numpy(float).reshape(n_dev, n_rows).copy()
           for c in ("time_s", "lower_s", "upper_s")}
    first = table.iloc[:n_rows]
    deq = np.flatnonzero(first["overlaps"].to_numpy(object) != "")
    if len(deq):
        pos = {k: i for i, k in enumerate(first["key"])}
        partner = np.array([pos[k] for k in first["overlaps"].iloc[deq]])
        comp = table["compute_s"].to_numpy(float).reshape(n_dev, n_rows)[:, deq]
        units = [peak_key("matrix", d) for d in first["dtype"].to_numpy(object)[partner]]
        fell = (table["peak_dtype"].to_numpy(object).reshape(n_dev, n_rows)[:, partner]
                != np.array(units, dtype=object))
        only = first["fallback_only"].to_numpy(bool)[deq]
        comp = np.where(only & ~fell, 0.0, comp)
        if "applies" in first:
            fp8 = np.zeros(n_dev, bool) if fp8_units is None else np.asarray(fp8_units, bool)
            conds = first["applies"].to_numpy(object)[deq]
            meets = np.stack([APPLIES[c](fp8) for c in conds], axis=1)
            comp = np.where(meets, comp, 0.0)
        for c in out:
            for d in range(n_dev):
                np.maximum.at(out[c][d], partner, comp[d])
            out[c][:, deq] = 0.0
    return out


def step_estimator(estimator: str | object | None, profile: ExecutionProfile) -> str | object:
    """The estimator an engine's steps are timed with: its ``serving.kernel_estimator`` (the
    kernel model trained on its own container's per-op tables) when ``estimator`` is None or the
    serving default's name ``SERVING_ESTIMATOR``, else ``estimator`` as given (an estimator
    object always: ``as_estimator(SERVING_ESTIMATOR)`` forces the default on any engine)."""
    own = profile.serving.kernel_estimator if profile.serving else ""
    if own and (estimator is None or estimator == SERVING_ESTIMATOR):
        return own
    return SERVING_ESTIMATOR if estimator is None else estimator


def time_steps(arch: LLMArch, hws: Sequence[HardwareSpec], steps: Sequence[Step],
               dtypes: TensorDtypes, profile: ExecutionProfile,
               estimator: str | object | None = SERVING_ESTIMATOR, *, ep: int = 1,
               moe: MoeRouting | None = None) -> StepTimes:
    """Time ``steps`` on ``hws`` in one ``evaluate`` call (module docstring); ``arch``, ``ep``
    and ``moe`` (expert load imbalance) as ``kernels.steps_workload`` takes them (one device's
    share under parallelism)."""
    if not steps:
        raise PredictionError("no steps to time")
    labels = tuple(s.label for s in steps)
    if len(set(labels)) != len(labels):
        raise PredictionError(f"step labels must be unique, got {labels}")
    timed, rungs = ladder.expand(steps)
    work = steps_workload(arch, [(s.label, s.segments) for s in timed], dtypes, profile, ep=ep,
                          moe=moe)
    specs = list(hws)
    est = as_estimator(step_estimator(estimator, profile))  # learned:NAME too
    table = evaluate(work, specs, RunConfig(runtime=profile), est, profile)
    n_rows, n_dev = len(work), len(specs)
    folded = fold_dequant(table, n_rows, n_dev, has_fp8_units(specs))
    count = work["count"].to_numpy(float)
    step_idx = pd.Index([s.label for s in timed]).get_indexer(work["step"])
    overhead = profile.serving.step_overhead_us * 1e-6 if profile.serving else 0.0
    sums = {}
    for c, arr in folded.items():
        per = np.zeros((len(timed), n_dev))
        for d in range(n_dev):
            per[:, d] = np.bincount(step_idx, weights=arr[d] * count, minlength=len(timed))
        sums[c] = ladder.combine(per, rungs) + overhead
    table = table.assign(kernel_s=folded["time_s"].reshape(-1) * np.tile(count, n_dev))
    notes = tuple(sorted({str(n) for n in table["peak_note"] if n}))
    devices = tuple(hw.id for hw in specs)
    table, rows_of = ladder.step_rows(table, step_idx, n_rows, devices, labels, rungs)
    return StepTimes(labels, devices, sums["time_s"], sums["lower_s"], sums["upper_s"], table,
                     notes, rows_of)


def measured_share_notes(rows: pd.DataFrame, runtime: str) -> tuple[str, ...]:
    """The share of one device's ``rows``' kernel time (``kernel_s``) that engine tables timed
    (``engine-tables``: the device's own, or an anchor's scaled by the model's ratio), as
    notes; none when no row came from them."""
    if "predictor" not in rows or not len(rows) or rows["kernel_s"].sum() <= 0:
        return ()
    labels = rows["predictor"].astype(str)
    k = rows["kernel_s"].to_numpy(float) / rows["kernel_s"].sum()
    notes = []
    own = (labels == ENGINE_TABLE_LABEL).to_numpy()
    if own.any():
        notes.append(f"{k[own].sum():.0%} of the step kernels' time read from {runtime}'s own "
                     "measured tables (aiconfigurator; engine-tables), the rest from the kernel "
                     "model")
    for label in sorted(set(labels[labels.str.startswith(ENGINE_RATIO_LABEL)])):
        hit = (labels == label).to_numpy()
        anchor = label[len(ENGINE_RATIO_LABEL):].strip(" ()")
        notes.append(f"{k[hit].sum():.0%} of the step kernels' time from {runtime}'s measured "
                     f"tables on {anchor}, scaled to this device by the kernel model's ratio "
                     "(engine-tables), the rest from the kernel model")
    return tuple(notes)


def decode_contexts(input_tokens: int, output_tokens: int) -> np.ndarray:
    """Contexts of the ``M - 1`` decode steps of a request: ``N + 1 .. N + M - 1`` (a
    request with one output token has none)."""
    return np.arange(input_tokens + 1, input_tokens + output_tokens, dtype=int)


def sample_contexts(contexts: np.ndarray, points: int = DECODE_POINTS) -> np.ndarray:
    """``points`` evenly spaced contexts over ``contexts`` (all of them when fewer)."""
    if len(contexts) <= points:
        return contexts
    return np.unique(np.round(np.linspace(contexts[0], contexts[-1], points)).astype(int))


@dataclass(frozen=True)
class RequestModelTimes:
    """Uncalibrated summed kernel times of one static batch of requests on one device.

    ``prefill_s``: the prefill of ``batch x N`` tokens (with the first token's LM head);
    ``contexts``: the sampled decode contexts, ``decode_step_s`` the step times there
    (arrays); ``decode_total_s``: the ``M - 1`` decode steps summed (linear interpolation
    between the samples); ``decode_mean_s`` = ``decode_total_s / (M - 1)`` (the step at
    context ``N + 1`` when ``M = 1``). ``*_lower_s``/``*_upper_s``: the estimator's interval.
    ``prefill_kernels``/``decode_kernels``: the rows of the prefill and of the first sampled
    decode step (``kernel_s`` = time x layers).
    """

    batch: int
    input_tokens: int
    output_tokens: int
    prefill_s: float
    contexts: np.ndarray
    decode_step_s: np.ndarray
    decode_total_s: float
    decode_mean_s: float
    prefill_lower_s: float = float("nan")
    prefill_upper_s: float = float("nan")
    decode_mean_lower_s: float = float("nan")
    decode_mean_upper_s: float = float("nan")
    prefill_kernels: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    decode_kernels: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    notes: tuple[str, ...] = ()

    def decode_at(self, context: float | np.ndarray) -> np.ndarray:
        """Decode step time at ``context`` (linear interpolation between the samples)."""
        return np.interp(context, self.contexts, self.decode_step_s)


def request_steps(batch: int, n: int, m: int, points: int = DECODE_POINTS
                  ) -> tuple[list[Step], np.ndarray]:
    """The prefill and sampled decode steps of a static batch, and the sampled contexts."""
    ctx = sample_contexts(decode_contexts(n, m), points)
    if len(ctx) == 0:
        ctx = np.array([n + 1])
    steps = [Step(f"b{batch}:prefill", (Segment(batch, n, n),))]
    steps += [Step(f"b{batch}:decode@{c}", (Segment(batch, 1, int(c)),)) for c in ctx]
    return steps, ctx


def _decode_sums(times: np.ndarray, ctx: np.ndarray, n: int, m: int) -> np.ndarray:
    """Sum of the ``M - 1`` interpolated decode steps per device (``times``: (points, dev))."""
    all_ctx = decode_contexts(n, m)
    if len(all_ctx) == 0:
        return np.zeros(times.shape[1])
    return np.array([np.interp(all_ctx, ctx, times[:, d]).sum() for d in range(times.shape[1])])


def collect_request_times(st: StepTimes, batch: int, ctx: np.ndarray, n: int, m: int,
                          device: int, with_kernels: bool = True) -> RequestModelTimes:
    """``RequestModelTimes`` of device index ``device`` from timed ``request_steps``
    (``with_kernels`` False: no kernel tables)."""
    labels = [f"b{batch}:decode@{c}" for c in ctx]
    idx = [st.labels.index(lb) for lb in labels]
    pre = st.labels.index(f"b{batch}:prefill")
    steps = max(m - 1, 1)
    sums = {c: _decode_sums(getattr(st, c)[idx], ctx, n, m)[device]
            for c in ("time_s", "lower_s", "upper_s")}
    mean = {c: (sums[c] / steps if m > 1 else getattr(st, c)[idx[0], device])
            for c in sums}
    dev = st.devices[device]
    return RequestModelTimes(
        batch=batch, input_tokens=n, output_tokens=m, prefill_s=float(st.time_s[pre, device]),
        contexts=ctx, decode_step_s=st.time_s[idx, device], decode_total_s=float(sums["time_s"]),
        decode_mean_s=float(mean["time_s"]), prefill_lower_s=float(st.lower_s[pre, device]),
        prefill_upper_s=float(st.upper_s[pre, device]),
        decode_mean_lower_s=float(mean["lower_s"]), decode_mean_upper_s=float(mean["upper_s"]),
        prefill_kernels=st.kernels(f"b{batch}:prefill", dev) if with_kernels else None,
        decode_kernels=st.kernels(labels[0], dev) if with_kernels else None, notes=st.notes)


def request_model_times(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig, batch: int, *,
                        estimator: str | object = SERVING_ESTIMATOR,
                        points: int = DECODE_POINTS) -> RequestModelTimes:
    """Uncalibrated prefill and decode times of ``batch`` requests of ``cfg``'s lengths on
    ``hw`` under ``cfg.runtime`` (module docstring). The engine calibration fits against it."""
    n, m = int(cfg.input_tokens), int(cfg.output_tokens)
    steps, ctx = request_steps(batch, n, m, points)
    st = time_steps(arch, [hw], steps, TensorDtypes.of(cfg), engine_profile(cfg.runtime, hw),
                    estimator)
    return collect_request_times(st, batch, ctx, n, m, 0)
