"""Collective step models, measured-curve interpolation, validation and the fitted file."""

from __future__ import annotations

import itertools
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from roofcast.predictor.collectives import COLLECTIVES, collective_time_s, model_time_s
from roofcast.predictor.collectives.curves import load_curves
from roofcast.predictor.collectives.params import (
    PARAMS_PATH,
    FabricParams,
    data_sha256,
    load_params,
)
from roofcast.predictor.collectives.steps import ALGORITHMS, INTER, Layout
from roofcast.predictor.errors import PredictionError

MiB = 2**20


def system(kind="nvswitch", link=300.0, per_node=8, nodes=1, nic=True, **extra):
    return SimpleNamespace(
        fabric=SimpleNamespace(kind=kind, link_GBps=link, latency_us=2.0),
        devices_per_node=per_node,
        nodes=nodes,
        nic=SimpleNamespace(count_per_node=8, GBps=25.0, latency_us=5.0) if nic else None,
        **extra,
    )


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_ring_all_reduce_moves_2_n_minus_1_over_n_of_the_size(n):
    (phase,) = ALGORITHMS["all_reduce"]["ring"](1000.0, Layout(n, n, "nvswitch", 300.0))
    assert phase.steps == 2 * (n - 1)
    assert phase.wire_bytes == pytest.approx(2 * (n - 1) / n * 1000.0)
    (gather,) = ALGORITHMS["all_gather"]["ring"](1000.0, Layout(n, n, "nvswitch", 300.0))
    assert (gather.steps, gather.wire_bytes) == (n - 1, pytest.approx((n - 1) / n * 1000.0))


def test_nvls_only_on_nvlink4_switches_and_rings_across_nodes_use_every_ranks_nic():
    nvls = ALGORITHMS["all_reduce"]["nvls"]
    assert nvls(1e6, Layout(8, 8, "nvswitch", 300.0)) is None
    assert nvls(1e6, Layout(8, 8, "nvswitch", 450.0))[0].wire_bytes == 1e6
    assert nvls(1e6, Layout(16, 8, "nvswitch", 450.0)) is None  # one node only
    (ring,) = ALGORITHMS["all_reduce"]["ring"](16e6, Layout(16, 8, "nvswitch", 300.0))
    # NCCL's ring over all 16 ranks: each node's 8 NIC shares carry it in parallel
    assert (ring.level, ring.streams, ring.steps) == (INTER, 8, 30)
    assert ring.wire_bytes == pytest.approx(2 * 15 / 16 * 16e6)
    (gather,) = ALGORITHMS["all_gather"]["ring"](16e6, Layout(4, 1, "nvswitch", 300.0))
    assert (gather.level, gather.streams, gather.wire_bytes) == (INTER, 1, pytest.approx(12e6))
    assert ALGORITHMS["all_reduce"]["tree"](1e6, Layout(16, 8, "nvswitch", 300.0)) is None


def test_closed_form_time_of_send_recv():
    p = {"nvswitch/p2p": FabricParams(3.0, 0.5, 0.0)}
    t = model_time_s("send_recv", 1e9, 2, system(), p)
    assert t == pytest.approx((2.0 + 3.0) * 1e-6 + 1e9 / (300e9 * 0.5))


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize(("n", "nodes"), [(2, 1), (8, 1), (16, 2)])
def test_model_time_grows_with_size(collective, n, nodes):
    sysm = system(link=450.0, nodes=nodes)
    sizes = [2**k for k in range(10, 33, 2)]
    times = [model_time_s(collective, s, n, sysm) for s in sizes]
    assert all(b > a for a, b in itertools.pairwise(times))


