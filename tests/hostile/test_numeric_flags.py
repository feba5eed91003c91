"""Counts on the command line are bounded by their budget (``graph_import.budgets``), named in a
one-line refusal with exit 2: ``--threads`` (predict, measure) by ``ROOFCAST_MAX_THREADS``, a
graph's ``--batch`` (or ``--dim batch=``) by ``ROOFCAST_MAX_BATCH``, not the looser dim cap."""

from __future__ import annotations

import pytest

from roofcast.app.cli import main

BIG = str(10**21)
CASES = {
    "predict --threads": (["predict", "resnet50", "--hw", "xeon-8380", "--threads", BIG],
                          "--threads", "ROOFCAST_MAX_THREADS"),
    "measure --threads": (["measure", "--micro", "gemm", "--threads", f"1,{BIG}", "--no-save"],
                          "--threads", "ROOFCAST_MAX_THREADS"),
    "measure --inter-op-threads": (["measure", "--micro", "gemm", "--inter-op-threads", BIG,
                                    "--no-save"], "--inter-op-threads", "ROOFCAST_MAX_THREADS"),
    "predict --batch": (["predict", "resnet50", "--hw", "h100-sxm", "--batch", "5000000"],
                        "--batch 5000000", "ROOFCAST_MAX_BATCH"),
    "predict --dim batch=": (["predict", "resnet50", "--hw", "h100-sxm", "--dim",
                              "batch=100000000"], "--batch 100000000", "ROOFCAST_MAX_BATCH"),
}


def _exit_code(argv: list[str]) -> int:
    """``main``'s exit code; argparse's refusals leave by ``SystemExit``."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(CASES))
def test_count_over_its_budget_is_one_line_exit_2(case, capsys):
    argv, names, variable = CASES[case]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]  # argparse adds usage
    assert len(errors) == 1, err
    assert names in errors[0]
    assert variable in errors[0]
    assert "over the limit" in errors[0]
    assert "Traceback" not in err


@pytest.mark.timeout(60)
def test_raised_batch_budget_admits_the_batch(monkeypatch, capsys):
    monkeypatch.setenv("ROOFCAST_MAX_BATCH", "4")
    assert main(["predict", "resnet50", "--hw", "h100-sxm", "--batch", "5"]) == 2
    assert "over the limit of 4 samples per batch" in capsys.readouterr().err
    assert main(["predict", "resnet50", "--hw", "h100-sxm", "--batch", "4",
                 "--format", "json"]) == 0
