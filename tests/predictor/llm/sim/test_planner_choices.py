"""The capacity planner's optional searches: prefill/decode disaggregation and speculative
decoding, each row naming its choice."""

from __future__ import annotations

import pytest

from roofcast import api
from roofcast.predictor.llm.sim.planner import DISAGG_RATIOS, Choices
from roofcast.predictor.llm.spec_decode import parse_spec

KW = {"hw": "h100-sxm", "rate": 2.0, "slo_ttft_ms": 1000.0, "slo_tpot_ms": 6.0,
      "output_tokens": 16, "requests": 100}


@pytest.fixture(scope="module")
def searched():
    return api.plan("llama-3.1-8b", search_disagg=True, spec_decode=parse_spec("mtp:2", 0.7),
                    **KW)


def test_every_choice_is_tried_once_per_split(searched):
    combos = searched.groupby("tp")[["disagg", "spec_decode"]].apply(
        lambda g: sorted(map(tuple, g.to_numpy())))
    ratios = ["", *(f"{d.prefill}:{d.decode}" for d in DISAGG_RATIOS)]
    want = sorted((r, s) for r in ratios for s in ("", "MTP, K=2, acceptance 0.7"))
    assert all(c == want for c in combos)


def test_a_tpot_only_speculation_meets_is_met_with_it(searched):
    best = searched.iloc[0]
    assert best["meets"]
    assert best["spec_decode"] == "MTP, K=2, acceptance 0.7"
    plain = searched[(searched["tp"] == 1) & (searched["disagg"] == "")
                     & (searched["spec_decode"] == "")]
    assert not plain["meets"].iloc[0]


def test_disaggregated_rows_count_whole_units(searched):
    dis = searched[(searched["disagg"] != "") & searched["meets"]]
    assert len(dis)
    per_unit = dis["disagg"].map(lambda r: sum(int(x) for x in r.split(":")))
    assert (dis["replicas"] % per_unit == 0).all()
    assert (dis["devices"] == dis["replicas"] * dis["tp"]).all()


def test_without_the_flags_only_colocated_plain_replicas_are_tried():
    df = api.plan("llama-3.1-8b", **{**KW, "slo_tpot_ms": 60.0})
    assert (df["disagg"] == "").all()
    assert (df["spec_decode"] == "").all()
    assert Choices.searching() == Choices()