def test_measured_curve_is_exact_at_measured_points_and_used_only_for_that_system():
    curves = load_curves()
    rows = curves[(curves.system == "h100_dgx") & (curves.collective == "all_reduce")
                  & (curves.n_ranks == 8)].sort_values("size_bytes")
    sysm = system(link=450.0, id="my-box", measured_as=("h100_dgx",))
    for r in rows.iloc[[0, len(rows) // 2, -1]].itertuples():
        assert collective_time_s("all_reduce", r.size_bytes, 8, sysm) == pytest.approx(
            r.time_s, rel=1e-9
        )
    a, b = rows.iloc[10], rows.iloc[11]
    mid = math.sqrt(a.size_bytes * b.size_bytes)
    assert collective_time_s("all_reduce", mid, 8, sysm) == pytest.approx(
        math.sqrt(a.time_s * b.time_s)
    )
    other = system(link=450.0, id="other")
    assert collective_time_s("all_reduce", a.size_bytes, 8, other) == model_time_s(
        "all_reduce", a.size_bytes, 8, other)


@pytest.mark.parametrize(("args", "match"), [
    (("broadcast", 1e6, 8), "unknown collective"),
    (("all_reduce", 1e6, 1), "2..8 ranks"),
    (("all_reduce", 1e6, 9), "2..8 ranks"),
    (("all_reduce", -1, 8), ">= 0 bytes"),
])
def test_bad_requests_are_refused(args, match):
    with pytest.raises(PredictionError, match=match):
        collective_time_s(*args, system())


def test_spanning_nodes_without_a_nic_is_refused():
    with pytest.raises(PredictionError, match="no NIC"):
        collective_time_s("all_reduce", 1e6, 16, system(nodes=2, nic=False))
    with pytest.raises(PredictionError, match="whole nodes"):
        collective_time_s("all_reduce", 1e6, 12, system(nodes=2))


def test_unknown_fabric_kind_names_the_fitted_ones():
    with pytest.raises(PredictionError, match="fitted kinds"):
        model_time_s("all_reduce", 1e6, 8, system(kind="carrier-pigeon"))


def test_fitted_parameter_file_matches_its_curves():
    doc = json.loads(PARAMS_PATH.read_text())
    assert doc["data_sha256"] == data_sha256()
    params = load_params()
    assert {"nvswitch", "nvlink-pairs", "nic"} <= set(params)
    assert all(0 < p.eff_max <= 1 and p.step_overhead_us >= 0 for p in params.values())


def test_packaged_curves_keep_source_and_licence():
    curves = load_curves()
    # Vidur / Azure (MIT), aiconfigurator (Apache-2.0)
    assert curves.licence.isin(["MIT", "Apache-2.0"]).all()
    assert curves.licence.eq("Apache-2.0").eq(curves.source.str.contains("aiconfigurator")).all()
    assert curves.source.str.len().gt(0).all()
    assert np.isfinite(curves.time_s).all()
    assert (curves.time_s > 0).all()


def test_strided_group_crosses_the_nic_where_a_packed_one_does_not():
    four_nodes = system(link=450.0, nodes=4)
    packed = collective_time_s("all_reduce", 256 * MiB, 4, four_nodes)
    strided = collective_time_s("all_reduce", 256 * MiB, 4, four_nodes, 1)
    assert strided == model_time_s("all_reduce", 256 * MiB, 4, four_nodes, ranks_per_node=1)
    assert strided > 5 * packed  # 25 GB/s NIC vs 450 GB/s NVSwitch
    two_per_node = collective_time_s("all_reduce", 256 * MiB, 4, four_nodes, 2)
    assert packed < two_per_node < strided


def test_ranks_sharing_a_nic_each_get_nic_total_over_sharers():
    one_nic = system(nodes=4, nic=False)
    one_nic.nic = SimpleNamespace(count_per_node=1, GBps=50.0, latency_us=5.0)
    p = {"nic/p2p": FabricParams(0.0, 1.0, 0.0)}
    alone = model_time_s("send_recv", 1e9, 2, one_nic, p, ranks_per_node=1)
    busy = model_time_s("send_recv", 1e9, 2, one_nic, p, ranks_per_node=1, concurrent_per_node=8)
    assert alone == pytest.approx(5e-6 + 1e9 / 50e9)
    assert busy == pytest.approx(5e-6 + 1e9 / (50e9 / 8))
    eight_nics = system(nodes=4)  # one NIC per device: sharing changes nothing
    p8 = {"nic/p2p": FabricParams(0.0, 1.0, 0.0)}
    assert model_time_s("send_recv", 1e9, 2, eight_nics, p8, ranks_per_node=1,
                        concurrent_per_node=8) == pytest.approx(5e-6 + 1e9 / 25e9)


@pytest.mark.parametrize(("n", "rpn", "extra", "match"), [
    (4, 3, {}, "whole nodes of 3"),
    (4, 0, {}, "whole number >= 1"),
    (4, 8, {}, "more than the group's 4 ranks"),
    (8, 1, {}, "need 8 nodes; the system has 4"),
    (4, 1, {"concurrent_per_node": 9}, "between the group's 1 ranks per node and the node's 8"),
])
def test_bad_placements_are_refused(n, rpn, extra, match):
    with pytest.raises(PredictionError, match=match):
        collective_time_s("all_reduce", 1e6, n, system(nodes=4), rpn, **extra)


def test_uncurved_fabric_kinds_borrow_fitted_parameters():
    for kind in ("nvlink-domain", "infinity-fabric", "pcie-switch", "pcie-host"):
        assert model_time_s("all_reduce", 64 * MiB, 8, system(kind=kind, link=450.0)) > 0
    fully = system(kind="infinity-fabric", link=448.0)
    p = {"nvswitch/p2p": FabricParams(0.0, 1.0, 0.0)}
    # a pair uses 1 of a device's 7 links: 64 GB/s
    assert model_time_s("send_recv", 64e9, 2, fully, p) == pytest.approx(2e-6 + 1.0)


# --- engine all-reduce kernels (one-shot / two-shot) -------------------------------------------

def test_one_shot_and_two_shot_closed_form_with_the_custom_ramp_once_per_step():
    from roofcast.predictor.collectives import engine_time_s
    p = {"nvswitch/custom": FabricParams(3.0, 0.5, 1e6)}
    s, n = 64 * 1024, 4
    one = engine_time_s("all_reduce", "one_shot", s, n, system(), p)
    # 1 step: (2 + 3) us + (n-1) s bytes at 300 GB/s x 0.5 x b / (b + 1e6), b = (n-1) s
    b = (n - 1) * s
    assert one == pytest.approx(5e-6 + (b + 1e6) / (300e9 * 0.5))
    two = engine_time_s("all_reduce", "two_shot", s, n, system(), p)
    c = (n - 1) / n * s  # each of the 2 steps moves (n-1)/n s
    assert two == pytest.approx(2 * 5e-6 + 2 * (c + 1e6) / (300e9 * 0.5))
    # the fitted file: one-shot of a decode-sized message beats NCCL's ring on A100 NVSwitch
    a100 = system(per_node=4)
    assert engine_time_s("all_reduce", "one_shot", 8192, 4, a100) < 0.5 * model_time_s(
        "all_reduce", 8192, 4, a100)


@pytest.mark.parametrize(("kind", "n", "nodes", "runs"), [
    ("nvswitch", 8, 1, True), ("nvlink-domain", 8, 1, True), ("nvlink-pairs", 2, 1, True),
    ("nvlink-pairs", 4, 1, False), ("pcie-switch", 2, 1, False), ("pcie-host", 4, 1, False),
    ("nvswitch", 16, 2, False),
])
def test_engine_kernels_need_one_node_of_direct_nvlink_peers(kind, n, nodes, runs):
    from roofcast.predictor.collectives import engine_time_s
    sysm = system(kind=kind, nodes=nodes, device="a100-40gb-pcie")
    for algo in ("one_shot", "two_shot"):
        t = engine_time_s("all_reduce", algo, 1e5, n, sysm)
        assert (t is not None) == runs


def test_unknown_engine_algorithm_is_refused_naming_the_known_ones():
    from roofcast.predictor.collectives import engine_time_s
    with pytest.raises(PredictionError, match="all_reduce/one_shot, all_reduce/two_shot"):
        engine_time_s("all_reduce", "three_shot", 1e5, 4, system())


def test_engine_kernels_are_not_among_nccl_tuner_choices():
    from roofcast.predictor.collectives.steps import ENGINE_ALGORITHMS
    from roofcast.predictor.runtimes.profile import ENGINE_ALLREDUCE_ALGORITHMS
    assert set(ENGINE_ALGORITHMS["all_reduce"]) == set(ENGINE_ALLREDUCE_ALGORITHMS)
    assert not set(ENGINE_ALGORITHMS["all_reduce"]) & set(ALGORITHMS["all_reduce"])
