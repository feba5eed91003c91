"""Multi-device accuracy: collectives leave-one-system-out against the measured curves.

    python benchmarks/multidevice_accuracy.py

For each hardware group (``predictor/collectives/standins.py``: Vidur's DGX and Azure's ND of the
same GPU are one group, left out together) the step model is fitted without the group's curves
and predicts them at the measured sizes from 1 MiB to 1 GiB, each on the system's stand-in
description (TO BE REPLACED by the systems catalog). Error = |predicted - measured| / measured.
Target: median <= 15 %. The tensor/pipeline-parallel serving rows (Argonne Fig 5a) come with the
parallel workloads (next session).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.predictor.collectives.curves import load_curves
from roofcast.predictor.collectives.fit import fit_params, predict_rows
from roofcast.predictor.collectives.standins import MEASURED_SYSTEMS

MIN_BYTES, MAX_BYTES = 2**20, 2**30


def loso_errors(curves: pd.DataFrame) -> pd.DataFrame:
    groups = curves.system.map(lambda s: MEASURED_SYSTEMS[s].group)
    parts = []
    for group in sorted(groups.unique()):
        params = fit_params(curves[groups != group])
        test = curves[(groups == group) & curves.size_bytes.between(MIN_BYTES, MAX_BYTES)]
        pred = predict_rows(test, params)
        parts.append(test.assign(pred_s=pred, err_pct=100 * np.abs(pred - test.time_s) / test.time_s))
    return pd.concat(parts, ignore_index=True)


def summary(errors: pd.DataFrame) -> pd.DataFrame:
    errors = errors.assign(ranks=errors.n_ranks.astype(str) + "/" + errors.ranks_per_node.astype(str))
    g = errors.groupby(["system", "collective"]).err_pct
    table = pd.DataFrame({"points": g.size(), "median_%": g.median(), "mean_%": g.mean(),
                          "p90_%": g.quantile(0.9),
                          "ranks(n/per node)": errors.groupby(["system", "collective"]).ranks.agg(
                              lambda r: " ".join(sorted(set(r))))})
    return table.round(1)


def main() -> int:
    errors = loso_errors(load_curves())
    print("Collectives, leave-one-system-out (hardware group left out of the fit), 1 MiB..1 GiB")
    print(summary(errors).to_string())
    unknown_net = (errors.ranks_per_node < errors.n_ranks) & ~errors.system.map(
        lambda s: MEASURED_SYSTEMS[s].nic_published)
    for name, part in (("single-node and published-network curves", errors[~unknown_net]),
                       ("cross-node curves whose network is not published (NIC guessed)",
                        errors[unknown_net]), ("all", errors)):
        e = part.err_pct
        print(f"{name}: {len(e)} points, median {e.median():.1f} %, mean {e.mean():.1f} %, "
              f"p90 {e.quantile(0.9):.1f} % (target median <= 15 %)")
    print("TP/PP serving rows (Argonne Fig 5a): not yet - they come with the parallel workloads.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
