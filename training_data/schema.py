"""The tidy measurement row: one row per measured op run (issue 5; notes/measurement_schema.md).

``COLUMNS`` lists every column with its kind (``str | int | float | json``), unit, whether it is
required and its default. Only ``op_type``, ``device_id``, ``dtype`` and a latency are required;
every other column may be absent (it gets its default) or empty in a row (default for strings and
JSON, NaN/NULL for numbers).

Units: times in seconds (``latency_s``, ``latency_p10_s``, ``latency_p90_s``, ``e2e_latency_s``).
A time column may instead be given in milliseconds, microseconds or nanoseconds with the suffix
``_ms``, ``_us`` or ``_ns`` (``latency_ms``, ``e2e_latency_us``, ...): it is converted to seconds,
t_s = t_ms * 1e-3 = t_us * 1e-6 = t_ns * 1e-9. Giving both spellings of one time is an error.
FLOPs count one multiply-add as 2 FLOPs; bytes are unfused kernel traffic (``graph_import``).

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.schema).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from roofcast.defaults import LEGACY_RUNTIME_BY_KIND

KINDS = ("str", "int", "float", "json")


@dataclass(frozen=True)
class Column:
    """One column of the tidy row. ``key``: part of ``row_key``."""

    name: str
    kind: str
    unit: str
    required: bool
    default: Any
    key: bool
    doc: str


def _c(name: str, kind: str, unit: str, doc: str, *, required: bool = False, default: Any = None,
       key: bool = False) -> Column:
    if default is None:
        default = {"str": "", "json": None, "int": None, "float": float("nan")}[kind]
    return Column(name, kind, unit, required, default, key, doc)


COLUMNS: tuple[Column, ...] = (
    # identity of the work
    _c(
        "op_type",
        "str",
        "",
        "ONNX op type (MatMul, Conv, ...; family-level op for public kernels)",
        required=True,
        key=True,
    ),
    _c("domain", "str", "", "ONNX domain ('' = ai.onnx)", key=True),
    _c("family", "str", "", "op family (matmul, conv, elementwise, ...)", key=True),
    _c("model", "str", "", "zoo name or model file stem; '' for microbenchmarks", key=True),
    _c("node", "str", "", "graph node name or ''", key=True),
    _c(
        "input_shapes",
        "json",
        "elements",
        "JSON list of input shapes, e.g. [[1,64],[64,64]]",
        default="[]",
        key=True,
    ),
    _c("output_shapes", "json", "elements", "JSON list of output shapes", default="[]", key=True),
    _c(
        "attrs",
        "json",
        "",
        "JSON object of op attributes (canonical: sorted keys)",
        default="{}",
        key=True,
    ),
    _c(
        "dtype",
        "str",
        "",
        "tensor dtype: fp32|fp16|bf16|tf32|int8|... (float32, half accepted)",
        required=True,
        key=True,
    ),
    _c(
        "direction",
        "str",
        "",
        "fwd | bwd_data | bwd_filter | bwd (backward kernels)",
        default="fwd",
        key=True,
    ),
    _c(
        "flops",
        "float",
        "FLOP",
        "FLOPs by roofcast's cost rules (multiply-add = 2); NaN if uncosted",
    ),
    _c("bytes_read", "float", "B", "bytes read by the unfused kernel"),
    _c("bytes_written", "float", "B", "bytes written by the unfused kernel"),
    _c("weight_bytes", "float", "B", "bytes of weights among bytes_read"),
    _c("gemm_batch", "float", "", "GEMM view: batch count (NaN when n/a)"),
    _c("gemm_m", "float", "", "GEMM view: M"),
    _c("gemm_n", "float", "", "GEMM view: N"),
    _c("gemm_k", "float", "", "GEMM view: K"),
    # where / how
    _c("device_id", "str", "", "catalog id (aliases resolved) or 'local'", required=True, key=True),
    _c("cpu_model", "str", "", "CPU model string (for 'local' and CPU rows)", key=True),
    _c("machine", "str", "", "hash of the host name (never the raw host name)", key=True),
    _c("threads_intra", "int", "threads", "intra-op threads (>= 1; empty when n/a)", key=True),
    _c("threads_inter", "int", "threads", "inter-op threads (>= 1; empty when n/a)", key=True),
    _c("batch", "int", "samples", "batch size of the run (>= 1; empty when n/a)", key=True),
    _c("precision", "str", "", "compute precision (defaults to dtype)", key=True),
    _c("opt_level", "str", "", "disable|basic|extended|all|n/a", default="n/a", key=True),
    _c("mode", "str", "", "infer | train", default="infer", key=True),
    _c(
        "provider",
        "str",
        "",
        "execution provider / library (CPUExecutionProvider, cuda, ...)",
        key=True,
    ),
    _c(
        "runtime",
        "str",
        "",
        "execution runtime that ran the op (onnxruntime-cpu, pytorch-eager, "
        "...); empty: the device kind's default",
    ),
    # result
    _c("latency_s", "float", "s", "median per-op kernel time", required=True),
    _c("latency_p10_s", "float", "s", "10th percentile of the per-op time"),
    _c("latency_p90_s", "float", "s", "90th percentile of the per-op time"),
    _c("repeats", "int", "runs", "number of timed repeats (>= 1)"),
    _c("e2e_latency_s", "float", "s", "end-to-end median of the whole run (NaN if imported)"),
    _c("run_id", "str", "", "id of the run; distinguishes repeated measurements", key=True),
    _c(
        "source",
        "str",
        "",
        "collector name, 'neusight:<path>', 'deepbench:<sheet>', 'user:<file>'",
        key=True,
    ),
    _c("software", "json", "", "JSON object of software versions", default="{}"),
    _c("timestamp", "str", "", "ISO 8601 UTC time of the measurement ('' if unknown)"),
    _c("notes", "str", "", "free text (not part of the row key)"),
)
BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
COLUMN_NAMES: tuple[str, ...] = tuple(BY_NAME)
REQUIRED: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.required)
KEY_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.key)
TIME_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.unit == "s")
TIME_UNITS: dict[str, float] = {"_s": 1.0, "_ms": 1e-3, "_us": 1e-6, "_ns": 1e-9}
"""Suffix -> seconds per unit for time columns."""

MAX_LATENCY_S = 3600.0
MIN_LATENCY_S = 1e-9
MODES = ("infer", "train")
OPT_LEVELS = ("disable", "basic", "extended", "all", "n/a")
DIRECTIONS = ("fwd", "bwd_data", "bwd_filter", "bwd")
LOCAL_DEVICE = "local"
NONNEGATIVE = ("flops", "bytes_read", "bytes_written", "weight_bytes", "gemm_batch", "gemm_m",
               "gemm_n", "gemm_k")
AT_LEAST_ONE = ("threads_intra", "threads_inter", "batch", "repeats")
MAX_INT = 2**53
"""Largest whole number an int column holds (exact in a float and in SQLite)."""
MAX_WORK = 1e21
"""Largest FLOPs / bytes / GEMM size of one op: an hour at 1e17 FLOP/s is 3.6e20."""
MAX_DIM = 2**31 - 1
MAX_RANK = 64
MAX_ELEMENTS = 2**48
"""Shape limits per tensor: each dim in [0, MAX_DIM], at most MAX_RANK dims, MAX_ELEMENTS
elements."""
RUNTIME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A runtime is a name as the runtime profiles spell theirs: 1-64 letters, digits, '.', '_', '-'
(starting with a letter or digit)."""
DEFAULT_RUNTIMES: Mapping[str, str] = LEGACY_RUNTIME_BY_KIND
"""Device kind -> the runtime a row of that kind means when it names none
(``roofcast.defaults``)."""
OP_TYPE_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.+:-]{0,127}")
"""An op type is a name (``MatMul``, ``com.microsoft.FusedConv``, a fused ``Conv+Relu``), not free
text: it starts with a letter or '_' (never a spreadsheet formula)."""

