"""Fit the collective step model to the packaged curves and write its parameter file.

    python benchmarks/fit_collectives.py

Reads ``predictor/data/collectives/curves.csv`` (built by
``python -m roofcast.training_data.public.collectives``), writes
``predictor/data/collectives/params.json`` with the curves' sha256. Networks the source does not
publish (Vidur's) are probed by each system's own 2-node send/recv curve
(``predictor/collectives/measured.py``), so the ``nic`` parameters describe NCCL on a NIC rather
than absorbing a network that is slower than the catalog system's datasheet NICs. The
folder's ``metadata.json`` (``predictor.fitted``) gets the fit's date, rows hash and error.
"""

from __future__ import annotations

import dataclasses
import json
import time

from roofcast.predictor.collectives.correction import CollectiveModel, params_document
from roofcast.predictor.collectives.curves import load_curves
from roofcast.predictor.collectives.params import DATA_DIR, PARAMS_PATH, data_sha256
from roofcast.predictor.fitted import library_versions, write_metadata


def main() -> int:
    t0 = time.perf_counter()
    curves = load_curves()
    model = CollectiveModel(curves, {}, {}).fit(curves)
    doc = params_document(data_sha256(), model.params, model.probes)
    PARAMS_PATH.write_text(json.dumps(doc, indent=1) + "\n")
    meta = dataclasses.replace(model.metadata, versions=library_versions("scipy"))
    write_metadata(DATA_DIR, meta)
    for k, p in model.params.items():
        print(f"{k:14s} step_overhead {p.step_overhead_us:7.2f} us  eff_max {p.eff_max:.3f}  "
              f"half_size {p.half_size_bytes / 2**20:8.3f} MiB")
    for s, probe in doc["network_probes"].items():
        nic = probe["nic"]
        print(f"probed network of {s}: {nic['count_per_node']} x {nic['GBps']:.1f} GB/s per node")
    print(f"wrote {PARAMS_PATH} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
