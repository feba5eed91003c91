"""Sweep speed: ResNet-50 over 40 catalog devices x 8 batch sizes in one ``predictor.sweep`` call.

Run: ``python benchmarks/sweep_speed.py [--model resnet50] [--devices 40] [--repeats 3]``.
Prints a table of wall times (best of ``--repeats``, after one warm-up call):

* ``import x8``: importing the model once per batch (shape inference + costs), 8 imports;
* ``sweep (graphs imported)``: ``sweep`` with the 8 graphs already imported — workloads,
  device broadcast, one estimator call, totals, memory;
* ``sweep incl. import``: the whole what-if question from the ONNX file (the two above).
Also the same with training mode (forward + backward + update rows) and with inter-op
critical paths. Target: well under 2 s for the inference sweep including import.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from roofcast.hw_catalog.catalog import list_devices
from roofcast.models import load_model
from roofcast.predictor.sweep import sweep

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)


def best_of(fn, repeats: int) -> float:
    fn()  # warm-up (imports, catalog cache)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--devices", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    devices = [d.id for d in list_devices()][: args.devices]
    graphs = {}

    def do_import():
        graphs.update({b: load_model(args.model, batch=b).graph for b in BATCHES})

    t_import = best_of(do_import, args.repeats)
    rows = [{"what": f"import x{len(BATCHES)}", "cells": "", "wall_s": t_import}]
    cases = [("sweep infer (graphs imported)", {}), ("sweep train (graphs imported)",
             {"modes": ["train"]}), ("sweep infer inter-op (graphs imported)",
             {"inter_op": True})]
    for label, kw in cases:
        t = best_of(lambda kw=kw: sweep(graphs.__getitem__, devices, BATCHES, **kw), args.repeats)
        rows.append({"what": label, "cells": f"{len(devices)}x{len(BATCHES)}", "wall_s": t})
    t_full = best_of(
        lambda: sweep(lambda b: load_model(args.model, batch=b).graph, devices, BATCHES),
        args.repeats,
    )
    rows.append({"what": "sweep infer incl. import", "cells": f"{len(devices)}x{len(BATCHES)}",
                 "wall_s": t_full})
    print(f"model {args.model}, {len(devices)} devices, batches {list(BATCHES)}")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
