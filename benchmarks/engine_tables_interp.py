"""How well the engine tables interpolate: each interior grid line held out, read from its
neighbours.

    python benchmarks/engine_tables_interp.py [--max-grids N]

For every shipped table (``predictor/data/engine_tables``): GEMM grids lose one interior ``n``
or ``k`` line at a time (m lines sit on both sides of each tile step, so they are not held
out), attention grids one interior tokens line, and also one interior sequences line; the held
out cells are then read by ``Grid.at`` (GEMM) / ``Grid.at_sequences`` (attention) from the
rest and compared with their measured times. Printed: |predicted / measured - 1| median and
90th percentile per table and device, and over all. A shape between grid lines in use sits
half as far from a measured line as these held-out ones, so these figures bound the error of
an off-grid lookup from above; ``TABLE_BAND`` (``engine_tables.estimator``) is their p90.
Nothing is fitted here.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from roofcast.predictor.engine_tables.grid import Grid
from roofcast.predictor.engine_tables.store import _measured_grid, load


def _held_out(grid: Grid, axis: int, reader: str) -> list[float]:
    """Errors of every interior line of ``axis`` read from the other lines."""
    errs = []
    for i in range(1, len(grid.axes[axis]) - 1):
        keep = np.ones(len(grid.axes[axis]), bool)
        keep[i] = False
        axes = list(grid.axes)
        axes[axis] = axes[axis][keep]
        reduced = Grid(tuple(axes), np.compress(keep, grid.values, axis=axis))
        line = np.atleast_1d(np.take(grid.values, i, axis=axis))
        idx = np.argwhere(np.isfinite(line))
        if not len(idx):
            continue
        pts = np.zeros((len(idx), len(grid.axes)))
        other = [d for d in range(len(grid.axes)) if d != axis]
        for col, d in enumerate(other):
            pts[:, d] = grid.axes[d][idx[:, col]]
        pts[:, axis] = grid.axes[axis][i]
        got = getattr(reduced, reader)(pts)
        meas = line[tuple(idx.T)] if len(grid.axes) > 1 else line
        ok = np.isfinite(got)
        errs += list(np.abs(got[ok] / meas[ok] - 1))
    return errs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-grids", type=int, default=400,
                    help="attention grids sampled per table (default 400; 0: all)")
    args = ap.parse_args(argv)
    tables = load()
    if tables is None:
        raise SystemExit("no engine tables shipped (python -m roofcast.predictor.engine_tables"
                         ".build)")
    devices = tables.meta["devices"]
    rows = []
    rng = np.random.default_rng(0)
    for table, axes, reader, held in (("gemm", ("m", "n", "k"), "at", (1, 2)),
                                      ("context", ("batch", "tokens"), "at_sequences", (0, 1)),
                                      ("generation", ("batch", "tokens"), "at_sequences",
                                       (0, 1)),
                                      ("moe", ("tokens",), "at", (0,))):
        keys = tables.arrays[f"{table}_keys"]
        pick = np.arange(len(keys))
        if table in ("context", "generation") and args.max_grids and len(pick) > args.max_grids:
            pick = np.sort(rng.choice(pick, args.max_grids, replace=False))
        for g in pick:
            grid = _measured_grid([tables.arrays[f"{table}_{a}"].astype(float) for a in axes],
                                  np.exp(tables.arrays[f"{table}_log_us"][g].astype(float)))
            for axis in held:
                for e in _held_out(grid, axis, reader):
                    rows.append((table, devices[keys[g][0]], axes[axis], e))
    df = pd.DataFrame(rows, columns=["table", "device", "held_out", "err"])
    agg = df.groupby(["table", "held_out", "device"])["err"].agg(
        n="size", median=lambda e: 100 * e.median(), p90=lambda e: 100 * e.quantile(0.9))
    pd.set_option("display.width", 140)
    print(agg.round(1).to_string())
    allr = df.groupby("table")["err"].agg(n="size", median=lambda e: 100 * e.median(),
                                          p90=lambda e: 100 * e.quantile(0.9))
    print("\nall held-out cells (%):")
    print(allr.round(1).to_string())
    print(f"\noverall: median {100 * df['err'].median():.1f} %, "
          f"p90 {100 * df['err'].quantile(0.9):.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
