"""Serving simulation speed, Little's law and step-table interpolation error.

Run: ``python benchmarks/serving_sim.py [--requests 10000]``. Part 1 simulates ``--requests``
requests of several workloads (llama-3.1-8b on an H100, vLLM v1 policy; step table built once,
its time reported apart) and prints requests, event-loop wall seconds (CPU seconds too:
compare those across loads), engine steps and Little's law: in flight vs throughput x mean
e2e. Target (issue 28): 10,000 requests in <= 10 s. Part 2 times 200 random off-grid steps
directly with ``phases.time_steps`` (+ calibration) and prints the table's relative error
(median, 90th percentile, max) per model.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from roofcast import api
from roofcast.predictor.llm.calibration import engine_calibration
from roofcast.predictor.llm.kernels import Segment
from roofcast.predictor.llm.phases import Step, engine_profile, time_steps
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.sim.engine import LOOP_RUNNERS
from roofcast.predictor.llm.sim.kvcache import kv_pool
from roofcast.predictor.llm.sim.metrics import summarise
from roofcast.predictor.llm.sim.policies import get_policy
from roofcast.predictor.llm.sim.steptable import Grid, step_tables
from roofcast.predictor.llm.sim.workload import Lengths, closed_loop, open_loop
from roofcast.predictor.llm.types import ServingConfig

WORKLOADS = {
    "poisson 20/s, 512/128": lambda n: open_loop(n, 20.0, Lengths("fixed", 512),
                                                  Lengths("fixed", 128)),
    "poisson 40/s, lognormal": lambda n: open_loop(n, 40.0, Lengths("lognormal", 512, 1.0),
                                                    Lengths("lognormal", 128, 1.0)),
    "gamma cv 3, 25/s": lambda n: open_loop(n, 25.0, Lengths("fixed", 512),
                                             Lengths("fixed", 128), process="gamma", cv=3.0),
    "closed 256, 512/128": lambda n: closed_loop(n, 256, Lengths("fixed", 512),
                                                  Lengths("fixed", 128)),
}


def speed(n: int) -> None:
    arch, hw = api.llm_arch("llama-3.1-8b"), api.device("h100-sxm")
    cfg = ServingConfig(input_tokens=512, output_tokens=128)
    profile = engine_profile(None, hw)
    policy = get_policy("vllm-v1")
    t = time.perf_counter()
    table = step_tables(arch, [hw], cfg, profile, Grid.covering(1024, 8192, 8192, 512))[0]
    print(f"step table: {time.perf_counter() - t:.2f} s wall (one time_steps call)")
    blocks = kv_pool(arch, hw, cfg, profile).blocks
    print(f"{'workload':26} {'requests':>8} {'wall_s':>7} {'cpu_s':>6} {'steps':>7} "
          f"{'in_flight':>9} {'X*W':>9} {'little':>7} {'preempt':>7}")
    for name, make in WORKLOADS.items():
        req = make(n)
        w0, c0 = time.perf_counter(), time.process_time()
        tr = LOOP_RUNNERS[policy.loop](req, policy, blocks, table)
        m = summarise(tr)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        xw = m.requests_per_s * m.latency["e2e_s"]["mean"]
        print(f"{name:26} {len(req):>8} {wall:>7.2f} {cpu:>6.2f} {tr.steps:>7} "
              f"{m.in_flight:>9.2f} {xw:>9.2f} {m.little_error:>+7.2%} {tr.preemptions:>7}")


def interpolation(model: str, device: str, points: int = 200) -> None:
    arch, hw = api.llm_arch(model), api.device(device)
    cfg = ServingConfig(input_tokens=1024, output_tokens=512)
    profile = engine_profile(None, hw)
    grid = Grid.covering(1024, 4096, 8192, 1024, 64)
    table = step_tables(arch, [hw], cfg, profile, grid)[0]
    rng = np.random.default_rng(0)
    pts = [(int(rng.integers(1, 1025)), int(rng.integers(64, 4097)),
            int(rng.choice([0, int(rng.integers(16, 8193))]))) for _ in range(points)]
    steps = [Step(f"s{i}", ((Segment(d, 1, c),) + ((grid.prefill_segment(p),) if p else ())))
             for i, (d, c, p) in enumerate(pts)]
    raw = time_steps(arch, [hw], steps, TensorDtypes.of(cfg), profile).time_s[:, 0]
    cal = engine_calibration(profile.name)
    direct = np.array([float(np.ravel(cal.apply("decode", raw[i], hw, seqs=d)[0])[0])
                       for i, (d, _, _) in enumerate(pts)])
    err = np.abs(np.array([table(*p) for p in pts]) / direct - 1)
    print(f"{model:14} {device:9} grid {len(grid.decode)}x{len(grid.context)}x"
          f"{len(grid.prefill)}: median {np.median(err):.2%}, p90 "
          f"{np.percentile(err, 90):.2%}, max {err.max():.2%} over {points} random steps")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=10_000)
    args = ap.parse_args()
    speed(args.requests)
    print()
    for model, device in (("llama-3.1-8b", "h100-sxm"), ("llama-3.1-70b", "b200"),
                          ("mixtral-8x7b", "h200")):
        interpolation(model, device)


if __name__ == "__main__":
    main()
