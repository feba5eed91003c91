"""Engine step times on a grid, interpolated: the simulator's clock.

A step decodes ``d`` sequences at mean context ``c`` and prefills ``p`` prompt tokens (as
sequences of the workload's mean prompt length). Every grid point (``Grid``: ``d`` and ``c`` in
powers of 2 up to the running cap and the longest request, ``p`` in powers of 4) is timed in ONE
``phases.time_steps`` call for all devices, then passes the engine calibration (``decode``
with ``seqs = d``; ``prefill`` when ``d = 0``) and adds the step's tensor / pipeline
communication (``comm.step_comm``), as ``predictor.llm.serving`` does, then a running maximum
along d, p and c (a step with more work never takes less). Speculative decoding
(``spec_decode``, ``E`` tokens per verify step): a grid step is ``1 / E`` of an engine step
that prefills ``E x p`` tokens, so its time is the engine step's / ``E``. ``StepTable(d, c, p)``
interpolates multilinearly (exact for a time affine in each of d, c, p and in d x c); its
measured error is in docs/design/serving_sim.md. Seconds.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.llm.calibration import engine_calibration
from roofcast.predictor.llm.comm import step_comm
from roofcast.predictor.llm.kernels import MoeRouting, Segment
from roofcast.predictor.llm.ladder import pow2_bracket
from roofcast.predictor.llm.phases import Step, measured_share_notes
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.spec_decode import time_spec_steps
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.runtimes import ExecutionProfile
from roofcast.predictor.sharding import Sharding, local_arch


def _powers(top: int, base: int, start: int = 1) -> list[int]:
    out, v = [], start
    while v < top:
        out.append(v)
        v *= base
    return [*out, top]


@dataclass(frozen=True)
class Grid:
    """The axes: decode sequences, mean context, prefill tokens; ``prompt`` the length of
    one prefill sequence."""

    decode: tuple[int, ...]
    context: tuple[int, ...]
    prefill: tuple[int, ...]
    prompt: int

    @classmethod
    def covering(cls, max_seqs: int, max_context: int, max_prefill: int, prompt: int,
                 min_context: int = 1) -> Grid:
        """Axes from 0 (decode, prefill) up to the maxima; the context in powers of 2 from the
        one at or below ``min_context`` to the one at or above ``max_context`` (the kernel
        model's decode rows are timed at powers of 2: ``predictor.llm.ladder``)."""
        lo, top = pow2_bracket(max(min_context, 1))[0], max(max_context, min_context + 1)
        ctx = _powers(pow2_bracket(top)[1], 2, lo)
        return cls((0, *_powers(max(max_seqs, 1), 2)), tuple(ctx),
                   (0, *_powers(max(max_prefill, 16), 4, 16)), max(1, int(prompt)))

    def prefill_segment(self, p: int) -> Segment:
        """``p`` prompt tokens as sequences of about ``prompt`` tokens."""
        k = max(1, math.ceil(p / self.prompt))
        new = max(1, p // k)
        return Segment(k, new, new, emits=False)

    def steps(self, per_step: float = 1.0) -> list[Step]:
        """One ``Step`` per (d, c, p) with work (d = 0 is timed once per p); ``per_step``:
        output tokens per sequence per engine step (a grid step is 1 / ``per_step`` of an
        engine step, so the engine step prefills ``per_step x p`` tokens)."""
        out = []
        for d in self.decode:
            for c in (self.context if d else self.context[:1]):
                for p in self.prefill:
                    real = max(1, round(p * per_step)) if p else 0
                    segs = ((Segment(d, 1, c),) if d else ()) + (
                        (self.prefill_segment(real),) if p else ())
                    if segs:
                        out.append(Step(f"{d}|{c}|{p}", segs))
        return out


def _locate(axis: Sequence[float], x: float) -> tuple[int, float]:
    i = min(max(bisect.bisect_right(axis, x) - 1, 0), len(axis) - 2)
    lo, hi = axis[i], axis[i + 1]
    return i, min(max((x - lo) / (hi - lo), 0.0), 1.0)


@dataclass(frozen=True)
class StepTable:
    """Step seconds on ``grid`` (``time_s[d][c][p]`` nested lists); call it to interpolate."""

    grid: Grid
    time_s: list = field(repr=False)
    #: what the prediction should say about how the steps were timed (measured share).
    notes: tuple[str, ...] = ()

    def __call__(self, d: float, c: float, p: float) -> float:
        g, t = self.grid, self.time_s
        i, wd = _locate(g.decode, d)
        j, wc = _locate(g.context, c)
        k, wp = _locate(g.prefill, p)
        out = 0.0
        for di, fd in ((i, 1.0 - wd), (i + 1, wd)):
            if fd == 0.0:
                continue
            for cj, fc in ((j, 1.0 - wc), (j + 1, wc)):
                if fc == 0.0:
                    continue
                row = t[di][cj]
                out += fd * fc * (row[k] * (1.0 - wp) + row[k + 1] * wp)
        return out


def _comm_s(arch: LLMArch, cfg: ServingConfig, system, grid: Grid, d: int, p: int,
            profile: ExecutionProfile) -> float:
    """One engine step's communication (speculation: ``K + 1`` tokens per decode and
    ``E x p`` prompt tokens)."""
    sh = Sharding.of(cfg)
    if sh.trivial or d + p == 0:
        return 0.0
    sd = cfg.spec_decode
    if sd is not None:
        d, p = d * (sd.k + 1), round(p * sd.tokens_per_step)
    emit = d + (grid.prefill_segment(p).batch if p else 0)
    custom = profile.serving.custom_allreduce if profile.serving else None
    return step_comm(arch, sh, system, tokens=d + p, emit=emit,
                     act_bytes=TensorDtypes.of(cfg).act_bytes, custom=custom).total_s


def step_tables(arch: LLMArch, hws: Sequence[HardwareSpec], cfg: ServingConfig,
                profile: ExecutionProfile, grid: Grid, systems: Sequence = (), *,
                estimator: str = SERVING_ESTIMATOR) -> list[StepTable]:
    """One ``StepTable`` per device of ``hws`` (module docstring); ``systems``: the replica
    system of each device (None entries, or empty, on one device)."""
    sh = Sharding.of(cfg)
    sd = cfg.spec_decode
    per_step = 1.0 if sd is None else sd.tokens_per_step
    steps = grid.steps(per_step)
    timed = time_spec_steps(local_arch(arch, sh), list(hws), steps, TensorDtypes.of(cfg),
                            profile, estimator, sd, ep=sh.ep,
                            moe=MoeRouting(cfg.moe_imbalance))
    cal = engine_calibration(profile.name)
    index = {s.label: i for i, s in enumerate(steps)}
    tables = []
    for n, hw in enumerate(hws):
        system = systems[n] if systems else None
        raw = timed.time_s[:, n]
        seqs = np.array([max(int(lb.split("|")[0]), 1) for lb in timed.labels], float)
        dec = np.asarray(cal.apply("decode", raw, hw, seqs=seqs)[0], float)
        pre = np.asarray(cal.apply("prefill", raw, hw, seqs=1.0)[0], float)
        t = [[[0.0] * len(grid.prefill) for _ in grid.context] for _ in grid.decode]
        comm = {(d, p): _comm_s(arch, cfg, system, grid, d, p, profile)
                for d in grid.decode for p in grid.prefill}
        for a, d in enumerate(grid.decode):
            for b, c in enumerate(grid.context):
                for k, p in enumerate(grid.prefill):
                    if d + p == 0:
                        continue
                    i = index[f"{d}|{c if d else grid.context[0]}|{p}"]
                    t[a][b][k] = (float(dec[i] if d else pre[i]) + comm[(d, p)]) / per_step
        tables.append(StepTable(grid, monotone(np.asarray(t)).tolist(), measured_share_notes(
            timed.device_rows(hw.id), profile.name)))
    return tables


def monotone(t: np.ndarray) -> np.ndarray:
    """``t`` (d, c, p) made non-decreasing along each axis by a running maximum (d, then p,
    then c: each pass keeps the earlier axes non-decreasing)."""
    for axis in (0, 2, 1):
        t = np.maximum.accumulate(t, axis=axis)
    return t
