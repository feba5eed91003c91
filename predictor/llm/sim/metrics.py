"""Serving metrics of a simulated run, over its steady window.

Per request: TTFT = first token - arrival (queueing included), e2e = finish - arrival, TPOT =
(finish - first token) / (output - 1). The window keeps the requests between the first and
last ``WARM`` by arrival (a closed loop: at least its clients at each end: the start burst and
the drain), [t0, t1] from the first to the last kept arrival; percentiles and the mean e2e W
are the kept requests'. In flight L = the time-average number in the system (queued or
running) over [t0, t1], from every request's interval. Throughput X: open loop, requests
finished in [t0, t1] / (t1 - t0), so L = X W is a check (Little's law, up to the window's
edges: about W / (t1 - t0)); closed loop, X = L / W (the response-time law: synchronised
waves of equal requests make edge counts swing). Tokens/s = X x mean tokens; goodput =
X x the share meeting both SLOs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from roofcast.predictor.llm.sim.engine import SimTrace

WARM = 0.1
PERCENTILES: tuple[int, ...] = (50, 90, 99)
SERIES_POINTS = 200


@dataclass(frozen=True)
class SimMetrics:
    """Summary of a run (module docstring): ``latency`` metric -> {"mean", "p50", "p90",
    "p99"} in seconds for ``ttft_s``, ``tpot_s``, ``e2e_s``; rates per second; ``series``:
    at most ``SERIES_POINTS`` samples of the step series; ``little_error`` = in flight /
    (throughput x mean e2e) - 1."""

    requests: int
    window_requests: int
    window_s: float
    latency: dict[str, dict[str, float]]
    requests_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    in_flight: float
    little_error: float
    goodput_per_s: float | None
    slo_share: float | None
    preemptions: int
    steps: int
    series: dict[str, np.ndarray] = field(repr=False, compare=False)


def _stats(x: np.ndarray) -> dict[str, float]:
    x = x[np.isfinite(x)]
    if not len(x):
        return {"mean": math.nan, **{f"p{q}": math.nan for q in PERCENTILES}}
    return {"mean": float(x.mean()), **{f"p{q}": float(np.percentile(x, q))
                                         for q in PERCENTILES}}


def _window(tr: SimTrace) -> tuple[np.ndarray, float, float]:
    order = np.argsort(tr.arrival_s, kind="stable")
    n = len(order)
    cut = int(WARM * n)
    lo, hi = max(cut, tr.clients), n - max(cut, tr.clients)
    if hi - lo < max(2, n // 5):  # too few requests for a steady window: keep them all
        lo, hi = 0, n
    keep = order[lo:hi]
    t0, t1 = float(tr.arrival_s[keep[0]]), float(tr.arrival_s[keep[-1]])
    if t1 <= t0:  # all arrived together: the window is the run
        t0, t1 = float(tr.arrival_s.min()), float(tr.finish_s.max())
    return keep, t0, t1


def _downsample(series: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    n = len(series["time_s"])
    idx = np.unique(np.linspace(0, n - 1, min(n, SERIES_POINTS)).astype(int)) if n else []
    return {k: v[idx] for k, v in series.items()}


def summarise(tr: SimTrace, slo_ttft_s: float | None = None,
              slo_tpot_s: float | None = None) -> SimMetrics:
    """The metrics of ``tr`` (module docstring); SLOs in seconds (None: not set)."""
    keep, t0, t1 = _window(tr)
    span = t1 - t0
    ttft = tr.first_s - tr.arrival_s
    e2e = tr.finish_s - tr.arrival_s
    steps = np.maximum(tr.output_tokens - 1, 1)
    tpot = np.where(tr.output_tokens > 1, (tr.finish_s - tr.first_s) / steps, np.nan)
    w = float(e2e[keep].mean())
    overlap = np.clip(np.minimum(tr.finish_s, t1) - np.maximum(tr.arrival_s, t0), 0, None)
    in_flight = float(overlap.sum()) / span
    if tr.clients:
        x = in_flight / w
    else:
        x = float(((tr.finish_s >= t0) & (tr.finish_s <= t1)).sum()) / span
    out_tps = x * float(tr.output_tokens[keep].mean())
    mean_in = float(tr.input_tokens[keep].mean())
    share = goodput = None
    if slo_ttft_s is not None or slo_tpot_s is not None:
        ok = np.ones(len(keep), bool)
        if slo_ttft_s is not None:
            ok &= ttft[keep] <= slo_ttft_s
        if slo_tpot_s is not None:
            ok &= ~(tpot[keep] > slo_tpot_s)
        share = float(ok.mean())
        goodput = x * share
    return SimMetrics(
        requests=len(e2e), window_requests=len(keep), window_s=span,
        latency={"ttft_s": _stats(ttft[keep]), "tpot_s": _stats(tpot[keep]),
                 "e2e_s": _stats(e2e[keep])},
        requests_per_s=x, output_tokens_per_s=out_tps,
        total_tokens_per_s=out_tps + x * mean_in, in_flight=in_flight,
        little_error=in_flight / (x * w) - 1.0 if x > 0 and w > 0 else math.nan,
        goodput_per_s=goodput, slo_share=share, preemptions=tr.preemptions, steps=tr.steps,
        series=_downsample(tr.series))
