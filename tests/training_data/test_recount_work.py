"""The bundled rows count work as the code does (``recount_work``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.training_data.bundled import recount_work as rw


def test_bundled_rows_follow_the_current_cost_rules():
    # the learned model trains on these columns and predicts from the predictor's: a change of
    # a cost rule, graph_import.fused_traffic.internal_traffic or graph_import.costs.gemm_dims
    # must be followed by `recount_work.py`. The check covers every row (zoo and
    # microbenchmark), and a row whose
    # column is wrong is repaired and reported.
    rows = pd.read_csv(rw.ROWS)
    summary = pd.read_csv(rw.SUMMARY)
    assert rw.recountable(rows, summary).all()
    lstm = rows.index[(rows["model"] == "lstm_lm") & (rows["op_type"] == "LSTM")][0]
    micro = rows.index[rows["model"].isna()][0]
    broken = rows.copy()
    broken.loc[[lstm, micro], "gemm_m"] = np.nan
    broken.loc[micro, "bytes_read"] += 4.0
    fixed, changed = rw.recount(broken, summary)
    assert sorted(np.flatnonzero(changed)) == sorted([lstm, micro])
    pd.testing.assert_frame_equal(fixed, rows)
