"""Fit the collective step model to the packaged curves and write its parameter file.

    python benchmarks/fit_collectives.py

Reads ``predictor/data/collectives/curves.csv`` (built by
``python -m roofcast.training_data.public.collectives``), writes
``predictor/data/collectives/params.json`` with the curves' sha256. Networks the source does not
publish (Vidur's) are probed by each system's own 2-node send/recv curve
(``predictor/collectives/measured.py``), so the ``nic`` parameters describe NCCL on a NIC rather
than absorbing a network that is slower than the catalog system's datasheet NICs.
"""

from __future__ import annotations

import dataclasses
import json
import time

from roofcast.predictor.collectives.curves import load_curves
from roofcast.predictor.collectives.fit import FIT_MAX_BYTES, FIT_MIN_BYTES, fit_params
from roofcast.predictor.collectives.measured import probe_points, probed_nic
from roofcast.predictor.collectives.params import CURVES_PATH, PARAMS_PATH, data_sha256


def main() -> int:
    t0 = time.perf_counter()
    curves = load_curves()
    probes = probe_points(curves, FIT_MAX_BYTES)
    params = fit_params(curves, probes)
    nics = {s: dataclasses.asdict(probed_nic(s, probe, params["nic/p2p"]))
            for s, probe in probes.items()}
    doc = {"data": CURVES_PATH.name, "data_sha256": data_sha256(),
           "fit_sizes_bytes": [FIT_MIN_BYTES, FIT_MAX_BYTES],
           "network_probes": {s: {"size_bytes": size, "time_s": t, "nic": nics[s]}
                              for s, (size, t) in probes.items()},
           "params": {k: dataclasses.asdict(p) for k, p in params.items()}}
    PARAMS_PATH.write_text(json.dumps(doc, indent=1) + "\n")
    for k, p in params.items():
        print(f"{k:14s} step_overhead {p.step_overhead_us:7.2f} us  eff_max {p.eff_max:.3f}  "
              f"half_size {p.half_size_bytes / 2**20:8.3f} MiB")
    for s, nic in nics.items():
        print(f"probed network of {s}: {nic['count_per_node']} x {nic['GBps']:.1f} GB/s per node")
    print(f"wrote {PARAMS_PATH} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
