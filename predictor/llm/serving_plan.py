"""Serving plan search: every tensor x pipeline split of a system's devices, ranked by tokens/s.

``serving_plan_search(arch, system, cfg)``: one row per ``(tp, pp)`` with ``tp x pp`` dividing
the ``n`` devices; ``n / (tp x pp)`` independent replicas, each ``serving.predict_serving`` on
``system`` (``cfg.ep`` kept where it divides ``tp``, else 1 with a note); the batch is
``cfg``'s or as many requests as fit. ``tokens_per_s`` = replicas x one replica's output
tokens/s; memory in GiB of the fullest device; ``rank``: fitting plans by tokens/s, then
TPOT, then the others by how little they are over. Column list: ``COLUMNS``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog import get_device
from roofcast.hw_catalog.systems import get_system
from roofcast.predictor.llm.phases import engine_profile
from roofcast.predictor.llm.serving import predict_serving, serving_spec
from roofcast.predictor.llm.types import GIB, ServingConfig
from roofcast.predictor.parallel.types import ParallelPlanError
from roofcast.predictor.sharding import Sharding, check_sharding

COLUMNS: tuple[str, ...] = (
    "rank", "plan", "tp", "pp", "ep", "devices_per_replica", "replicas", "batch", "max_batch",
    "ttft_ms", "tpot_ms", "e2e_latency_ms", "replica_tokens_per_s", "tokens_per_s",
    "total_tokens_per_s", "comm_tpot_ms", "weights_GiB", "memory_GiB", "capacity_GiB",
    "over_GiB", "fits", "notes",
)


def splits(n_devices: int) -> list[tuple[int, int]]:
    """Every ``(tp, pp)`` with ``tp x pp`` dividing ``n_devices``."""
    divs = [d for d in range(1, n_devices + 1) if n_devices % d == 0]
    return [(tp, pp) for tp in divs for pp in divs if n_devices % (tp * pp) == 0]


def _replica_cfg(cfg: ServingConfig, continuous: bool) -> ServingConfig:
    """``cfg``'s batch or concurrency, else the most requests that fit."""
    if cfg.batch is not None or cfg.concurrency is not None:
        return cfg
    return replace(cfg, concurrency="max") if continuous else cfg


def serving_plan_search(arch: LLMArch, system: Any, cfg: ServingConfig, *,
                        estimator: str = SERVING_ESTIMATOR) -> pd.DataFrame:
    """The ranked plans (module docstring); ``system``: a ``SystemSpec`` or a catalog id."""
    system = get_system(system) if isinstance(system, str) else system
    hw = get_device(system.device)
    continuous = serving_spec(engine_profile(cfg.runtime, hw)).batching == "continuous"
    base = _replica_cfg(cfg, continuous)
    n = system.n_devices
    rows = []
    for tp, pp in splits(n):
        ep = cfg.ep if tp % cfg.ep == 0 else 1
        sh = Sharding(tp, pp, ep)
        rec: dict[str, Any] = {"plan": f"{sh.label()} x{n // sh.devices}", "tp": tp, "pp": pp,
                               "ep": ep, "devices_per_replica": sh.devices,
                               "replicas": n // sh.devices, "fits": False, "notes": ""}
        notes = [] if ep == cfg.ep else [f"ep={cfg.ep} does not divide tp={tp}: ep=1"]
        try:
            check_sharding(arch, sh)
        except ParallelPlanError as exc:
            rows.append({**rec, "notes": "; ".join([*notes, str(exc)])})
            continue
        run = replace(base, tp=tp, pp=pp, ep=ep)
        batch = None
        if not continuous and base.batch is None:
            probe = predict_serving(arch, hw, replace(run, batch=1), estimator=estimator,
                                    system=system)
            batch = max(probe.max_batch, 1)
            run = replace(run, batch=batch)
        p = predict_serving(arch, hw, run, estimator=estimator, system=system)
        mem = p.memory
        fits = p.max_batch > 0 and p.output_tokens_per_s == p.output_tokens_per_s  # not NaN
        over = 0.0 if p.max_batch > 0 else max(mem.total_bytes - mem.capacity_bytes, 0.0) / GIB
        if sh.tp > system.devices_per_node:
            notes.append(f"tp={tp} spans nodes: its all-reduces cross the NICs")
        notes.extend(x for x in p.notes if "does not fit" in x)
        replica = p.output_tokens_per_s
        rows.append({**rec, "batch": p.batch, "max_batch": p.max_batch,
                     "ttft_ms": p.ttft_s * 1e3, "tpot_ms": p.tpot_s * 1e3,
                     "e2e_latency_ms": p.e2e_latency_s * 1e3, "replica_tokens_per_s": replica,
                     "tokens_per_s": replica * rec["replicas"],
                     "total_tokens_per_s": p.total_tokens_per_s * rec["replicas"],
                     "comm_tpot_ms": p.comm_tpot_s * 1e3, "weights_GiB": mem.weights_bytes / GIB,
                     "memory_GiB": mem.total_bytes / GIB, "capacity_GiB": mem.capacity_bytes / GIB,
                     "over_GiB": over, "fits": fits, "notes": "; ".join(notes)})
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    table["fits"] = table["fits"].astype(bool)
    table = table.sort_values(["fits", "tokens_per_s", "tpot_ms", "over_GiB"],
                              ascending=[False, False, True, True], na_position="last",
                              kind="stable").reset_index(drop=True)
    table["rank"] = range(1, len(table) + 1)
    return table
