"""The step table: exact on a multilinear time, close to ``time_steps`` between grid points."""

from __future__ import annotations

import numpy as np
import pytest

from roofcast import api
from roofcast.predictor.llm.calibration import engine_calibration
from roofcast.predictor.llm.kernels import Segment
from roofcast.predictor.llm.phases import Step, engine_profile, time_steps
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.sim.steptable import Grid, monotone, step_tables
from roofcast.predictor.llm.types import ServingConfig

from .conftest import affine_table


def test_a_multilinear_time_is_interpolated_exactly():
    t = affine_table()
    for d, c, p in ((3, 700, 0), (100, 3000, 900), (0, 0, 5000), (1000, 8000, 16000)):
        assert t(d, c, p) == pytest.approx(5e-3 + 2e-5 * d + 1e-8 * d * c + 5e-5 * p)


def test_off_grid_steps_are_within_ten_percent_of_the_kernel_model():
    arch, hw = api.llm_arch("llama-3.1-8b"), api.device("h100-sxm")
    cfg = ServingConfig(input_tokens=512, output_tokens=256)
    profile = engine_profile(None, hw)
    grid = Grid.covering(256, 768, 8192, 512)
    table = step_tables(arch, [hw], cfg, profile, grid)[0]
    rng = np.random.default_rng(0)
    points = [(int(rng.integers(1, 256)), int(rng.integers(512, 768)),
               int(rng.choice([0, rng.integers(16, 8192)]))) for _ in range(12)]
    steps = [Step(f"s{i}", ((Segment(d, 1, c),) + ((grid.prefill_segment(p),) if p else ())))
             for i, (d, c, p) in enumerate(points)]
    raw = time_steps(arch, [hw], steps, TensorDtypes.of(cfg), profile).time_s[:, 0]
    cal = engine_calibration(profile.name)
    direct = np.array([cal.apply("decode", raw[i], hw, seqs=d)[0]
                       for i, (d, _, _) in enumerate(points)], float).ravel()
    approx = np.array([table(d, c, p) for d, c, p in points])
    err = np.abs(approx / direct - 1)
    # decode batches are timed at their powers of two (predictor.llm.ladder), so what is left
    # is the context and prefill axes' interpolation (12 points: max 4.2 %, median 2.3 %)
    assert np.median(err) < 0.03
    assert err.max() < 0.10


def test_the_table_never_gets_faster_with_more_work():
    arch, hw = api.llm_arch("llama-3.1-8b"), api.device("h100-sxm")
    cfg = ServingConfig(input_tokens=512, output_tokens=256)
    grid = Grid.covering(1024, 4096, 8192, 512, 64)
    table = step_tables(arch, [hw], cfg, engine_profile(None, hw), grid)[0]
    t = np.asarray(table.time_s)
    for axis in range(3):
        assert (np.diff(t, axis=axis) >= 0).all()
    rng = np.random.default_rng(1)
    for _ in range(200):
        d, c, p = rng.integers(1, 1024), rng.integers(64, 4096), rng.integers(0, 8192)
        more = (d + rng.integers(0, 64), c + rng.integers(0, 512), p + rng.integers(0, 512))
        assert table(*more) >= table(d, c, p)


def test_a_running_maximum_lifts_only_the_dips():
    t = np.array([[[1.0, 3.0, 2.0], [0.5, 4.0, 5.0]], [[0.8, 2.0, 6.0], [2.0, 1.0, 7.0]]])
    m = monotone(t)
    for axis in range(3):
        assert (np.diff(m, axis=axis) >= 0).all()
    assert (m >= t).all()
    assert m[0, 0, 0] == 1.0
    assert m[1, 1, 2] == 7.0
