"""Wall time of the training-plan search (issue 16's acceptance: under 10 s on an idle machine).

Run: ``python benchmarks/plan_search_speed.py [--repeats 3]``. Searches llama-3.1-70b on four
HGX H100 nodes (32 GPUs), global batch 1024 x 4096 tokens, and prints each run's
``PlanSearch.elapsed_s``, the plans evaluated and the best plan, then the median. Timings are
noisy: compare runs taken on the same machine at the same load.
"""

from __future__ import annotations

import argparse
import statistics
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.predictor.parallel.llm_source import LLMParallelSource
    from roofcast.predictor.parallel.search import plan_search

    times = []
    for i in range(args.repeats):
        src = LLMParallelSource(load_llm("llama-3.1-70b"), seq_tokens=4096)
        res = plan_search(src, "hgx-h100-x4", global_batch=1024)
        times.append(res.elapsed_s)
        print(f"run {i + 1}: {res.elapsed_s:.2f} s, {len(res.table)} plans, "
              f"best {res.best.plan.label() if res.best else None}")
    print(f"median: {statistics.median(times):.2f} s (target < 10 s on an idle 2-core machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
