"""Decode batches timed at their powers of two: the bracket, the expansion and monotone steps."""

from __future__ import annotations

import numpy as np
import pytest

from roofcast import api
from roofcast.predictor.llm.kernels import Segment
from roofcast.predictor.llm.ladder import combine, expand, pow2_bracket
from roofcast.predictor.llm.phases import Step, engine_profile, time_steps
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.types import ServingConfig


@pytest.mark.parametrize(("b", "lo", "hi"), [(1, 1, 1), (2, 2, 2), (3, 2, 4), (196, 128, 256),
                                             (1024, 1024, 1024)])
def test_a_batch_sits_between_its_powers_of_two(b, lo, hi):
    assert pow2_bracket(b) == (lo, hi)


def test_only_a_step_with_one_decode_segment_off_the_powers_of_two_is_bracketed():
    steps = [Step("a", (Segment(196, 1, 512),)), Step("b", (Segment(128, 1, 1024),)),
             Step("c", (Segment(3, 512, 512),)),
             Step("d", (Segment(5, 1, 700), Segment(1, 256, 256, emits=False)))]
    timed, rungs = expand(steps)
    assert [s.label for s in timed] == [
        "a", "a@b128.c512", "a@b256.c512", "b", "c",
        "d", "d@b4.c512", "d@b4.c1024", "d@b8.c512", "d@b8.c1024"]
    assert timed[9].segments == (Segment(8, 1, 1024), steps[3].segments[1])
    t = np.array([99.0, 10.0, 20.0, 7.0, 5.0, 99.0, 1.0, 2.0, 3.0, 4.0])
    wc = (700 - 512) / 512
    d = 0.75 * ((1 - wc) * 1.0 + wc * 2.0) + 0.25 * ((1 - wc) * 3.0 + wc * 4.0)
    assert combine(t, rungs) == pytest.approx([10.0 + 68 / 128 * 10.0, 7.0, 5.0, d])


def test_decode_steps_of_the_learned_model_never_get_faster_with_more_sequences_or_keys():
    arch, hw = api.llm_arch("llama-3.1-8b"), api.device("h100-sxm")
    cfg = ServingConfig(input_tokens=512, output_tokens=256)
    ds = [128, 144, 160, 176, 192, 196, 200, 208, 224, 240, 256]
    st = time_steps(arch, [hw], [Step(f"d{d}", (Segment(d, 1, 698),)) for d in ds],
                    TensorDtypes.of(cfg), engine_profile(None, hw))
    t = st.time_s[:, 0]
    # the learned model alone: 196 sequences 23.7 ms, 208 sequences 20.2 ms
    assert (np.diff(t) > 0).all()
    keys = [Step(f"c{c}", (Segment(200, 1, c),)) for c in range(512, 4097, 128)]
    by_keys = time_steps(arch, [hw], keys, TensorDtypes.of(cfg), engine_profile(None, hw))
    assert (np.diff(by_keys.time_s[:, 0]) > 0).all()
    rows = st.kernels("d196", hw.id)
    assert rows["key"].str.startswith("d196:").all()
    assert rows.loc[rows["key"] == "d196:qkv", "gemm_m"].iloc[0] == 196
    assert rows["kernel_s"].sum() + 160e-6 == pytest.approx(t[5], rel=1e-6)
