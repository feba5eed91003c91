"""Multi-device accuracy: collectives leave-one-system-out against the measured curves.

    python benchmarks/multidevice_accuracy.py [--catalog-nics] [--aic-only]

For each hardware group (the catalog system whose curves they are: Vidur's DGX, Azure's ND and
aiconfigurator's tables of the same GPU are one group, left out together) the step model is
fitted without the group's curves and predicts them, each on its catalog system laid out as
measured (``predictor/collectives/measured.py``): NCCL curves from 1 MiB to 1 GiB, the engines'
custom all-reduce (``custom_all_reduce``) at every size it has. *before*: fitted on the Vidur /
Azure curves only (the engines' kernels on the send/recv parameters, as before the custom
fit); *after*: on every shipped curve. Networks the source does not publish are probed by each
system's own 2-node send/recv curve (``--catalog-nics``: also on catalog/guessed NICs).
``--aic-only``: score the aiconfigurator tables only (fewer fits; the whole run takes ~16 fits).
Error = |predicted - measured| / measured; target median <= 15 %. Then the TP/PP serving rows
of Argonne Fig 5a (``benchmarks/tp_pp_serving``) where that module exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.predictor.collectives.aic import AIC_SYSTEMS, CUSTOM_ALL_REDUCE
from roofcast.predictor.collectives.curves import load_curves
from roofcast.predictor.collectives.fit import FIT_MAX_BYTES, fit_params, is_probe, predict_rows
from roofcast.predictor.collectives.measured import group, network_published, probe_points

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling benchmarks, as llm_accuracy.py

MIN_BYTES, MAX_BYTES = 2**20, 2**30
AIC_NAMES = frozenset(name for name, _ in AIC_SYSTEMS.values())


def scored(test: pd.DataFrame) -> pd.DataFrame:
    """The rows a group is scored on: NCCL curves in MIN..MAX_BYTES, every custom all-reduce."""
    custom = test.collective == CUSTOM_ALL_REDUCE
    return test[custom | test.size_bytes.between(MIN_BYTES, MAX_BYTES)]


def loso_errors(fit_curves: pd.DataFrame, test_curves: pd.DataFrame, probe: bool = False,
                p2p_custom: bool = False) -> pd.DataFrame:
    """Per scored point of ``test_curves``: the prediction of the parameters fitted on
    ``fit_curves`` without the point's hardware group. ``probe``: systems whose network is not
    published get the NIC their own 2-node send/recv curve implies (that curve is not scored);
    ``p2p_custom``: engine kernels on the send/recv parameters (the model before its custom
    fit)."""
    fit_groups = fit_curves.system.map(group)
    test_groups = test_curves.system.map(group)
    probes = probe_points(fit_curves, FIT_MAX_BYTES) if probe else {}
    fits: dict[frozenset, dict] = {}
    parts = []
    for left_out in sorted(test_groups.unique()):
        keep = fit_groups != left_out
        key = frozenset(fit_curves.system[~keep])
        if key not in fits:
            fits[key] = fit_params(fit_curves[keep], probes)
        params = fits[key]
        if p2p_custom:
            params = params | {k.replace("/p2p", "/custom"): v for k, v in params.items()
                               if k.endswith("/p2p")}
        test = scored(test_curves[test_groups == left_out])
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
    aic = errors.system.isin(AIC_NAMES)
    custom = errors.collective == CUSTOM_ALL_REDUCE
    for name, part in (("single-node and published-network curves", errors[~unknown_net]),
                       (cross_label, errors[unknown_net]),
                       ("aiconfigurator NCCL tables", errors[aic & ~custom]),
                       ("engines' custom all-reduce", errors[custom]), ("all", errors)):
        e = part.err_pct
        if e.empty:
            continue
        print(f"  {name}: {len(e)} points, median {e.median():.1f} %, mean {e.mean():.1f} %, "
              f"p90 {e.quantile(0.9):.1f} % (target median <= 15 %)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    curves = load_curves()
    base = curves[~curves.system.isin(AIC_NAMES)]
    print("Collectives, leave-one-system-out (hardware group left out of the fit); NCCL "
          f"{MIN_BYTES >> 20} MiB..{MAX_BYTES >> 30} GiB, custom all-reduce at every size;")
    print("networks the source does not publish probed by each system's own 2-node send/recv "
          "curve (probe curves not scored).")
    test = curves[curves.system.isin(AIC_NAMES)] if "--aic-only" in argv else curves
    before = loso_errors(base, test, probe=True, p2p_custom=True)
    after = loso_errors(curves, test, probe=True)
    table = summary(before)[["median_%", "mean_%"]].join(summary(after), lsuffix="_before")
    print(table.to_string())
    for name, errors in (("before (fitted on Vidur/Azure only)", before),
                         ("after (fitted on every shipped curve)", after)):
        print(name + ":")
        print_figures(errors, "cross-node curves, network probed")
    if "--catalog-nics" in argv:
        print("Cross-node curves laid out on the catalog system's NICs (DGX A100: 8x 200 Gb/s "
              "HDR) or a guess (1x 25 GbE), probe curves scored too:")
        print_figures(loso_errors(curves, curves), "cross-node curves whose network is not "
                      "published (NIC as catalog/guess)")
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
