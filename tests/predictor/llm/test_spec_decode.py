"""Speculative decoding: tokens per verify step, its cost on the steady-state road and in the
simulator's step table."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.kernels import Segment
from roofcast.predictor.llm.phases import Step
from roofcast.predictor.llm.serving import predict_serving
from roofcast.predictor.llm.sim.steptable import Grid, step_tables
from roofcast.predictor.llm.spec_decode import SpecDecode, parse_spec, verify_step
from roofcast.predictor.llm.types import ServingConfig


@pytest.mark.parametrize(("accept", "k", "expect"), [
    (0.0, 3, 1.0), (1.0, 3, 4.0), (0.5, 3, 1.875), (0.8, 1, 1.8)])
def test_tokens_per_step_formula(accept, k, expect):
    assert SpecDecode("mtp", k, accept).tokens_per_step == pytest.approx(expect)


def test_acceptance_near_one_tends_to_k_plus_one():
    assert SpecDecode("mtp", 5, 1 - 1e-9).tokens_per_step == pytest.approx(6.0, rel=1e-6)


@pytest.mark.parametrize(("text", "accept"), [
    ("mtp", 0.5), ("mtp:x", 0.5), ("draft:4", 0.5), ("eagle:3", 0.5), ("mtp:3", None),
    ("mtp:3", 1.5), ("mtp:0", 0.5), ("mtp:99", 0.5)])
def test_bad_specs_refused(text, accept):
    with pytest.raises(PredictionError):
        parse_spec(text, accept)


def test_parse_draft_keeps_colons_in_the_model():
    sd = parse_spec("draft:./models/x:y.json:4", 0.6)
    assert (sd.method, sd.draft, sd.k, sd.accept) == ("draft", "./models/x:y.json", 4, 0.6)


def test_verify_step_widens_decodes_only():
    step = Step("s", (Segment(8, 1, 100), Segment(1, 256, 256, emits=False)))
    target, draft = verify_step(step, SpecDecode("mtp", 3, 0.5))
    assert target.segments == (Segment(8, 4, 103), Segment(1, 256, 256, emits=False))
    assert draft.segments == (Segment(8, 1, 100),)
    assert verify_step(Step("p", (Segment(2, 64, 64),)), SpecDecode("mtp", 3, 0.5))[1] is None


@pytest.fixture(scope="module")
def h100():
    return get_device("h100-sxm")


def _pred(archs, engine, hw, sd, **kw):
    cfg = ServingConfig(input_tokens=256, output_tokens=64, runtime=engine, spec_decode=sd,
                        **kw)
    return predict_serving(archs["llama-2-7b"], hw, cfg)


def test_zero_acceptance_costs_more_than_plain_decode(archs, engine, h100):
    plain = _pred(archs, engine, h100, None)
    zero = _pred(archs, engine, h100, SpecDecode("mtp", 3, 0.0))
    assert zero.tpot_s > plain.tpot_s
    assert zero.ttft_s == pytest.approx(plain.ttft_s)


def test_full_acceptance_divides_the_verify_step(archs, engine, h100):
    zero = _pred(archs, engine, h100, SpecDecode("mtp", 3, 0.0))
    full = _pred(archs, engine, h100, SpecDecode("mtp", 3, 1.0))
    assert full.tpot_s == pytest.approx(zero.tpot_s / 4, rel=1e-9)
    assert full.tpot_s < _pred(archs, engine, h100, None).tpot_s
    assert any("speculative decoding" in n for n in full.notes)


def test_draft_model_step_costs_more_than_mtp_layer(archs, engine, h100):
    cfg_mtp = _pred(archs, engine, h100, SpecDecode("mtp", 2, 0.0))
    draft = _pred(archs, engine, h100, SpecDecode("draft", 2, 0.0, "llama-3.1-8b"))
    assert draft.tpot_s > cfg_mtp.tpot_s  # 32 layers drafting, not one


def test_continuous_throughput_rises_with_acceptance(archs, engine, h100):
    lo = _pred(archs, engine, h100, SpecDecode("mtp", 3, 0.2), concurrency=16)
    hi = _pred(archs, engine, h100, SpecDecode("mtp", 3, 0.9), concurrency=16)
    assert hi.output_tokens_per_s > lo.output_tokens_per_s
    assert hi.tpot_s < lo.tpot_s


def test_step_table_is_the_engine_step_over_tokens_per_step(archs, engine, h100):
    arch = archs["llama-2-7b"]
    grid = Grid.covering(8, 1024, 256, 256)
    cfg = ServingConfig(input_tokens=256, output_tokens=64, runtime=engine)
    zero, full = (step_tables(arch, [h100], replace(cfg, spec_decode=SpecDecode("mtp", 3, a)),
                              engine, grid)[0] for a in (0.0, 1.0))
    # a pure decode grid step: the same verify step, emitting 1 vs 4 tokens per sequence
    assert full(8, 512, 0) == pytest.approx(zero(8, 512, 0) / 4, rel=1e-9)
    plain = step_tables(arch, [h100], cfg, engine, grid)[0]
    assert zero(8, 512, 0) > plain(8, 512, 0)
