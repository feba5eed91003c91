"""Memory guard of advise --verify: sessions that would not fit are left out, never OOM-killed."""

from types import SimpleNamespace

import numpy as np
import pytest

from roofcast.predictor.advisor import Setting
from roofcast.predictor.advisor_verify import MEMORY_SHARE, session_bytes, settings_that_fit
from roofcast.predictor.errors import PredictionError

SETTINGS = [Setting(threads=2, inter_op=False, batch=b) for b in (1, 2, 4, 8)]
GB = 1e9


def test_all_settings_kept_when_memory_is_plenty():
    assert settings_that_fit(SETTINGS, 1 * GB, 100 * GB) == SETTINGS


def test_alternatives_beyond_the_budget_are_left_out_in_order():
    # budget = MEMORY_SHARE x 10 GB = 7 GB -> three sessions of 2 GB
    kept = settings_that_fit(SETTINGS, 2 * GB, 10 * GB)
    assert kept == SETTINGS[: int(MEMORY_SHARE * 10 // 2)]
    assert len(kept) == 3


def test_default_and_recommendation_that_do_not_fit_raise_with_the_figures():
    with pytest.raises(PredictionError, match=r"needs about 8\.0 GB .* 4\.0 GB of weights.*"
                                              r"5\.0 GB is available"):
        settings_that_fit(SETTINGS, 4 * GB, 5 * GB)


def test_unknown_available_memory_keeps_everything():
    assert settings_that_fit(SETTINGS, 50 * GB, None) == SETTINGS


def test_session_bytes_counts_the_proto_and_the_big_weights():
    proto = SimpleNamespace(ByteSize=lambda: 1000)
    weights = {"w": np.zeros((10, 10), np.float32), "v": np.zeros(5, np.float64)}
    assert session_bytes(SimpleNamespace(runnable=proto, weights=weights)) == 1000 + 400 + 40
