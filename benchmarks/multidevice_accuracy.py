"""Multi-device accuracy: collectives leave-one-system-out against the measured curves.

    python benchmarks/multidevice_accuracy.py

For each hardware group (the catalog system whose ``measured_as`` names the curves: Vidur's DGX
and Azure's ND of the same GPU are one group, left out together) the step model is fitted
without the group's curves and predicts them at the measured sizes from 1 MiB to 1 GiB, each on
its catalog system laid out as measured (``predictor/collectives/measured.py``).
Networks the source does not publish are probed by each system's own 2-node send/recv curve, as
the shipped parameters are fitted (``benchmarks/fit_collectives.py``); the same with catalog/
guessed NICs is printed for comparison. Error = |predicted - measured| / measured. Target:
median <= 15 %. Then the tensor/pipeline-
parallel serving rows of Argonne Fig 5a (``benchmarks/tp_pp_serving.tp_pp_rows_table``) where
that module exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.predictor.collectives.curves import load_curves
from roofcast.predictor.collectives.fit import FIT_MAX_BYTES, fit_params, is_probe, predict_rows
from roofcast.predictor.collectives.measured import group, network_published, probe_points

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling benchmarks, as llm_accuracy.py

MIN_BYTES, MAX_BYTES = 2**20, 2**30


def loso_errors(curves: pd.DataFrame, probe: bool = False) -> pd.DataFrame:
    """Per measured point in 1 MiB..1 GiB: the prediction with the point's hardware group left
    out of the fit. ``probe``: systems whose network is not published get the NIC their own
    2-node send/recv curve implies (that curve is then not scored)."""
    groups = curves.system.map(group)
    probes = probe_points(curves, FIT_MAX_BYTES) if probe else {}
    parts = []
    for left_out in sorted(groups.unique()):
        params = fit_params(curves[groups != left_out], probes)
        test = curves[(groups == left_out) & curves.size_bytes.between(MIN_BYTES, MAX_BYTES)]
        test = test[~is_probe(test, probes)]
        pred = predict_rows(test, params, probes)
        parts.append(
            test.assign(pred_s=pred, err_pct=100 * np.abs(pred - test.time_s) / test.time_s)
        )
    return pd.concat(parts, ignore_index=True)


def summary(errors: pd.DataFrame) -> pd.DataFrame:
    errors = errors.assign(
        ranks=errors.n_ranks.astype(str) + "/" + errors.ranks_per_node.astype(str)
    )
    g = errors.groupby(["system", "collective"]).err_pct
    table = pd.DataFrame({"points": g.size(), "median_%": g.median(), "mean_%": g.mean(),
                          "p90_%": g.quantile(0.9),
                          "ranks(n/per node)": errors.groupby(["system", "collective"]).ranks.agg(
                              lambda r: " ".join(sorted(set(r))))})
    return table.round(1)


def print_figures(errors: pd.DataFrame, cross_label: str) -> None:
    unknown_net = (errors.ranks_per_node < errors.n_ranks) & ~errors.system.map(network_published)
    for name, part in (("single-node and published-network curves", errors[~unknown_net]),
                       (cross_label, errors[unknown_net]), ("all", errors)):
        e = part.err_pct
        print(f"  {name}: {len(e)} points, median {e.median():.1f} %, mean {e.mean():.1f} %, "
              f"p90 {e.quantile(0.9):.1f} % (target median <= 15 %)")


def main() -> int:
    curves = load_curves()
    errors = loso_errors(curves, probe=True)
    print("Collectives, leave-one-system-out (hardware group left out of the fit), 1 MiB..1 GiB;")
    print("networks the source does not publish probed by each system's own 2-node send/recv curve")
    print(
        "at its largest size, as benchmarks/fit_collectives.py fits them (probe curves not scored):"
    )
    print(summary(errors).to_string())
    print_figures(errors, "cross-node curves, network probed")
    catalog = loso_errors(curves)
    print("For comparison, cross-node curves laid out on the catalog system's NICs (DGX A100: 8x "
          "200 Gb/s HDR) or a guess (1x 25 GbE), probe curves scored too:")
    print_figures(
        catalog, "cross-node curves whose network is not published (NIC as catalog/guess)"
    )
    print_serving_rows()
    return 0


def print_serving_rows() -> None:
    """The TP/PP serving rows (Argonne Fig 5a) from ``benchmarks/tp_pp_serving.py``."""
    try:
        from tp_pp_serving import main as tp_pp_main
    except ModuleNotFoundError as exc:
        if exc.name != "tp_pp_serving":
            raise
        print("TP/PP serving rows (Argonne Fig 5a): not available (benchmarks/tp_pp_serving.py "
              "is not there)")
        return
    print("TP/PP serving rows (benchmarks/tp_pp_serving.py; --rows there prints every row):")
    tp_pp_main([])


if __name__ == "__main__":
    raise SystemExit(main())
