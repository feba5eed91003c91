"""The bundled fused rows count bytes as the code does (``recount_traffic``)."""

from __future__ import annotations

import pandas as pd

from training_data.bundled import recount_traffic as rt


def test_bundled_fused_rows_follow_the_current_traffic_accounting():
    # the learned model trains on these bytes and predicts from the predictor's: a change of
    # predictor.fusion.internal_traffic must be followed by `recount_traffic.py`
    rows = pd.read_csv(rt.ROWS)
    _, changed = rt.recount(rows, pd.read_csv(rt.SUMMARY))
    assert int(changed.sum()) == 0
