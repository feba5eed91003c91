"""Prefill/decode disaggregation: ``P`` prefill replicas, ``D`` decode replicas of one plan.

Arrivals go round-robin to the prefill replicas, each a continuous loop of prompts that end at
their first token (the same policy, step table and KV pool as a plain replica). Each request's
KV then crosses the system's fabric: every device of the replica sends its shard in parallel,
``t_kv = N x kv_bytes_per_token_per_device / link_Bps + latency`` (seconds; NVLink fabric when
the ``(P + D) x devices`` fit one node, else the NICs' share per device). The request then
joins the decode replicas (round-robin by arrival there), whose prompts load computed
(``engine.run_continuous(loaded=True)``). TTFT = first token of the prefill pool - arrival
(its queue included); e2e = decode finish - arrival; the series are decode replica 0's.
Open loops and traces only (a closed loop's clients would couple the pools).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.sim.engine import SimTrace, run_continuous
from roofcast.predictor.llm.sim.workload import Requests

#: devices per node of a system built for the pools.
NODE = 8


@dataclass(frozen=True)
class Disagg:
    """``prefill`` and ``decode`` replicas (each >= 1)."""

    prefill: int
    decode: int

    def __post_init__(self) -> None:
        for v in (self.prefill, self.decode):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise PredictionError(f"--disagg P:D takes positive integers, got "
                                      f"{self.prefill!r}:{self.decode!r}")


def parse_disagg(text: str) -> Disagg:
    """``P:D`` as a ``Disagg``; a one-line refusal otherwise."""
    parts = str(text).strip().split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise PredictionError(f"--disagg takes P:D (prefill and decode replicas, e.g. 1:3), "
                              f"got {text!r}")
    return Disagg(int(parts[0]), int(parts[1]))


@dataclass(frozen=True)
class KvLink:
    """The per-device path a request's KV shard takes: bandwidth (bytes/s), latency (s)."""

    bytes_per_s: float
    latency_s: float
    what: str


def disagg_system(hw, system, replica_devices: int, d: Disagg):
    """The system the pools share: the replica's (``system``), else ``(P + D) x devices`` of
    ``hw`` (whole nodes of 8 beyond one node)."""
    if system is not None:
        return system
    from roofcast.hw_catalog.systems import system_from_device

    n = (d.prefill + d.decode) * replica_devices
    return system_from_device(hw, n if n <= NODE else math.ceil(n / NODE) * NODE)


def kv_link(system, replica_devices: int, d: Disagg) -> KvLink:
    """NVLink (the system's fabric) when every replica fits one node, else the NICs' share per
    device (``nic.count_per_node x GBps / devices_per_node``)."""
    need = (d.prefill + d.decode) * replica_devices
    fab = system.fabric
    if need <= system.devices_per_node or system.nic is None:
        return KvLink(fab.link_GBps * 1e9, fab.latency_us * 1e-6,
                      f"{fab.kind} {fab.link_GBps:g} GB/s per device")
    nic = system.nic
    per = nic.count_per_node * nic.GBps / system.devices_per_node
    return KvLink(per * 1e9, nic.latency_us * 1e-6,
                  f"NICs {per:g} GB/s per device ({need} devices span nodes)")


def _subset(req: Requests, idx: np.ndarray, arrival: np.ndarray,
            output: np.ndarray | None = None) -> Requests:
    return Requests(arrival[idx], req.input_tokens[idx],
                    req.output_tokens[idx] if output is None else output[idx])


def _pool(req: Requests, arrival: np.ndarray, replicas: int, output: np.ndarray | None,
          run) -> list[tuple[np.ndarray, SimTrace]]:
    """Round-robin by arrival over ``replicas``; (request indices, trace) per replica."""
    order = np.argsort(arrival, kind="stable")
    out = []
    for r in range(replicas):
        idx = order[r::replicas]
        if len(idx):
            out.append((idx, run(_subset(req, idx, arrival, output))))
    return out


def run_disagg(req: Requests, policy, blocks: int, table, d: Disagg, link: KvLink,
               kv_bytes_per_token: float, prefix_tokens: int = 0
               ) -> tuple[SimTrace, np.ndarray]:
    """The combined trace of ``req`` over the two pools and each request's KV transfer time
    (s) (module docstring)."""
    if req.clients:
        raise PredictionError("--disagg simulates open loops and traces (--rate or --trace); "
                              "a closed loop (--concurrency) would couple the pools")
    if policy.loop != "continuous":
        raise PredictionError(f"--disagg needs a continuous-batching policy, not {policy.name}")
    n = len(req)
    first, finish = np.full(n, math.nan), np.full(n, math.nan)
    ones = np.ones(n, dtype=req.output_tokens.dtype)
    steps = pre = 0
    for idx, tr in _pool(req, req.arrival_s, d.prefill, ones,
                         lambda r: run_continuous(r, policy, blocks, table, prefix_tokens)):
        first[idx] = tr.first_s
        steps, pre = steps + tr.steps, pre + tr.preemptions
    transfer = req.input_tokens * kv_bytes_per_token / link.bytes_per_s + link.latency_s
    ready = first + transfer
    series = None
    for idx, tr in _pool(req, ready, d.decode, None,
                         lambda r: run_continuous(r, policy, blocks, table, loaded=True)):
        finish[idx] = tr.finish_s
        steps, pre = steps + tr.steps, pre + tr.preemptions
        series = tr.series if series is None else series
    return SimTrace(np.asarray(req.arrival_s, float), first, finish, req.output_tokens,
                    req.input_tokens, steps, pre, series), transfer
