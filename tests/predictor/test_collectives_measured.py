"""The measured curves' catalog systems (measured_as) and their measured layouts."""

from __future__ import annotations

import pytest

from roofcast.hw_catalog.systems import get_system, system_ids
from roofcast.predictor.collectives import collective_time_s
from roofcast.predictor.collectives.aic import AIC_SYSTEMS
from roofcast.predictor.collectives.curves import load_curves
from roofcast.predictor.collectives.measured import (
    GUESSED_NIC,
    catalog_system,
    group,
    measured_layout,
    network_published,
)
from roofcast.predictor.errors import PredictionError


def test_every_curve_system_is_named_by_exactly_one_catalog_system():
    names = [n for sid in system_ids() for n in get_system(sid).measured_as]
    assert len(names) == len(set(names))
    aic = {name for name, _ in AIC_SYSTEMS.values()}
    assert not aic & set(names)  # aiconfigurator's tables: placed by aic.AIC_SYSTEMS instead
    assert set(load_curves().system) == set(names) | aic
    assert group("a100_dgx") == group("azure_nd_a100_v4") == "dgx-a100"
    assert group("azure_nd_h200_v5") == "hgx-h200"


def test_layout_spans_the_measured_nodes_on_catalog_or_guessed_nics():
    dgx = measured_layout("a100_dgx", 16, 8)
    assert (dgx.nodes, dgx.devices_per_node, dgx.nic) == (2, 8, get_system("dgx-a100").nic)
    pairs = measured_layout("a100_pairwise_nvlink", 2, 1)
    assert (pairs.nodes, pairs.nic) == (2, GUESSED_NIC)
    assert measured_layout("a100_pairwise_nvlink", 4, 4).nic is None
    assert not network_published("a100_dgx")
    assert network_published("azure_nd_h100_v5")


def test_unknown_curve_system_is_refused():
    with pytest.raises(PredictionError, match="exactly one catalog system"):
        catalog_system("my_cluster")


def test_catalog_system_answers_with_its_measured_curve():
    curves = load_curves()
    row = curves[(curves.system == "azure_nd_h200_v5")].iloc[12]
    hgx = get_system("hgx-h200")
    assert collective_time_s("all_reduce", row.size_bytes, 8, hgx) == pytest.approx(row.time_s)


def test_probed_nic_reproduces_the_probe_and_the_fit_skips_probe_curves():
    from roofcast.predictor.collectives import model_time_s
    from roofcast.predictor.collectives.fit import fit_rows, is_probe
    from roofcast.predictor.collectives.measured import probe_points, probed_nic
    from roofcast.predictor.collectives.params import load_params

    curves = load_curves()
    probes = probe_points(curves, 2**30)
    assert set(probes) == {"a100_dgx", "h100_dgx", "a100_pairwise_nvlink", "a40_pairwise_nvlink"}
    size, time_s = probes["a100_dgx"]
    params = load_params()
    nic = probed_nic("a100_dgx", (size, time_s), params["nic/p2p"])
    assert nic.count_per_node == get_system("dgx-a100").nic.count_per_node
    layout = measured_layout("a100_dgx", 2, 1, nic)
    assert model_time_s("send_recv", size, 2, layout, params, ranks_per_node=1) == pytest.approx(
        time_s
    )
    assert is_probe(curves, probes).sum() == sum(
        (
            (curves.system == s) & (curves.collective == "send_recv") & (curves.ranks_per_node == 1)
        ).sum()
        for s in probes
    )
    assert not is_probe(fit_rows(curves, probes), probes).any()
    with pytest.raises(PredictionError, match="cannot probe"):
        probed_nic("a100_dgx", (size, 1e-9), params["nic/p2p"])
