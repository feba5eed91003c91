"""``benchmarks/measured_gpus.py`` (the ``--gpu`` option of ``h200_measured`` and
``measured_llm_steps``) and ``h200_measured``'s mapping of the collector's precisions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import h200_measured  # noqa: E402
import measured_gpus  # noqa: E402
import measured_llm_steps  # noqa: E402


def test_both_benchmarks_read_the_measured_folders_of_each_gpu():
    for table in (h200_measured.GPUS, measured_llm_steps.GPUS):
        assert set(table) == {"h100", "h200"}
        assert {hw for _, hw in table.values()} == {"h100-sxm", "h200"}
        assert all(folder.is_dir() for folder, _ in table.values())


def test_an_unknown_gpu_is_one_line_and_exit_2(capsys):
    ap = argparse.ArgumentParser()
    measured_gpus.add_gpu_option(ap)
    assert measured_gpus.chosen_gpus(ap, "h200,h100,") == ["h200", "h100"]
    with pytest.raises(SystemExit) as exc:
        measured_gpus.chosen_gpus(ap, "h100,a100")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "unknown --gpu a100; choose from h100, h200" in err


def test_the_collectors_fp32_rows_run_without_tf32():
    """tools/torch_eager.py sets cudnn.allow_tf32 = (precision == 'tf32')."""
    from roofcast.predictor.runtimes import get_runtime

    precision, runtime = h200_measured.RUN_AS["fp32"]
    assert precision == "fp32"
    assert get_runtime(runtime).tf32_families == ()
    assert h200_measured.RUN_AS["tf32"] == ("tf32", "pytorch-eager")
    assert set(h200_measured.RUN_AS) == set(h200_measured.measured("h100")["precision"])
