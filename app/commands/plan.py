"""``roofcast plan MODEL --system ID --global-batch N``: the parallel plans of a model on a
system, ranked.

Training (``--mode train``, the default) or inference (``--mode infer``): every
(dp, tp, pp, ep, micro-batches) that divides the model's heads, layers, experts, the global
batch and the system's devices, with each ZeRO stage of ``--zero`` and with and without
activation recomputation (``--recompute``), one step timed per plan; plans that fit the
devices' memory first, fastest first. Each row: the step and its parts (compute, exposed
communication, pipeline bubble, optimizer), samples and tokens per second, memory per device
(``over_GiB``: by how much it does not fit). Serving (``--mode serve``, decoder LLMs): every
(tp, pp) whose product divides the devices, ranked by tokens/s; ``--seq`` is the prompt length,
``--global-batch`` the static batch per replica (default: as many requests as fit).
MODEL: a bundled LLM (``roofcast llm --list``), Hugging Face id, ``config.json`` or ONNX
decoder, or any other ONNX file / zoo name; ``llm:gpt2`` is the config, ``gpt2`` the zoo's ONNX.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from roofcast.app.argtypes import positive_int, runtime_name, zero_stages
from roofcast.app.commands.llm_sim import positive_float
from roofcast.app.output import add_format_arg, add_top_arg, top_rows
from roofcast.app.parallel_args import ON_OFF, add_placement_args, add_tp_overlap_arg
from roofcast.app.spec_args import add_spec_args, spec_decode
from roofcast.defaults import PARALLEL_ESTIMATOR, SERVING_ESTIMATOR
from roofcast.predictor.llm.types import KV_DTYPES, WEIGHT_DTYPES

MODES = ("train", "infer", "serve")
RECOMPUTE = {"both": (False, True), "on": (True,), "off": (False,)}
#: generated tokens per request of a serving plan when --output-tokens is not given
SERVE_OUTPUT_TOKENS = 128


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="rank the parallel plans (dp, tp, pp, ...) of a model on a "
                                    "multi-device system", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="bundled LLM name, Hugging Face id, config.json, ONNX file "
                                 "or zoo name")
    add_placement_args(p)
    p.add_argument("--hw", metavar="ID", help="with --devices N: N of this catalog device")
    p.add_argument("--global-batch", type=positive_int, metavar="N",
                   help="train/infer: samples per step over all replicas (required); serve: "
                        "static batch per replica (default: as many as fit)")
    p.add_argument("--mode", choices=MODES, default="train",
                   help="train (default), infer, or serve (LLM serving plans)")
    p.add_argument("--seq", type=positive_int, metavar="N",
                   help="tokens per sample (LLM default 4096, capped at its context; a graph's "
                        "'sequence' dim); serve: prompt tokens (default 512)")
    p.add_argument("--output-tokens", type=positive_int, metavar="M",
                   help=f"serve: generated tokens per request (default {SERVE_OUTPUT_TOKENS})")
    p.add_argument("--zero", type=zero_stages, default=(0, 1), metavar="STAGES",
                   help="ZeRO stages to try, comma-separated (default 0,1)")
    p.add_argument("--recompute", choices=tuple(RECOMPUTE), default="both",
                   help="activation recomputation: try both (default), only on, only off")
    add_tp_overlap_arg(p)
    p.add_argument("--precision", metavar="P",
                   help="compute precision (default: bf16 for an LLM, fp32 for a graph)")
    p.add_argument("--optimizer", default="adam", metavar="OPT", help="optimizer (default adam)")
    p.add_argument("--runtime", type=runtime_name, metavar="NAME",
                   help="execution runtime (default: megatron-lm for LLM training plans, the "
                        "engine for --mode serve, the device kind's for ONNX graphs)")
    p.add_argument("--estimator", metavar="NAME",
                   help=f"per-kernel estimator (default {PARALLEL_ESTIMATOR}; --mode serve: "
                        f"{SERVING_ESTIMATOR})")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="bind another dim of an ONNX model (repeatable)")
    cap = p.add_argument_group("capacity planning (--mode serve --rate R)")
    cap.add_argument("--rate", type=positive_float, metavar="R",
                     help="serve: requests/s to carry; ranks the devices of --hw A,B,C (or "
                          "--system) by the cost of the replicas meeting the SLOs")
    cap.add_argument("--slo-ttft", type=positive_float, metavar="MS", help="TTFT SLO (ms)")
    cap.add_argument("--slo-tpot", type=positive_float, metavar="MS", help="TPOT SLO (ms)")
    cap.add_argument("--weights", choices=WEIGHT_DTYPES, default=None,
                     help="serve --rate: weight dtype (default: the dtype the model's config "
                          "or repack id stores them in, else fp16)")
    cap.add_argument("--kv", choices=KV_DTYPES, default=None,
                     help="serve --rate: KV-cache dtype (default: the activations')")
    cap.add_argument("--search-disagg", action="store_true",
                     help="serve --rate: also try prefill/decode disaggregation (P:D = 1:1, "
                          "1:2, 1:3, 2:1 replicas of one plan)")
    add_spec_args(cap, "serve --rate: also try speculative decoding")
    add_top_arg(p, "plans", default=10)
    add_format_arg(p)
    p.add_argument("--output", type=Path, metavar="FILE",
                   help="write the output to FILE instead of the terminal (atomically)")
    p.set_defaults(func=run)


def check_args(args: argparse.Namespace) -> dict[str, Any]:
    """The placement keywords, after every check that needs no model (exactly one of
    ``--system`` and ``--hw --devices``; a global batch for train/infer; serve-only and
    train-only flags where they apply). Raises ``PredictionError``."""
    from roofcast.app.parallel_args import placement
    from roofcast.predictor.errors import PredictionError

    where = placement(args, "plan")
    if args.mode != "serve" and args.global_batch is None:
        raise PredictionError(f"--mode {args.mode} needs --global-batch N: the samples of one "
                              f"step over all replicas (e.g. --global-batch 1024)")
    if args.mode == "serve" and args.tp_comm_overlap is not None:
        raise PredictionError("--tp-comm-overlap applies to train/infer plans; serving plans "
                              "do not model it (drop the flag)")
    if args.mode == "serve" and args.dim:
        raise PredictionError("--dim applies to ONNX graphs; serving plans take an LLM config")
    return where


def serve_output_tokens(args: argparse.Namespace) -> int | None:
    """Generated tokens per request: ``--output-tokens`` or ``SERVE_OUTPUT_TOKENS`` in serve
    mode; None otherwise, where the flag is refused (a train/infer plan takes ``--seq``)."""
    from roofcast.predictor.errors import PredictionError

    if args.mode != "serve":
        if args.output_tokens is not None:
            raise PredictionError(f"--output-tokens applies to --mode serve; a {args.mode} "
                                  f"plan takes --seq tokens per sample (drop the flag)")
        return None
    return args.output_tokens or SERVE_OUTPUT_TOKENS


def run(args: argparse.Namespace) -> int:
    from roofcast.app.output_file import check_writable, deliver, render

    if args.output is not None:
        check_writable(args.output)  # before any work
    tables, extra = plan_output(args)
    deliver(render(tables, args.format, extra), args.output, "plan")
    if args.format == "csv" and "verdict" in extra:  # a CSV has rows only
        print(f"roofcast plan: {extra['verdict']}", file=sys.stderr)
    for note in extra.get("_notes", ()):
        print(f"roofcast plan: note: {note}", file=sys.stderr)
    return 0


def plan_output(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tables and header of the search (module docstring)."""
    from roofcast import parallel_api
    from roofcast.app.model_ref import bind_dims
    from roofcast.app.parallel_report import search_output, serving_output

    args.output_tokens = serve_output_tokens(args)
    if args.rate is not None or args.slo_ttft is not None or args.slo_tpot is not None:
        return capacity_output(args)
    if args.search_disagg or args.spec_decode is not None or args.spec_accept is not None:
        from roofcast.predictor.errors import PredictionError

        raise PredictionError("--search-disagg / --spec-decode are capacity-planner options: "
                              "give --mode serve --rate R and an SLO")
    where = check_args(args)
    target = parallel_api.target_system(**where)  # an unknown system fails before any work
    top = top_rows(args)
    header: dict[str, Any] = {"model": str(args.model), "system": target.id,
                              "device": target.device, "devices": target.n_devices,
                              "mode": args.mode}
    kw: dict[str, Any] = {} if args.estimator is None else {"estimator": args.estimator}
    if args.mode == "serve":
        options = {"runtime": args.runtime} if args.runtime else {}
        df = parallel_api.plan(args.model, target, mode="serve", global_batch=args.global_batch,
                               seq_tokens=args.seq, output_tokens=args.output_tokens,
                               **options, **kw)
        header.update({"input_tokens": args.seq or 512, "output_tokens": args.output_tokens})
        return serving_output(df, args.format, top, header)
    dims = bind_dims(args.dim)
    source = parallel_api.parallel_source(
        args.model, mode=args.mode, precision=args.precision, optimizer=args.optimizer,
        runtime=args.runtime, seq_tokens=args.seq, onnx_decoders=True,
        **({"dims": dims} if dims else {}))
    facts = source.facts
    header.update({"model": facts.name, "global_batch": args.global_batch,
                   **({} if facts.seq_tokens is None else {"seq_tokens": facts.seq_tokens})})
    search = parallel_api.plan(source, target, global_batch=args.global_batch, mode=args.mode,
                               zero=args.zero, recompute=RECOMPUTE[args.recompute],
                               tp_comm_overlap=ON_OFF[args.tp_comm_overlap or "on"], **kw)
    return search_output(search, args.format, top, header)


