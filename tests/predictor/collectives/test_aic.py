"""aiconfigurator's comm tables as collective curves: units, versions, engines, layout."""

from __future__ import annotations

import pandas as pd
import pytest

from roofcast.predictor.collectives.aic import (
    CUSTOM_ALL_REDUCE,
    CUSTOM_MAX_BYTES,
    aic_curves,
)
from roofcast.predictor.collectives.measured import catalog_system, measured_layout


def write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)


@pytest.fixture
def data_dir(tmp_path):
    comm = tmp_path / "h100_sxm" / "comm"
    nccl = {"nccl_dtype": "half", "num_gpus": 8, "message_size": 1024}
    write(comm / "nccl" / "2.23" / "nccl_perf.parquet",
          [{**nccl, "op_name": "all_reduce", "latency": 9.0}])
    write(comm / "nccl" / "2.29.2" / "nccl_perf.parquet", [
        {**nccl, "op_name": "all_reduce", "latency": 0.02, "version": "2.29.2"},
        {**nccl, "op_name": "all_reduce", "latency": 0.04, "version": "2.29.2"},
        {**nccl, "op_name": "alltoall", "latency": 0.03, "version": "2.29.2"},
        {**nccl, "op_name": "all_reduce", "latency": 5.0, "version": "2.27.3"},
        {**nccl, "op_name": "all_reduce", "nccl_dtype": "int8", "latency": 7.0,
         "version": "2.29.2"}])
    custom = {"num_gpus": 4, "message_size": 128}
    write(comm / "vllm" / "0.24.0" / "custom_allreduce_perf.parquet", [
        {**custom, "latency": 0.004, "backend": "vllm_graph"},
        {**custom, "latency": 0.020, "backend": "vllm_eager"},
        {**custom, "message_size": CUSTOM_MAX_BYTES, "latency": 1.0, "backend": "vllm_graph"}])
    write(comm / "vllm" / "0.14.0" / "custom_allreduce_perf.parquet",
          [{**custom, "latency": 9.0, "backend": "vllm_graph"}])
    write(comm / "trtllm" / "1.3.0rc20" / "custom_allreduce_perf.parquet",
          [{**custom, "latency": 0.002}])
    return tmp_path


def test_tables_become_intra_node_curves_in_bytes_and_seconds(data_dir):
    c = aic_curves(data_dir).set_index("collective")
    assert set(c.system) == {"aic_h100_sxm"}
    assert (c.n_ranks == c.ranks_per_node).all()
    # newest folder and version, half only, the median of repeats; elements x 2 bytes; ms -> s
    assert c.loc["all_reduce", "time_s"] == pytest.approx(0.03e-3)
    assert c.loc["all_reduce", "size_bytes"] == 2048.0
    assert c.loc["all_to_all", "time_s"] == pytest.approx(0.03e-3)
    # graph-mode kernels of the newest version per engine, median over engines, size capped
    assert c.loc[CUSTOM_ALL_REDUCE, "time_s"] == pytest.approx(0.003e-3)
    assert c.loc[CUSTOM_ALL_REDUCE, "size_bytes"] == 256.0


def test_curve_systems_lie_on_their_catalog_systems():
    assert catalog_system("aic_h100_sxm").id == "hgx-h100"
    assert catalog_system("aic_gb200").id == "gb200-nvl72"
    assert measured_layout("aic_b200_sxm", 8, 8).device == "b200"


def test_custom_rows_are_timed_as_the_fastest_engine_kernel():
    from roofcast.predictor.collectives import engine_time_s
    from roofcast.predictor.collectives.fit import predict_rows
    from roofcast.predictor.collectives.params import FabricParams, load_params

    params = load_params() | {"nvswitch/custom": FabricParams(1.0, 0.5, 1e5)}
    rows = pd.DataFrame({"system": ["aic_h100_sxm", "aic_h100_sxm", "aic_l40s"],
                         "collective": CUSTOM_ALL_REDUCE, "n_ranks": [8, 8, 4],
                         "ranks_per_node": [8, 8, 4], "size_bytes": [4096.0, 8e6, 4096.0]})
    got = predict_rows(rows, params)
    h100 = measured_layout("aic_h100_sxm", 8, 8)
    for i, size in enumerate((4096.0, 8e6)):
        one, two = (engine_time_s("all_reduce", a, size, 8, h100, params)
                    for a in ("one_shot", "two_shot"))
        assert got[i] == pytest.approx(min(one, two))
    assert got[0] < got[1]
    # no engine kernel on PCIe (no full NVLink mesh): not modelled, left out of the fit
    assert pd.isna(got[2])