Problem = tuple[int, str]


@dataclass(frozen=True)
class Checked:
    """``frame``: every column of ``COLUMNS`` plus ``row_key`` (canonical values; rows with
    problems are still there); ``problems``: sorted ``(line, reason)``."""

    frame: pd.DataFrame
    problems: list[Problem]

    @property
    def bad_lines(self) -> list[int]:
        return sorted({line for line, _ in self.problems})


def dtype_names() -> dict[str, str]:
    """Accepted dtype spellings -> canonical name (the catalog's list)."""
    from roofcast.hw_catalog.spec import DTYPE_NAMES

    return dict(DTYPE_NAMES)


def _close(name: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(options), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def _rename_times(df: pd.DataFrame) -> tuple[pd.DataFrame, list[Problem]]:
    """Convert ``<time>_ms|_us|_ns`` columns to ``<time>_s`` (seconds)."""
    problems: list[Problem] = []
    out = df
    for col in TIME_COLUMNS:
        stem = col[: -len("_s")]
        given = [stem + suf for suf in TIME_UNITS if stem + suf in df.columns]
        if len(given) > 1:
            problems.append((1, f"columns {', '.join(given)} all give {col}; keep only one "
                                f"(latency_s is in seconds, latency_ms in milliseconds, ...)"))
            continue
        if given and given[0] != col:
            name = given[0]
            scale = TIME_UNITS[name[len(stem):]]
            values = pd.to_numeric(df[name], errors="coerce") * scale
            # keep non-numeric text so the type check can report it
            values = values.astype(object).where(values.notna(), df[name])
            out = out.drop(columns=[name]).assign(**{col: values})
    return out, problems


def normalize(df: pd.DataFrame, *, first_line: int = 2,
              lines: np.ndarray | None = None) -> Checked:
    """Check every row of ``df`` and bring it to canonical form (module docstring). ``lines``:
    the line number of each row (default: ``first_line``, ``first_line + 1``, ...)."""
    df = df.copy()
    df.columns = [str(c).strip().lower() for c in df.columns]
    lines = np.arange(len(df)) + first_line if lines is None else np.asarray(lines)
    df = df.reset_index(drop=True)
    problems: list[Problem] = []
    dup_cols = sorted({c for c in df.columns if list(df.columns).count(c) > 1})
    if dup_cols:
        return Checked(df, [(1, f"column(s) {', '.join(dup_cols)} appear more than once")])
    df, time_problems = _rename_times(df)
    problems += time_problems
    unknown = [c for c in df.columns if c not in BY_NAME]
    missing = [c for c in REQUIRED if c not in df.columns]
    for c in missing:
        hint = _close(c, unknown)
        if c == "latency_s":
            hint += "; give latency_s (seconds) or latency_ms / latency_us"
        problems.append((1, f"missing required column {c}{hint}"))
    for c in unknown:
        problems.append((1, f"unknown column {c!r}{_close(c, COLUMN_NAMES)}; rename or drop it "
                            f"(columns: training_data/README.md)"))
    if len(df) == 0:
        problems.append((1, "no data rows"))
    if problems:
        return Checked(df, sorted(problems))
    out = pd.DataFrame(index=df.index)
    for col in COLUMNS:
        given = df[col.name] if col.name in df.columns else pd.Series(None, index=df.index,
                                                                      dtype=object)
        out[col.name], col_problems = _CHECKERS[col.kind](col, given, lines)
        problems += col_problems
    problems += _check_values(out, lines)
    out["row_key"] = row_keys(out)
    problems += _duplicates(out["row_key"], lines)
    return Checked(out, sorted(problems))


def validate(df: pd.DataFrame, *, first_line: int = 2) -> list[Problem]:
    """``(line, reason)`` for every problem of ``df`` (empty list: all rows are good)."""
    return normalize(df, first_line=first_line).problems


# --------------------------------------------------------------------------- per-kind checks
def _text(s: pd.Series) -> tuple[pd.Series, pd.Series]:
    """(values as stripped text with "" for missing, blank mask); each distinct value is
    converted once."""
    obj = s.astype(object)
    missing = obj.isna().to_numpy()
    uniq = pd.unique(obj[~missing])
    text = obj.map({v: str(v).strip() for v in uniq}) if len(uniq) else obj
    text = text.astype(object).where(~missing, "")
    return text, pd.Series(missing, index=s.index) | text.eq("")


NA_TEXT = frozenset({"nan", "na", "null", "none", "n/a"})
"""Text a number column may hold for 'no value' (the cell counts as empty)."""


def _blank(s: pd.Series) -> pd.Series:
    """Missing cells of a number column: NaN, empty text or ``NA_TEXT``."""
    if s.dtype.kind in "fiub":
        return s.isna()
    text, blank = _text(s)
    return blank | text.str.lower().isin(NA_TEXT)


def _report(mask: pd.Series, lines: np.ndarray, reason: Callable[[int], str]) -> list[Problem]:
    return [(int(lines[i]), reason(i)) for i in np.flatnonzero(mask.to_numpy())]


def _check_str(col: Column, s: pd.Series, lines: np.ndarray) -> tuple[pd.Series, list[Problem]]:
    text, blank = _text(s)
    problems = []
    if col.required:
        problems = _report(blank, lines, lambda i: f"{col.name} is empty (required)")
    return text.where(~blank, col.default).astype(object), problems


def _check_float(col: Column, s: pd.Series, lines: np.ndarray) -> tuple[pd.Series, list[Problem]]:
    blank = _blank(s)
    num = pd.to_numeric(s.where(~blank), errors="coerce")
    problems = _report(~blank & num.isna(), lines,
                       lambda i: f"{col.name}: {s.iloc[i]!r} is not a number")
    if col.required:
        problems += _report(blank, lines, lambda i: f"{col.name} is empty or NaN (required)")
    problems += _report(np.isinf(num.fillna(0.0)), lines, lambda i: f"{col.name} is infinite")
    return num.astype(float), problems


def _check_int(col: Column, s: pd.Series, lines: np.ndarray) -> tuple[pd.Series, list[Problem]]:
    blank = _blank(s)
    num = pd.to_numeric(s.where(~blank), errors="coerce")
    problems = _report(~blank & num.isna(), lines,
                       lambda i: f"{col.name}: {s.iloc[i]!r} is not a whole number")
    num = num.astype(float)
    huge = num.abs() > MAX_INT
    problems += _report(huge, lines, lambda i: (
        f"{col.name}: {s.iloc[i]!r} is out of range (at most {MAX_INT})"))
    num = num.where(~huge)
    frac = num.notna() & (num.fillna(0) % 1 != 0)
    problems += _report(frac, lines, lambda i: f"{col.name}: {s.iloc[i]!r} is not a whole number")
    if col.required:
        problems += _report(blank, lines, lambda i: f"{col.name} is empty (required)")
    values = num.where(~frac).round()
    return values.astype("Int64"), problems


def _canonical_json(text: str, want: type) -> str:
    """Sorted-key compact JSON; shapes: a list whose items are a list of whole numbers or dim
    names, or null for an omitted optional input."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"bad JSON {text[:60]!r} ({exc})") from exc
    if not isinstance(value, want):
        raise ValueError(
            f"expected a JSON {'list' if want is list else 'object'}, got {text[:60]!r}"
        )
    if want is list:
        for shape in value:
            if shape is not None and (not isinstance(shape, list) or not all(
                    isinstance(d, (int, str)) and not isinstance(d, bool) for d in shape)):
                raise ValueError(
                    f"each shape must be a list of whole numbers or dim names (null for "
                    f"an omitted input), e.g. [[1,64],[64,64]]; got {text[:60]!r}"
                )
            if shape is not None:
                _check_shape(shape, text)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _check_shape(shape: list[int | str], text: str) -> None:
    """Dims in [0, MAX_DIM], rank <= MAX_RANK, elements <= MAX_ELEMENTS (module constants)."""
    dims = [d for d in shape if isinstance(d, int)]
    if len(shape) > MAX_RANK or any(d < 0 or d > MAX_DIM for d in dims) or (
            math.prod(dims) > MAX_ELEMENTS):
        raise ValueError(f"shape out of range (dims 0..{MAX_DIM}, at most {MAX_RANK} dims and "
                         f"{MAX_ELEMENTS} elements per tensor); got {text[:60]!r}")


def _check_json(col: Column, s: pd.Series, lines: np.ndarray) -> tuple[pd.Series, list[Problem]]:
    want = list if col.default == "[]" else dict
    blank = _blank(s)
    out: dict[str, str | Exception] = {}
    for text in s[~blank].astype(str).unique():
        try:
            out[text] = _canonical_json(text, want)
        except ValueError as exc:
            out[text] = exc
    values = s.astype(object).where(blank, s[~blank].astype(str).map(out))
    bad = values.map(lambda v: isinstance(v, Exception))
    problems = _report(bad, lines, lambda i: f"{col.name}: {values.iloc[i]}")
    values = values.where(~blank & ~bad, col.default)
    return values.astype(object), problems


_CHECKERS: dict[str, Callable[[Column, pd.Series, np.ndarray], tuple[pd.Series, list[Problem]]]] = {
    "str": _check_str, "float": _check_float, "int": _check_int, "json": _check_json,
}


# --------------------------------------------------------------------------- value checks
def _check_values(out: pd.DataFrame, lines: np.ndarray) -> list[Problem]:
    problems: list[Problem] = []
    for name in TIME_COLUMNS:
        v = out[name]
        problems += _report(v <= 0, lines, lambda i, n=name: (
            f"{n} = {out[n].iloc[i]:g} must be > 0 seconds"))
        problems += _report(v > MAX_LATENCY_S, lines, lambda i, n=name: (
            f"{n} = {out[n].iloc[i]:g} s is over 1 hour: wrong units? {n} is in seconds "
            f"(use a {n[:-2]}_ms or {n[:-2]}_us column for milli/microseconds)"))
        problems += _report((v > 0) & (v < MIN_LATENCY_S), lines, lambda i, n=name: (
            f"{n} = {out[n].iloc[i]:g} s is under 1 ns: wrong units? {n} is in seconds"))
    lat = out["latency_s"]
    problems += _report(out["latency_p10_s"] > lat, lines,
                        lambda i: "latency_p10_s is above latency_s (the median)")
    problems += _report(out["latency_p90_s"] < lat, lines,
                        lambda i: "latency_p90_s is below latency_s (the median)")
    for name in NONNEGATIVE:
        problems += _report(out[name] < 0, lines, lambda i, n=name: (
            f"{n} = {out[n].iloc[i]:g} must be >= 0"))
        problems += _report(out[name] > MAX_WORK, lines, lambda i, n=name: (
            f"{n} = {out[n].iloc[i]:g} is over {MAX_WORK:g} for one op: wrong units?"))
    op = out["op_type"]
    problems += _report(op.ne("") & ~op.map(lambda t: OP_TYPE_PATTERN.fullmatch(t) is not None),
                        lines, lambda i: (
        f"op_type {op.iloc[i][:60]!r} is not an op name (a letter or '_', then letters, digits "
        "or _ . + : -, at most 128 characters; e.g. MatMul, Conv+Relu)"))
    for name in AT_LEAST_ONE:
        problems += _report(out[name].fillna(1) < 1, lines, lambda i, n=name: (
            f"{n} = {out[n].iloc[i]} must be >= 1"))
    problems += _check_device(out, lines)
    problems += _check_dtypes(out, lines)
    for name, allowed in (("mode", MODES), ("opt_level", OPT_LEVELS), ("direction", DIRECTIONS)):
        out[name] = out[name].str.lower()
        problems += _report(~out[name].isin(allowed), lines, lambda i, n=name, a=allowed: (
            f"unknown {n} {out[n].iloc[i]!r}; expected one of {', '.join(a)}"))
    problems += _check_timestamps(out, lines)
    problems += _check_runtimes(out, lines)
    return problems


def device_kinds(device_ids: Iterable[str]) -> dict[str, str]:
    """Catalog device id -> its kind (``cpu``, ``gpu``, ``accelerator``); ``local`` is this
    machine's CPU; an id the catalog does not know is left out."""
    from roofcast.hw_catalog.catalog import get_device
    from roofcast.hw_catalog.errors import HardwareSpecError

    out: dict[str, str] = {}
    for device in set(device_ids):
        if device == LOCAL_DEVICE:
            out[device] = "cpu"
            continue
        try:
            out[device] = get_device(device).kind
        except HardwareSpecError:
            continue
    return out


def default_runtimes(device_ids: pd.Series) -> pd.Series:
    """The default runtime of each row's device kind (``DEFAULT_RUNTIMES``; "" for a device
    the catalog does not know)."""
    kinds = device_kinds(device_ids.unique())
    return device_ids.map(lambda d: DEFAULT_RUNTIMES.get(kinds.get(d, ""), "")).astype(object)


def with_default_runtimes(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with an empty ``runtime`` read as its device kind's default (in place)."""
    empty = frame["runtime"].eq("")
    if empty.any():
        frame.loc[empty, "runtime"] = default_runtimes(frame.loc[empty, "device_id"])
    return frame


def _check_runtimes(out: pd.DataFrame, lines: np.ndarray) -> list[Problem]:
    rt = out["runtime"]
    bad = rt.ne("") & ~rt.map(lambda t: RUNTIME_PATTERN.fullmatch(t) is not None)
    problems = _report(bad, lines, lambda i: (
        f"runtime {rt.iloc[i][:60]!r} is not a runtime name (1-64 letters, digits, '.', '_' or "
        "'-', e.g. onnxruntime-cpu, pytorch-eager; `roofcast runtimes` lists the known ones)"))
    with_default_runtimes(out)
    return problems


def resolve_devices(names: Iterable[str]) -> dict[str, str | Exception]:
    """Device name -> catalog id (``local`` kept), or the catalog's error (it lists close ids)."""
    from roofcast.hw_catalog.catalog import resolve_name
    from roofcast.hw_catalog.errors import HardwareSpecError

    out: dict[str, str | Exception] = {}
    for name in set(names):
        if name.strip().lower() == LOCAL_DEVICE:
            out[name] = LOCAL_DEVICE
            continue
        try:
            out[name] = resolve_name(name)
        except HardwareSpecError as exc:
            out[name] = exc
    return out


def _check_device(out: pd.DataFrame, lines: np.ndarray) -> list[Problem]:
    dev = out["device_id"]
    known = resolve_devices(dev[dev.ne("")].unique())
    mapped = dev.map(lambda d: known.get(d, d))
    bad = mapped.map(lambda v: isinstance(v, Exception))
    problems = _report(bad & dev.ne(""), lines, lambda i: str(mapped.iloc[i]))
    out["device_id"] = mapped.where(~bad, dev).astype(object)
    return problems


def _check_dtypes(out: pd.DataFrame, lines: np.ndarray) -> list[Problem]:
    names = dtype_names()
    canonical = sorted(set(names.values()))
    problems: list[Problem] = []
    from_dtype = out["precision"].eq("")  # empty precision = the dtype (checked once)
    for col in ("dtype", "precision"):
        raw = out[col].where(~from_dtype, out["dtype"]) if col == "precision" else out[col]
        mapped = raw.str.lower().map(names)
        bad = mapped.isna() & raw.ne("") & ~(from_dtype if col == "precision" else False)
        problems += _report(bad, lines, lambda i, c=col, r=raw: (
            f"unknown {c} {r.iloc[i]!r}{_close(r.iloc[i].lower(), names)}; expected one of "
            f"{', '.join(canonical)}"))
        out[col] = mapped.where(~bad, raw).astype(object)
    return problems


def _parse_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _check_timestamps(out: pd.DataFrame, lines: np.ndarray) -> list[Problem]:
    ts = out["timestamp"]
    ok = {t: _parse_time(t) for t in ts[ts.ne("")].unique()}
    bad = ts.ne("") & ~ts.map(lambda t: ok.get(t, True))
    return _report(bad, lines, lambda i: (
        f"timestamp {ts.iloc[i]!r} is not ISO 8601 (e.g. 2026-01-31T12:00:00Z)"))


# --------------------------------------------------------------------------- keys
def _key_part(s: pd.Series) -> list[str]:
    if s.dtype.kind in "fiu" or str(s.dtype) == "Int64":
        return s.astype("string").fillna("").astype(object).tolist()
    return [v if isinstance(v, str) else str(v) for v in s.astype(object).where(s.notna(), "")]


def _runtime_key(frame: pd.DataFrame) -> list[str]:
    """The runtime's part of the key: nothing for the device kind's default runtime (the rows
    stored before the column existed mean it), else ``\x1fruntime=NAME``."""
    default = default_runtimes(frame["device_id"])
    return ["" if rt == d else f"\x1fruntime={rt}"
            for rt, d in zip(frame["runtime"], default, strict=True)]


def row_keys(frame: pd.DataFrame) -> pd.Series:
    """sha256 hex of the key columns (module docstring), one per row."""
    parts = [_key_part(frame[c]) for c in KEY_COLUMNS]
    runtime = _runtime_key(frame)
    keys = [hashlib.sha256(("\x1f".join(t) + r).encode("utf-8")).hexdigest()
            for *t, r in zip(*parts, runtime, strict=True)]
    return pd.Series(keys, index=frame.index, dtype=object)


def _duplicates(keys: pd.Series, lines: np.ndarray) -> list[Problem]:
    dup = keys.duplicated(keep="first")
    if not dup.any():
        return []
    first_seen: dict[str, int] = {}
    for i, k in enumerate(keys):
        first_seen.setdefault(k, int(lines[i]))
    return _report(dup, lines, lambda i: (
        f"duplicate of line {first_seen[keys.iloc[i]]} (same op, shapes, device, config, source "
        f"and run_id); give repeated measurements distinct run_id values"))
