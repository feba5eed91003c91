"""A synthetic step table (no kernel model: engine tests stay fast and exact) and helpers."""

from __future__ import annotations

import pytest

from roofcast.predictor.llm.sim.steptable import Grid, StepTable


def affine_table(base_s: float = 5e-3, per_seq_s: float = 2e-5, per_kv_s: float = 1e-8,
                 per_prompt_s: float = 5e-5, max_seqs: int = 1024, max_ctx: int = 8192,
                 max_prefill: int = 16384) -> StepTable:
    """t = base + per_seq d + per_kv d c + per_prompt p on a grid (multilinear: exact)."""
    grid = Grid.covering(max_seqs, max_ctx, max_prefill, 512)
    t = [[[0.0 if d + p == 0 else base_s + per_seq_s * d + per_kv_s * d * c + per_prompt_s * p
           for p in grid.prefill] for c in grid.context] for d in grid.decode]
    return StepTable(grid, t)


@pytest.fixture
def table() -> StepTable:
    return affine_table()
