"""Fit the collective step model to the packaged curves and write its parameter file.

    python benchmarks/fit_collectives.py [--aiconfigurator DIR]

Reads ``predictor/data/collectives/curves.csv`` (Vidur / Azure curves built by
``python -m roofcast.training_data.public.collectives``), replaces its aiconfigurator rows with
those of ``DIR`` (default ``../shared/data/aiconfigurator/data``; ``predictor.collectives.aic``:
NCCL and the engines' custom all-reduce, intra-node) and writes it back, then writes
``predictor/data/collectives/params.json`` with the curves' sha256. Networks the source does not
publish (Vidur's) are probed by each system's own 2-node send/recv curve
(``predictor/collectives/measured.py``), so the ``nic`` parameters describe NCCL on a NIC rather
than absorbing a network that is slower than the catalog system's datasheet NICs. The
folder's ``metadata.json`` (``predictor.fitted``) gets the fit's date, rows hash and error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import pandas as pd

from roofcast.predictor.collectives.aic import AIC_SYSTEMS, aic_curves
from roofcast.predictor.collectives.correction import CollectiveModel, params_document
from roofcast.predictor.collectives.curves import load_curves
from roofcast.predictor.collectives.params import CURVES_PATH, DATA_DIR, PARAMS_PATH, data_sha256
from roofcast.predictor.fitted import library_versions, write_metadata
from roofcast.training_data.public_kernels import shared_data_dir

#: aiconfigurator's data/ folder in the public data (``$ROOFCAST_SHARED_DATA``, else ../shared/data)
AIC_DIR = shared_data_dir() / "aiconfigurator" / "data"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aiconfigurator", type=Path, default=AIC_DIR, metavar="DIR")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    names = {name for name, _ in AIC_SYSTEMS.values()}
    base = load_curves()
    aic = aic_curves(args.aiconfigurator)
    if aic.empty:
        print(f"fit_collectives: no aiconfigurator comm tables under {args.aiconfigurator}; "
              "give --aiconfigurator DIR (its data/ folder)")
        return 2
    curves = pd.concat([base[~base.system.isin(names)], aic], ignore_index=True)
    curves.to_csv(CURVES_PATH, index=False)
    load_curves.cache_clear()
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
