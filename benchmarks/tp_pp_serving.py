"""Tensor / pipeline / expert parallel serving against Argonne's Fig 5a rows (a CHECK, not a fit).

    ROOFCAST_SHARED_DATA=../shared/data python benchmarks/tp_pp_serving.py

Rows: ``llm/argonne/Fig_5_a_TP_PP_Results.csv`` (LLM-Inference-Bench, Chitty-Venkata et al. 2024,
BSD-3-Clause): TensorRT-LLM on ALCF Polaris A100-SXM4-40GB (``a100-40gb-sxm``), static batches of
``B`` requests with ``L`` input and ``L`` output tokens; ``Latency`` = the whole batch's request
time (s), ``Throughput`` = ``B x 2L / Latency``. Each row is predicted with
``predict_serving(arch, hw, ServingConfig(L, L, batch=B, runtime="tensorrt-llm-2024", tp=, pp=,
ep=), system=system_from_device("a100-40gb-sxm", tp x pp))``; the parallelism label maps to
(tp, pp, ep) through ``LAYOUTS`` (TensorRT-LLM's ``moe_tp x moe_ep = tp``: "EP" on 4 GPUs is
tp=4, ep=4; "Hybrid TP = 2 and EP = 2" is tp=4, ep=2). Error = predicted / measured latency - 1.

Nothing is fitted to these rows. The engine calibration (``predictor/data/llm_engines.json``)
was fitted on All_results.csv's single-device rows, which repeat many of Fig 5a's one-device
rows: column ``in_fit`` marks a row whose (model, L, batch) is among the fitted A100
TensorRT-LLM rows; the one-device rows are scored apart from the multi-device ones (the check).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.llm.load import load_llm
from roofcast.hw_catalog import get_device
from roofcast.hw_catalog.systems import system_from_device
from roofcast.predictor.llm.serving import predict_serving
from roofcast.predictor.llm.types import ServingConfig
from roofcast.training_data.public_kernels import shared_data_dir

FILE = "Fig_5_a_TP_PP_Results.csv"
#: the publisher's hardware label -> catalog device (as ``training_data.public.llm_serving``).
DEVICE = {"Nvidia A100 GPU": "a100-40gb-sxm"}
ENGINE = {"TensorRT-LLM": "tensorrt-llm-2024"}  # the 2024 release the rows ran


@dataclass(frozen=True)
class Layout:
    """A parallelism label's kind and its (tp, pp, ep) on ``n`` devices."""

    kind: str
    degrees: Callable[[int], tuple[int, int, int]]


