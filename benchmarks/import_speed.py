"""Import speed: load + shape inference/folding + graph build with costs, for every zoo model.

Run: ``python benchmarks/import_speed.py [--repeats 3] [--batch 1] [--sequence 128]
[--format table|csv|json]``. Prints one row per zoo model (and per model of the other exporter
in ``alt_exporter/``): node count, best-of-``--repeats`` wall time of ``import_model`` (and its
process CPU time, which other load on a shared machine does not inflate) and its
three phases (``load``: read + parse + validate; ``shapes``: dims binding, ONNX inference,
shape-subgraph folding; ``build``: OpNodes, edges, cost rules), whole-graph inference rounds.
Targets (issue 2): ResNet-50 under 0.5 s, the largest zoo model under 2 s.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from roofcast.graph_import import import_model
from roofcast.graph_import.build import build_graph
from roofcast.graph_import.load import load_model
from roofcast.graph_import.shapes import infer_concrete
from roofcast.training_data import zoo


def best_of(fn: Callable[[], object], repeats: int, clock=time.perf_counter) -> float:
    """Minimum time in seconds over ``repeats`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return min(times)


def measure(name: str, path: Path, dims: dict[str, int], repeats: int) -> dict[str, object]:
    model = load_model(path)
    shapes = infer_concrete(model, dims)
    graph = build_graph(model, shapes)
    return {
        "model": name,
        "nodes": len(graph),
        "unresolved": len(graph.unresolved),
        "rounds": shapes.iterations,
        "import_ms": 1e3 * best_of(lambda: import_model(path, dims=dims), repeats),
        # CPU time of this process: what the import costs when the machine is not shared
        "import_cpu_ms": 1e3 * best_of(
            lambda: import_model(path, dims=dims), repeats, clock=time.process_time
        ),
        "load_ms": 1e3 * best_of(lambda: load_model(path), repeats),
        "shapes_ms": 1e3 * best_of(lambda: infer_concrete(model, dims), repeats),
        "build_ms": 1e3 * best_of(lambda: build_graph(model, shapes), repeats),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--sequence", type=int, default=128)
    ap.add_argument("--format", choices=("table", "csv", "json"), default="table")
    args = ap.parse_args(argv)
    dims = {"batch": args.batch, "sequence": args.sequence}
    rows = [measure(n, zoo.model_path(n), dims, args.repeats) for n in zoo.list_models()]
    rows += [
        measure(f"{n} (alt exporter)", zoo.alt_model_path(n), dims, args.repeats)
        for n in zoo.alt_exporter_models()
    ]
    table = pd.DataFrame(rows).sort_values("import_ms", ascending=False)
    if args.format == "csv":
        print(table.to_csv(index=False, float_format="%.1f"), end="")
    elif args.format == "json":
        print(table.to_json(orient="records", double_precision=1))
    else:
        print(f"import_model wall time, best of {args.repeats}, dims {dims}")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
