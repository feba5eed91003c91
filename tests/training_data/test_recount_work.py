"""The bundled rows count work as the code does (``recount_work``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

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


def test_an_interrupted_write_leaves_the_old_file_whole(tmp_path):
    target = tmp_path / "cpu_summary.csv"
    target.write_text("old\n")

    def fail(tmp):
        Path(tmp).write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rw.write_atomically(target, fail)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["cpu_summary.csv"]
    rw.write_atomically(target, lambda tmp: Path(tmp).write_text("new\n"))
    assert target.read_text() == "new\n"
