"""Fixtures shared by the sweep output tests."""

from __future__ import annotations

import pytest

from roofcast.predictor.sweeps.schedulers import run_sweep
from roofcast.predictor.sweeps.spec import read_spec

from .helpers import SMALL, write_spec


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    """The ``SMALL`` spec's sweep, run once per test module."""
    return run_sweep(read_spec(write_spec(tmp_path_factory.mktemp("spec"), SMALL)))
