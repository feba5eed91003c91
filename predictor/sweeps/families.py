"""The families of sweep cells and how each is run: ``run_task(task) -> DataFrame``.

``FAMILY_SPECS``: family name -> ``Family`` (the module that registers its runner, the
task-sizing costs). A family module defines ``@register_family(name) def run(task) ->
DataFrame``: one ``CELL_COLUMNS`` row per cell of ``task`` (``SweepTask.cells``), never
raising for a bad cell (``cells.error_rows``). Modules are imported on first use, so the
planner and the schedulers never import the LLM or parallel predictors they do not run.

Sizing costs (``fixed_s`` per combination of the non-hardware axes, ``cell_s`` per hardware
cell; ``tasks.slice_width``) are each family's measured costs, said in its module docstring;
``benchmarks/family_costs.py`` measures them (process CPU time, the least of 5 runs, 1 and 43
GPUs). Last measured together (2 shared cores, load 0.8; at load 3-3.5 all ~10 % higher):
graph F 9-17 ms cold / 5 ms warm, c 0.2-0.4 ms (resnet50, mobilenet_v2, bert_base); serving
F 8 ms, c 0.8-1.0 ms (llm:gpt2, llama-3.1-8b; its owner's 9 ms / 1 ms hold); parallel F 5 ms,
c 0.3-0.6 ms (LLMs and graphs; its owner's 6 ms holds, 1 ms was high: 0.5 ms here).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from roofcast.defaults import GRAPH_ESTIMATOR, PARALLEL_ESTIMATOR, SERVING_ESTIMATOR
from roofcast.predictor.sweeps.types import SweepTask

Runner = Callable[[SweepTask], pd.DataFrame]


@dataclass(frozen=True)
class Family:
    """A family of cells: ``module`` registers its runner; ``estimator``: the family's
    default (a spec without ``estimator``; the same default as its CLI command); ``fixed_s``:
    seconds per (batch x precision x mode x plan x tokens) combination that do not depend on
    the hardware; ``cell_s``: seconds per hardware cell."""

    name: str
    module: str
    estimator: str
    fixed_s: float
    cell_s: float


FAMILY_SPECS: dict[str, Family] = {
    "graph": Family("graph", "roofcast.predictor.sweeps.family_graph", GRAPH_ESTIMATOR,
                    0.010, 0.00025),
    "serving": Family("serving", "roofcast.predictor.sweeps.family_serving", SERVING_ESTIMATOR,
                      0.009, 0.001),
    "parallel": Family("parallel", "roofcast.predictor.sweeps.family_parallel",
                       PARALLEL_ESTIMATOR, 0.006, 0.0005),
}
RUNNERS: dict[str, Runner] = {}


def register_family(name: str) -> Callable[[Runner], Runner]:
    """Decorator: the runner of family ``name`` (one of ``FAMILY_SPECS``)."""
    if name not in FAMILY_SPECS:
        raise ValueError(f"unknown sweep family {name!r}; add it to FAMILY_SPECS first")

    def add(fn: Runner) -> Runner:
        RUNNERS[name] = fn
        return fn
    return add


def runner(name: str) -> Runner:
    """The registered runner of family ``name`` (importing its module on first use)."""
    if name not in RUNNERS:
        importlib.import_module(FAMILY_SPECS[name].module)
    return RUNNERS[name]


def run_task(task: SweepTask) -> pd.DataFrame:
    """Predict every cell of ``task`` with its family's runner; never raises for a bad cell."""
    return runner(task.family)(task)