#: publisher's label (regex, case-insensitive) -> layout; first match wins.
LAYOUTS: tuple[tuple[str, Layout], ...] = (
    (r"^hyb\w* .*tp\s*=\s*2 and ep\s*=\s*2", Layout("TP+EP", lambda n: (n, 1, 2))),
    (r"^hyb\w* (tensor \(2\) and pipeline \(2\)|tp\s*=\s*2 and pp\s*=\s*2)",
     Layout("TP+PP", lambda n: (2, n // 2, 1))),
    (r"^(tensor parallelism|tp)$", Layout("TP", lambda n: (n, 1, 1))),
    (r"^(pipeline parallelism|pp)$", Layout("PP", lambda n: (1, n, 1))),
    (r"^ep$", Layout("EP", lambda n: (n, 1, n))),
)


def layout_of(label: str) -> Layout:
    """The layout of a parallelism label (``LAYOUTS``); ValueError for an unknown one."""
    for pattern, layout in LAYOUTS:
        if re.search(pattern, label.strip(), re.IGNORECASE):
            return layout
    raise ValueError(f"unknown parallelism label {label!r}; add it to LAYOUTS")


def _fitted_keys() -> set[tuple[str, int, int]]:
    """(model ref, L, batch) of the single-device A100 TensorRT-LLM rows the engine calibration
    was fitted on (``training_data.public.llm_serving``)."""
    from roofcast.training_data.public.llm_serving import load_serving

    rows = load_serving().rows
    rows = rows[(rows.device == "a100-40gb-sxm") & (rows.engine == "tensorrt-llm-2024")
                & (rows.figure == "all")]
    return set(zip(rows.model_ref, rows.input_tokens.astype(int), rows.batch.astype(int),
                   strict=True))


def tp_pp_rows_table() -> pd.DataFrame:
    """One row per Fig 5a measurement: the layout, measured and predicted latency (s), the
    error (%), ``in_fit``, ``fits`` and the prediction's max batch; rows the model cannot
    predict keep a ``skipped`` reason."""
    raw = pd.read_csv(shared_data_dir() / "llm" / "argonne" / FILE)
    raw.columns = [c.strip() for c in raw.columns]
    fitted = _fitted_keys()
    archs: dict[str, object] = {}
    systems: dict[int, object] = {}
    out = []
    for r in raw.itertuples(index=False):
        hw_id, engine = DEVICE.get(r.Hardware.strip()), ENGINE.get(r.Framework.strip())
        n, label, ref = int(r._1), str(r._6), str(r.Model).strip()
        length, batch = int(r._4), int(r._5)
        layout = layout_of(label)
        tp, pp, ep = layout.degrees(n)
        rec = {"model": ref, "devices": n, "label": label, "kind": layout.kind, "tp": tp,
               "pp": pp, "ep": ep, "L": length, "batch": batch, "measured_s": float(r.Latency),
               "in_fit": n == 1 and (ref, length, batch) in fitted, "predicted_s": np.nan,
               "fits": False, "max_batch": 0, "skipped": ""}
        if hw_id is None or engine is None:
            out.append(
                {**rec, "skipped": f"no catalog device/engine for {r.Hardware}/{r.Framework}"}
            )
            continue
        if ref not in archs:
            try:
                archs[ref] = load_llm(ref)
            except ModelImportError as exc:
                archs[ref] = exc
        arch = archs[ref]
        if isinstance(arch, Exception):
            out.append({**rec, "skipped": f"no bundled config: {arch}"})
            continue
        if 2 * length > arch.max_context:
            out.append({**rec, "skipped": f"{2 * length} tokens exceed {arch.max_context}"})
            continue
        if n not in systems:
            systems[n] = system_from_device(hw_id, n) if n > 1 else None
        cfg = ServingConfig(length, length, batch=batch, runtime=engine, tp=tp, pp=pp, ep=ep)
        p = predict_serving(arch, get_device(hw_id), cfg, system=systems[n])
        out.append({**rec, "predicted_s": p.e2e_latency_s, "max_batch": p.max_batch,
                    "fits": p.max_batch > 0})
    table = pd.DataFrame(out)
    table["err_pct"] = 100.0 * (table.predicted_s / table.measured_s - 1.0)
    return table


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Median / mean |error| (%) and signed median per layout kind and device count."""
    ok = table[table.predicted_s.notna()].assign(abs_err=lambda t: t.err_pct.abs())
    g = ok.groupby(["kind", "devices"])
    return pd.DataFrame({"rows": g.size(), "median_abs_%": g.abs_err.median(),
                         "mean_abs_%": g.abs_err.mean(), "median_signed_%": g.err_pct.median(),
                         "in_fit": g.in_fit.sum()}).round(1)


def main(argv: list[str] | None = None) -> int:
    table = tp_pp_rows_table()
    pd.set_option("display.width", 200)
    print(f"Argonne Fig 5a (A100-40GB, TensorRT-LLM): {len(table)} rows, "
          f"{int(table.predicted_s.notna().sum())} predicted; error = predicted / measured "
          "latency - 1 (nothing fitted to these rows)")
    skipped = table[table.skipped != ""]
    for why, n in skipped.groupby("skipped").size().items():
        print(f"  skipped {n}: {why}")
    print(summary(table).to_string())
    ok = table[table.predicted_s.notna()]
    one, multi = ok[ok.devices == 1], ok[ok.devices > 1]
    held = one[~one.in_fit]
    print(f"one device: {len(one)} rows ({int(one.in_fit.sum())} of them among the calibration's "
          f"fitted rows), median |error| {one.err_pct.abs().median():.1f} %; the {len(held)} "
          f"not in the fit: {held.err_pct.abs().median():.1f} %")
    print(f"multi-device (the check): {len(multi)} rows, median |error| "
          f"{multi.err_pct.abs().median():.1f} %")
    if "--rows" in (argv or sys.argv[1:]):
        print(ok.drop(columns=["skipped"]).round(3).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
