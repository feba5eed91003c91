"""The bundled zoo rows count work as the code does (``recount_work``)."""

from __future__ import annotations

import pandas as pd

from training_data.bundled import recount_work as rw


def test_bundled_zoo_rows_follow_the_current_cost_rules():
    # the learned model trains on these columns and predicts from the predictor's: a change of
    # a cost rule, predictor.fusion.internal_traffic or predictor.gemm_dims must be followed by
    # `recount_work.py`
    rows = pd.read_csv(rw.ROWS)
    _, changed = rw.recount(rows, pd.read_csv(rw.SUMMARY))
    assert int(changed.sum()) == 0
