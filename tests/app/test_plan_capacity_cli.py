"""``roofcast plan MODEL --mode serve --rate R --slo-ttft MS --slo-tpot MS``: the capacity
planner through ``app.cli.main``, and its refusals in one line."""

from __future__ import annotations

import json

import pytest

from roofcast.app.cli import main

BASE = ("plan", "llama-3.1-8b", "--mode", "serve")


def test_the_verdict_names_the_cheapest_device_split_and_count(capsys):
    assert main([*BASE, "--hw", "h100-sxm,l40s", "--rate", "2", "--slo-ttft", "1000",
                 "--slo-tpot", "60", "--output-tokens", "16", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    first = doc["candidates"][0]
    assert first["meets"] is True
    assert doc["verdict"] == (
        f"cheapest meeting the SLOs: {first['replicas']} replica(s) of tp={first['tp']} on "
        f"{first['device']} = {first['devices']} devices (${first['cost_usd']:,.0f} list price; "
        "colocated, no speculative decoding)")
    assert doc["road"].startswith("simulated capacity plan")


@pytest.mark.parametrize(("argv", "needle"), [
    (("--hw", "h100-sxm", "--rate", "2"), "give slo_ttft_ms= and/or slo_tpot_ms="),
    (("--hw", "h100-sxm", "--slo-ttft", "100"), "give --mode serve --rate R"),
    (("--hw", "h100-sxm", "--devices", "8", "--rate", "2", "--slo-ttft", "100"),
     "no --devices"),
    (("--rate", "2", "--slo-ttft", "100"), "--hw A,B,C (candidate devices) or --system ID"),
    (("--hw", "h100-sxm", "--search-disagg"), "capacity-planner options"),
    (("--hw", "h100-sxm", "--spec-decode", "mtp:2", "--spec-accept", "0.5"),
     "capacity-planner options"),
    (("--hw", "h100-sxm", "--rate", "2", "--slo-ttft", "100", "--spec-decode", "mtp:2"),
     "acceptance rate"),
    (("--hw", "h100-sxm", "--rate", "2", "--slo-ttft", "100", "--spec-decode", "eagle:2",
      "--spec-accept", "0.5"), "draft:MODEL:K or mtp:K"),
])
def test_bad_capacity_requests_are_one_line(capsys, argv, needle):
    assert main([*BASE, *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert len(err.strip().splitlines()) == 1


def test_a_bad_rate_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exc:
        main([*BASE, "--hw", "h100-sxm", "--rate", "nan", "--slo-ttft", "100"])
    assert exc.value.code == 2
    assert "must be a finite number > 0" in capsys.readouterr().err