def capacity_verdict(df) -> str:
    """The sentence naming the cheapest candidate meeting the SLOs, with its choices."""
    best = df.iloc[0] if len(df) and bool(df["meets"].iloc[0]) else None
    if best is None:
        return "no candidate meets the SLOs at this rate"
    price = (f"${best['cost_usd']:,.0f} list price" if best["cost_usd"] == best["cost_usd"]
             else "no catalog price")
    how = (f"prefill:decode {best['disagg']} disaggregated, " if best["disagg"]
           else "colocated, ")
    how += f"speculative decoding {best['spec_decode']}" if best["spec_decode"] else \
        "no speculative decoding"
    return (f"cheapest meeting the SLOs: {int(best['replicas'])} replica(s) of tp="
            f"{int(best['tp'])} on {best['device']} = {int(best['devices'])} devices "
            f"({price}; {how})")


def capacity_output(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--mode serve --rate R --slo-ttft MS --slo-tpot MS``: the candidates ranked by cost and
    the verdict naming the cheapest (``predictor.llm.sim.planner``)."""
    from roofcast import api
    from roofcast.app.commands.compare import split_devices
    from roofcast.app.output import top_rows
    from roofcast.predictor.errors import PredictionError

    if args.mode != "serve" or args.rate is None:
        raise PredictionError("--rate/--slo-ttft/--slo-tpot plan serving capacity: give "
                              "--mode serve --rate R and at least one SLO")
    if (args.system is None) == (args.hw is None) or args.devices is not None:
        raise PredictionError("capacity planning takes --hw A,B,C (candidate devices) or "
                              "--system ID, not both, and no --devices (it finds the count)")
    where = ({"system": args.system} if args.system is not None
             else {"hw": split_devices(args.hw)})
    kw = {} if args.estimator is None else {"estimator": args.estimator}
    spec = spec_decode(args)
    if spec is not None:
        kw["spec_decode"] = spec
    arch = api.llm_arch(args.model)
    df = api.plan(arch, **where, rate=args.rate, slo_ttft_ms=args.slo_ttft,
                  slo_tpot_ms=args.slo_tpot, input_tokens=args.seq or 512,
                  output_tokens=args.output_tokens,
                  weights=args.weights or arch.weight_dtype or "fp16", kv_cache=args.kv,
                  runtime=args.runtime, search_disagg=args.search_disagg, **kw)
    verdict = capacity_verdict(df)
    head = {"model": str(args.model), "mode": "serve", "rate": args.rate,
            "slo_ttft_ms": args.slo_ttft, "slo_tpot_ms": args.slo_tpot,
            "road": "simulated capacity plan (each engine's default scheduler policy; replicas "
                    "share the rate evenly; SLOs met by 90 % of requests)", "verdict": verdict}
    notes = [n for n in df["notes"].fillna("") if n]
    if args.format != "json":
        head["_notes"] = list(dict.fromkeys(notes))
    top = top_rows(args)
    shown = df.head(top) if top else df
    return {"candidates": shown.drop(columns=["notes"]) if args.format == "table" else shown}, head
