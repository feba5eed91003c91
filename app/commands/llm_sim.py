"""The ``roofcast llm`` flags of the request-level simulation and its output.

``--rate R`` (open loop), ``--concurrency C|max`` (closed loop) or ``--trace FILE`` runs the
simulation (``predictor.llm.sim``): one row per device with TTFT / TPOT / end-to-end latency
percentiles, throughput, requests in flight, goodput under ``--slo-ttft``/``--slo-tpot`` (ms),
preemptions; every output names its road. ``--batch`` stays the static steady-state road.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from roofcast.app.argtypes import positive_int


def positive_float(text: str) -> float:
    """argparse ``type=``: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return value


def _kind_and_number(text: str, kinds: tuple[str, ...], what: str) -> tuple[str, float]:
    kind, _, num = text.strip().lower().partition(":")
    if kind not in kinds:
        raise argparse.ArgumentTypeError(f"{text!r}: {what} must be one of "
                                         f"{', '.join(kinds)} (e.g. {kinds[-1]}:0.5)")
    return kind, (positive_float(num) if num else 0.0)


def arrival(text: str) -> tuple[str, float]:
    """``poisson``, ``gamma:CV`` or ``closed``."""
    kind, cv = _kind_and_number(text, ("poisson", "closed", "gamma"), "the arrival")
    if kind == "gamma" and not cv:
        raise argparse.ArgumentTypeError("gamma arrivals need a cv: gamma:CV (e.g. gamma:2)")
    return kind, cv or 1.0


def lengths(text: str) -> tuple[str, float]:
    """``fixed``, ``uniform:S`` (half-width as a fraction) or ``lognormal:CV``."""
    return _kind_and_number(text, ("fixed", "uniform", "lognormal"), "the lengths")


def add_sim_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("request-level simulation (--rate, --concurrency or --trace)")
    g.add_argument("--rate", type=positive_float, metavar="R",
                   help="open-loop arrivals at R requests/s (simulated)")
    g.add_argument("--arrival", type=arrival, default=("poisson", 1.0),
                   metavar="poisson|gamma:CV|closed", help="arrival process (default poisson)")
    g.add_argument("--trace", metavar="FILE",
                   help="CSV of arrival_s,input_tokens,output_tokens to replay")
    g.add_argument("--requests", type=positive_int, default=1000, metavar="N",
                   help="requests to simulate (default 1000; a closed loop runs at least "
                        "5 per client)")
    g.add_argument("--lengths", type=lengths, default=("fixed", 0.0),
                   metavar="fixed|uniform:S|lognormal:CV",
                   help="length distribution around --input/--output-tokens (default fixed)")
    g.add_argument("--slo-ttft", type=positive_float, metavar="MS", help="TTFT SLO (ms)")
    g.add_argument("--slo-tpot", type=positive_float, metavar="MS", help="TPOT SLO (ms)")
    g.add_argument("--policy", metavar="NAME",
                   help="scheduler policy (default: the engine's; vllm-v1, vllm-v0, "
                        "tensorrt-llm-1, tensorrt-llm-max-util, sglang, static)")
    g.add_argument("--engine-max-seqs", type=positive_int, metavar="N",
                   help="the policy's running cap (max_num_seqs / max_batch_size)")
    g.add_argument("--engine-max-tokens", type=positive_int, metavar="N",
                   help="the policy's tokens per step (max_num_batched_tokens / max_num_tokens)")
    g.add_argument("--prefix-tokens", type=positive_int, metavar="N",
                   help="a prompt prefix shared by every request (cached by policies that "
                        "cache prefixes)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--disagg", metavar="P:D",
                   help="prefill/decode disaggregation: P prefill and D decode replicas of the "
                        "plan, each request's KV moved over the system's fabric (with --rate "
                        "or --trace)")


def simulated(args: argparse.Namespace) -> bool:
    """Whether the run goes through the simulation."""
    return (args.rate is not None or args.trace is not None or args.concurrency is not None
            or args.arrival[0] == "closed")


def sim_options(args: argparse.Namespace) -> dict[str, Any]:
    """``api.llm`` simulation keywords of the flags."""
    from roofcast.predictor.errors import PredictionError

    kind, cv = args.arrival
    if kind == "closed" and args.concurrency is None:
        raise PredictionError("--arrival closed needs --concurrency C (the clients)")
    if kind != "closed" and args.concurrency is not None and args.rate is not None:
        raise PredictionError("give --rate R (open loop) or --concurrency C (closed loop), "
                              "not both")
    return {"rate": args.rate, "arrival": "poisson" if kind == "closed" else kind,
            "arrival_cv": cv, "trace": args.trace, "requests": args.requests,
            "lengths": args.lengths[0], "length_spread": args.lengths[1],
            "slo_ttft_ms": args.slo_ttft, "slo_tpot_ms": args.slo_tpot, "policy": args.policy,
            "engine_max_seqs": args.engine_max_seqs,
            "engine_max_tokens": args.engine_max_tokens,
            "prefix_tokens": args.prefix_tokens or 0, "seed": args.seed,
            "disagg": args.disagg}


#: the columns a table shows (all go to csv/json).
SHOWN: tuple[str, ...] = (
    "device", "policy", "requests_per_s", "output_tokens_per_s", "in_flight", "ttft_p50_ms",
    "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "e2e_mean_ms",
    "e2e_p99_ms", "goodput_per_s", "slo_share", "preemptions", "kv_pool_GiB")


def sim_output(df, head: dict[str, Any], fmt: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tables and header of a simulated run: the road first, one row per device."""
    extra = {"road": str(df["road"].iloc[0]), **head}
    notes = [f"{d}: {n}" for d, ns in zip(df["device"], df["notes"], strict=True)
             for n in ns[1:]]
    body = df.drop(columns=["notes", "road", "series"])
    if fmt == "json":
        extra["notes"] = notes
        extra["series"] = dict(zip(df["device"], df["series"], strict=True))
        return {"devices": body}, extra
    extra["_notes"] = notes
    return {"devices": body if fmt == "csv" else body[list(SHOWN)]}, extra
