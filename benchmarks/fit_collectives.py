"""Fit the collective step model to the packaged curves and write its parameter file.

    python benchmarks/fit_collectives.py

Reads ``predictor/data/collectives/curves.csv`` (built by
``python -m roofcast.training_data.public.collectives``), writes
``predictor/data/collectives/params.json`` with the curves' sha256.
"""

from __future__ import annotations

import dataclasses
import json
import time

from roofcast.predictor.collectives.curves import load_curves
from roofcast.predictor.collectives.fit import FIT_MAX_BYTES, FIT_MIN_BYTES, fit_params
from roofcast.predictor.collectives.params import CURVES_PATH, PARAMS_PATH, data_sha256


def main() -> int:
    t0 = time.perf_counter()
    params = fit_params(load_curves())
    doc = {"data": CURVES_PATH.name, "data_sha256": data_sha256(),
           "fit_sizes_bytes": [FIT_MIN_BYTES, FIT_MAX_BYTES],
           "params": {k: dataclasses.asdict(p) for k, p in params.items()}}
    PARAMS_PATH.write_text(json.dumps(doc, indent=1) + "\n")
    for k, p in params.items():
        print(f"{k:14s} step_overhead {p.step_overhead_us:7.2f} us  eff_max {p.eff_max:.3f}  "
              f"half_size {p.half_size_bytes / 2**20:8.3f} MiB")
    print(f"wrote {PARAMS_PATH} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
