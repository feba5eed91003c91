"""A sweep family's sizing costs, measured: F (fixed_s) and c (cell_s) of ``FAMILY_SPECS``.

Run: ``python benchmarks/family_costs.py --family graph --models resnet50,bert_base``
(``--cold``: the per-process caches cleared before every run; see ``--help`` for the axes).

A task of G combinations of the non-hardware axes (batches x precisions x modes x plans x
tokens) and w hardware entries costs about G x (F + w x c) (``tasks`` module docstring). This
times ``families.run_task`` on one task of the first 1 and of the first W catalog devices of a
kind (default: every GPU), the least of ``--reps`` runs each, in **process CPU seconds**
(``time.process_time``: on shared cores the wall time mostly measures the other processes),
and solves::

    c = (t_W - t_1) / (G x (W - 1))        F = t_1 / G - c

Warm (default): the task ran once before (graphs, LLM configs, sources and ``graph_memo``
entries are in the process's caches), as every later device slice of a model in a worker
finds them. ``--cold``: every family cache and ``graph_memo`` cleared before each run
(``sweep_scale.clear_caches``), except the imported graphs and LLM configs (imports are not
F: a worker imports a model once per batch whatever the slicing).
"""

from __future__ import annotations

import argparse
import os
import time

from roofcast.hw_catalog.catalog import list_devices
from roofcast.predictor.sweeps.families import run_task
from roofcast.predictor.sweeps.types import SweepTask


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def _names(text: str) -> tuple[str, ...]:
    return tuple(x for x in text.split(",") if x)


def cold_start() -> None:
    """Clear the caches a task fills, keeping imported graphs and LLM configs."""
    import importlib

    from roofcast.predictor import graph_memo
    from roofcast.predictor.sweeps.families import FAMILY_SPECS

    keep = {"graph_cache", "llm_cache"}
    for family in FAMILY_SPECS.values():
        module = importlib.import_module(family.module)
        for name, value in vars(module).items():
            if name not in keep and callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
    graph_memo.clear()


def fit(t_1: float, t_w: float, n_combos: int, w: int) -> tuple[float, float]:
    """(F, c) in seconds from the times of 1 and ``w`` entries (module docstring)."""
    c = (t_w - t_1) / (n_combos * (w - 1))
    return t_1 / n_combos - c, c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="graph", choices=("graph", "serving", "parallel"))
    ap.add_argument("--models", default="resnet50,bert_base")
    ap.add_argument("--llm", action="store_true", help="the models are LLM configs")
    ap.add_argument("--kind", default="gpu", help="device kind of the hardware axis")
    ap.add_argument("--width", type=int, default=0, help="W (default: every device of --kind)")
    ap.add_argument("--runtime", default="default")
    ap.add_argument("--estimator", default="", help="default: the family's")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--precisions", default="fp16")
    ap.add_argument("--modes", default="infer,train")
    ap.add_argument("--plans", default="single")
    ap.add_argument("--tokens", default="0:0", help="IN:OUT[,IN:OUT...]")
    ap.add_argument("--dims", default="sequence=128")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args(argv)
    from roofcast.predictor.sweeps.families import FAMILY_SPECS

    devices = [d.id for d in list_devices(args.kind)]
    w = args.width or len(devices)
    dims = tuple(sorted((k, int(v)) for k, v in (d.split("=") for d in _names(args.dims))))
    tokens = tuple(tuple(int(x) for x in t.split(":")) for t in _names(args.tokens))
    estimator = args.estimator or FAMILY_SPECS[args.family].estimator
    print(f"{args.family}: {os.cpu_count()} cores, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; {'cold' if args.cold else 'warm'}")
    for model in _names(args.models):
        def task(width: int, model: str = model) -> SweepTask:
            return SweepTask(0, model, args.runtime, tuple(devices[:width]), _ints(args.batches),
                             _names(args.precisions), _names(args.modes), dims, estimator,
                             family=args.family, plans=_names(args.plans), tokens=tokens,
                             llm=args.llm)

        first = run_task(task(w))  # imports, and warms the caches
        errors = int((first["error"] != "").sum())
        n_combos = task(1).n_cells
        best = {}
        for width in (1, w):
            runs = []
            for _ in range(args.reps):
                if args.cold:
                    cold_start()
                t0 = time.process_time()
                run_task(task(width))
                runs.append(time.process_time() - t0)
            best[width] = min(runs)
        f_s, c_s = fit(best[1], best[w], n_combos, w)
        print(f"  {model}: G={n_combos}, 1 entry {best[1] * 1e3:.0f} ms, {w} entries "
              f"{best[w] * 1e3:.0f} ms -> F {f_s * 1e3:.1f} ms, c {c_s * 1e3:.2f} ms"
              f"{f' ({errors} of {len(first)} cells are errors)' if errors else ''}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
