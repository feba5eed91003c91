"""engine_tables.grid: multilinear reads, no extrapolation, sequences split past a line."""

from __future__ import annotations

import numpy as np
import pytest

from roofcast.predictor.engine_tables.grid import Grid

AXES = (np.array([1.0, 16.0, 128.0]), np.array([256.0, 1024.0]), np.array([512.0, 4096.0]))


def _gemm_like() -> Grid:
    m, n, k = np.meshgrid(*AXES, indexing="ij")
    return Grid(AXES, 3e-6 + 1e-15 * m * n * k)


def test_multilinear_read_is_exact_for_a_floor_plus_work_time():
    pts = np.array([[7.0, 300.0, 1000.0], [100.0, 1000.0, 4000.0], [128.0, 256.0, 512.0]])
    want = 3e-6 + 1e-15 * pts.prod(axis=1)
    # one axis at a time the time c0 + c1 m n k is linear, so the corners give it exactly
    assert _gemm_like().at(pts) == pytest.approx(want, rel=1e-12)


def test_outside_the_axes_nothing_is_extrapolated():
    got = _gemm_like().at(np.array([[0.5, 300.0, 1000.0], [129.0, 300.0, 1000.0],
                                    [16.0, 2048.0, 512.0]]))
    assert np.isnan(got).all()


def test_a_missing_corner_gives_no_value_unless_its_weight_is_zero():
    g = _gemm_like()
    values = g.values.copy()
    values[2, 1, 1] = np.nan  # m=128, n=1024, k=4096 not measured
    holed = Grid(AXES, values)
    assert np.isnan(holed.at(np.array([[100.0, 1000.0, 4000.0]])))[0]
    on_line = np.array([[16.0, 1024.0, 4096.0]])  # exactly on m=16: the m=128 corner weighs 0
    assert holed.at(on_line) == pytest.approx(g.at(on_line))


def test_sequences_past_a_lines_last_measured_count_split_into_kernels_of_that_size():
    seqs, tokens = np.array([1.0, 8.0, 64.0]), np.array([128.0, 1024.0])
    values = np.array([[2e-6, 4e-6], [5e-6, 20e-6], [30e-6, np.nan]])
    g = Grid((seqs, tokens), values)
    inside = np.array([[4.0, 500.0]])
    assert g.at_sequences(inside) == pytest.approx(g.at(inside))
    # tokens 1024 measured up to 8 sequences: 32 sequences run as 4 kernels of 8
    assert g.at_sequences(np.array([[32.0, 1024.0]]))[0] == pytest.approx(4 * 20e-6)
    assert g.at_sequences(np.array([[128.0, 128.0]]))[0] == pytest.approx(2 * 30e-6)
    assert np.isnan(g.at_sequences(np.array([[8.0, 2048.0], [0.5, 128.0]]))).all()


def test_independent_rows_and_columns_split_past_the_grid_but_a_reduction_does_not():
    g = _gemm_like()
    edge = g.at(np.array([[128.0, 1024.0, 1000.0]]))[0]
    assert g.at(np.array([[384.0, 1024.0, 1000.0]]), split=(0, 1))[0] == pytest.approx(3 * edge)
    assert g.at(np.array([[128.0, 2048.0, 1000.0]]), split=(0, 1))[0] == pytest.approx(2 * edge)
    assert np.isnan(g.at(np.array([[128.0, 1024.0, 8192.0]]), split=(0, 1)))[0]
    assert np.isnan(g.at(np.array([[384.0, 1024.0, 1000.0]])))[0]  # no split asked: no value
