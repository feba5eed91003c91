"""``roofcast llm MODEL --hw ID[,ID...]``: serving a decoder-only LLM on one or several devices.

MODEL: a bundled config (``roofcast llm --list``), a Hugging Face id
(``meta-llama/Llama-3.1-70B``), a ``config.json`` (or its folder) or an ONNX decoder export. A
request is a prefill of ``--input-tokens`` then ``--output-tokens`` decode steps, served by an
engine (``--runtime vllm|tensorrt-llm|sglang|...``; default: the device kind's) at a static
``--batch``, or simulated request by request (``llm_sim``): ``--rate``, ``--trace``, or a closed
loop of ``--concurrency C`` (``max``: the scheduler's running cap), with percentiles and goodput.
One device: TTFT, TPOT, end-to-end latency, output and total tokens/s (with intervals), the
memory breakdown (GiB), the largest batch that fits, $ per million output tokens and tokens per
joule where the catalog has price / power (list price over three years, full TDP). Several
devices: one row each, ``speedup`` = output tokens/s over the first's. One replica on several
devices: ``--tp``, ``--pp``, ``--ep`` on ``--system ID`` or ``--devices N`` of ``--hw``
(``roofcast plan MODEL --mode serve`` ranks them). ``--output FILE``: atomically written.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofcast.app.argtypes import positive_int, runtime_name
from roofcast.app.commands.llm_sim import add_sim_args, sim_options, sim_output, simulated
from roofcast.app.output import Table, add_format_arg
from roofcast.app.output_file import check_writable, deliver, render
from roofcast.app.parallel_args import SERVING_FLAGS, add_degree_args, add_placement_args
from roofcast.app.spec_args import add_spec_args, spec_decode
from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.predictor.llm.types import ACTIVATION_DTYPES, KV_DTYPES, WEIGHT_DTYPES

if TYPE_CHECKING:
    import pandas as pd

#: (label, JSON key, unit) of the metrics a one-device run prints.
METRICS: tuple[tuple[str, str, str], ...] = (
    ("TTFT", "ttft_ms", "ms"), ("TPOT", "tpot_ms", "ms"),
    ("end-to-end latency", "e2e_latency_ms", "ms"),
    ("output tokens/s", "output_tokens_per_s", "tokens/s"),
    ("total tokens/s", "total_tokens_per_s", "tokens/s"))
#: the keys of one device's record in the JSON of several devices (``json_records``).
JSON_COLUMNS: tuple[str, ...] = (
    "device", "runtime", "estimator", "batch",
    *(f"{k}{end}" for k in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "output_tokens_per_s",
                            "total_tokens_per_s") for end in ("", "_lower", "_upper")),
    "speedup", "max_batch", "devices_needed", "memory_GiB", "fits", "usd_per_million_tokens",
    "tokens_per_joule")
#: (label, column of ``api.llm_row``) of the memory breakdown.
MEMORY: tuple[tuple[str, str], ...] = (
    ("weights", "weights_GiB"), ("KV cache", "kv_cache_GiB"),
    ("activations", "activations_GiB"), ("engine reserve", "reserve_GiB"),
    ("total", "memory_GiB"), ("device capacity", "capacity_GiB"))


def concurrency(text: str) -> int | str:
    """argparse ``type=`` for ``--concurrency``: an integer >= 1 or ``max``."""
    return "max" if text.strip().lower() == "max" else positive_int(text)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("llm", help="LLM serving: TTFT, TPOT, tokens/s and memory fit on "
                                   "one or several devices", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="bundled config name (--list), Hugging Face id, "
                                            "config.json path or ONNX decoder path")
    p.add_argument("--list", action="store_true", help="list the bundled model configs")
    p.add_argument("--hw", metavar="A,B,C", help="device id(s), comma-separated (roofcast hw list)")
    p.add_argument("--input-tokens", type=positive_int, default=512, metavar="N",
                   help="prompt tokens per request (default 512)")
    p.add_argument("--output-tokens", type=positive_int, default=128, metavar="M",
                   help="generated tokens per request (default 128)")
    batching = p.add_mutually_exclusive_group()
    batching.add_argument("--batch", type=positive_int, metavar="B",
                          help="static batching: B requests start and finish together "
                               "(default 1)")
    batching.add_argument("--concurrency", type=concurrency, metavar="C|max",
                          help="simulated closed loop of C clients; max: the engine's running "
                               "cap (max_num_seqs)")
    p.add_argument("--weights", choices=WEIGHT_DTYPES, default=None,
                   help="weight dtype (default: the dtype the model's config or repack id "
                        "stores them in, else fp16)")
    p.add_argument("--kv", choices=KV_DTYPES, default=None,
                   help="KV-cache dtype (default: the activations' dtype)")
    p.add_argument("--activations", choices=ACTIVATION_DTYPES, default="fp16",
                   help="activation dtype (default fp16)")
    p.add_argument("--runtime", type=runtime_name, metavar="ENGINE",
                   help="serving engine: vllm (v1), tensorrt-llm (1.x), sglang, their 2024 "
                        "releases vllm-2024 and tensorrt-llm-2024, llama.cpp, ... (roofcast "
                        "runtimes; default: the device kind's engine)")
    p.add_argument("--estimator", default=None, metavar="NAME",
                   help="kernel-time estimator (default: the engine's own kernel model, "
                        "engine-tables for vllm, tensorrt-llm and sglang; "
                        f"{SERVING_ESTIMATOR} for engines without one)")
    spec = p.add_argument_group("speculative decoding")
    add_spec_args(spec, "draft-and-verify")
    add_sim_args(p)
    group = p.add_argument_group("one replica on several devices")
    group.add_argument("--moe-imbalance", metavar="X",
                       help="MoE models with --ep > 1: max / mean token-expert pairs of the "
                            "expert groups, as load balancers report it (default 1: uniform)")
    add_placement_args(group)
    add_degree_args(group, SERVING_FLAGS)
    add_format_arg(p)
    p.add_argument("--output", type=Path, metavar="FILE",
                   help="write the output to FILE instead of the terminal (atomically)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from roofcast.predictor.errors import PredictionError

    if args.output is not None:
        check_writable(args.output)  # before any work
    if args.list:
        if args.model or args.hw or args.system:
            raise PredictionError("--list takes no MODEL or --hw; drop them, or drop --list")
        tables, extra = list_output()
    else:
        if not args.model:
            raise PredictionError("give a MODEL (roofcast llm --list shows the bundled ones)")
        if not args.hw and args.system is None:
            raise PredictionError("give --hw ID[,ID...]: the device(s) to serve on "
                                  "(roofcast hw list), or --system ID")
        tables, extra = serving_output(args)
    deliver(render(tables, args.format, extra), args.output, "llm")
    if args.format != "json":  # json holds its notes
        for note in extra.get("_notes", ()):
            print(f"roofcast llm: note: {note}", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- serving
def serving_output(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tables and header scalars of a serving run (one device or several)."""
    import pandas as pd

    from roofcast import api
    from roofcast.app.commands.compare import split_devices
    from roofcast.predictor.llm.types import ServingConfig

    arch = api.llm_arch(args.model)
    options = {"input_tokens": args.input_tokens, "output_tokens": args.output_tokens,
               "batch": args.batch, "concurrency": args.concurrency,
               "weights": args.weights or arch.weight_dtype or "fp16",
               "kv_cache": args.kv, "activations": args.activations, "runtime": args.runtime,
               "moe_imbalance": moe_imbalance(args.moe_imbalance)}
    degrees = serving_degrees(args)
    cfg = ServingConfig(**options, **degrees, spec_decode=spec_decode(args))
    options["spec_decode"] = cfg.spec_decode
    if args.estimator is not None:
        options["estimator"] = args.estimator
    if simulated(args):
        return simulated_output(args, arch, cfg, options, degrees)
    if args.disagg is not None:
        from roofcast.predictor.errors import PredictionError

        raise PredictionError("--disagg P:D is simulated: give --rate R or --trace FILE")
    if args.system is not None or args.devices is not None:
        where = parallel_placement(args)
        result = api.llm(arch, **where, **options, **degrees)
        if isinstance(result, pd.DataFrame):
            return several_devices(result, arch, cfg, args.format)
        if args.format == "csv":
            return several_devices(api.llm_frame([result]), arch, cfg, "csv")
        return one_device(result, arch, args.format)
    devices = split_devices(args.hw)
    specs = [api.device(d) for d in devices]  # every id checked before any work
    options.update(degrees)  # tp x pp > 1 on --hw alone: one node of tp x pp of each device
    if len(specs) == 1:
        pred = api.llm(arch, specs[0], **options)
        if args.format == "csv":  # a CSV is rows: the one device's row
            return several_devices(api.llm_frame([pred]), arch, cfg, "csv")
        return one_device(pred, arch, args.format)
    return several_devices(api.llm(arch, specs, **options), arch, cfg, args.format)


def simulated_output(args: argparse.Namespace, arch, cfg, options: dict[str, Any],
                     degrees: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The simulated road (``llm_sim``): one row per device."""
    from roofcast import api
    from roofcast.app.commands.compare import split_devices

    if args.batch is not None:
        from roofcast.predictor.errors import PredictionError

        raise PredictionError("--batch is the static road; drop it to simulate, or use "
                              "--policy static")
    sim = sim_options(args)
    if args.system is not None or args.devices is not None:
        where = parallel_placement(args)
    else:
        where = {"hw": [api.device(d) for d in split_devices(args.hw)]}
    df = api.llm(arch, **where, **options, **degrees, simulate=True, **sim)
    head = header(arch, cfg, args.format)
    head.pop("batch", None)
    head.update({k: v for k, v in (("rate", args.rate), ("trace", args.trace)) if v is not None})
    return sim_output(df, head, args.format)


def moe_imbalance(text: str | None) -> float:
    """``--moe-imbalance``: a finite number >= 1 (not given: 1, uniform routing)."""
    from roofcast.predictor.errors import PredictionError

    if text is None:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value >= 1.0):
        raise PredictionError(f"--moe-imbalance must be a number >= 1 (max / mean load of the "
                              f"expert groups; 1: uniform routing), got {text!r}")
    return value


def serving_degrees(args: argparse.Namespace) -> dict[str, int]:
    """``ServingConfig`` tp / pp / ep the user gave (none: the one-device config, as before)."""
    return {name: getattr(args, name) for name in SERVING_FLAGS if getattr(args, name) is not None}


def parallel_placement(args: argparse.Namespace) -> dict[str, Any]:
    """``api.llm`` keywords of ``--system ID`` or ``--hw A[,B] --devices N`` (not both)."""
    from roofcast.app.commands.compare import split_devices
    from roofcast.predictor.errors import PredictionError

    if args.system is not None:
        if args.hw or args.devices is not None:
            raise PredictionError("give --system ID or --hw ID --devices N, not both (the "
                                  "system names its device and count)")
        return {"system": args.system}
    hws = split_devices(args.hw) if args.hw else []
    if not hws:
        raise PredictionError("--devices N needs --hw ID: the device of which to take N")
    return {"hw": hws[0] if len(hws) == 1 else hws, "devices": args.devices}


def header(arch, cfg, fmt: str) -> dict[str, Any]:
    """The scalars every serving output starts with: the model and the run's settings (the
    table format spells them out; csv/json give the ``ServingConfig`` as ``as_dict`` does)."""
    from dataclasses import asdict

    head: dict[str, Any] = {"model": arch.name, "params_B": arch.params / 1e9}
    if fmt != "table":
        return {**head, "config": asdict(cfg)}
    batching = ({"concurrency": cfg.concurrency} if cfg.concurrency is not None
                else {"batch": cfg.batch or 1})
    replica = {k: getattr(cfg, k) for k in SERVING_FLAGS if getattr(cfg, k, 1) != 1}
    return {**head, "input_tokens": cfg.input_tokens, "output_tokens": cfg.output_tokens,
            **batching, "weights": cfg.weights, "kv_cache": cfg.kv_cache or cfg.activations,
            "activations": cfg.activations, **replica,
            **({"spec_decode": cfg.spec_decode.label()} if cfg.spec_decode else {}),
            **({"moe_imbalance": cfg.moe_imbalance} if cfg.moe_imbalance != 1.0 else {})}


def one_device(pred, arch, fmt: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One device: the header, then (table) the metrics with their intervals and the memory
    breakdown, or (json) the prediction's own record (``as_dict``) and ``fits``."""
    from roofcast import api

    extra = header(arch, pred.config, fmt)
    if fmt != "table":
        extra.update(pred.as_dict())
        extra["fits"] = bool(pred.memory.fits and pred.max_batch > 0)
        return {}, extra
    row = api.llm_row(pred)
    if pred.devices > 1:  # one replica over several devices: memory is per device
        extra["devices"] = pred.devices
    extra.update({"device": pred.device, "runtime": pred.runtime, "estimator": pred.estimator,
                  "served_batch": pred.batch, "max_batch": pred.max_batch, "fits": row["fits"],
                  "devices_needed": pred.devices_needed,
                  "usd_per_million_tokens": pred.usd_per_million_tokens,
                  "tokens_per_joule": pred.tokens_per_joule, "_notes": list(pred.notes)})
    metrics = Table.from_records(
        [{"metric": label, "value": row[key], "lower": row[f"{key}_lower"],
          "upper": row[f"{key}_upper"], "unit": unit} for label, key, unit in METRICS],
        ("metric", "value", "lower", "upper", "unit"))
    memory = Table.from_records([{"component": label, "GiB": row[col]}
                                 for label, col in MEMORY], ("component", "GiB"))
    return {"metrics": metrics, "memory": memory}, extra


def several_devices(df: pd.DataFrame, arch, cfg, fmt: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One row per device (``api.llm_frame``); the table format splits it into the metrics,
    the memory and the intervals."""
    extra = header(arch, cfg, fmt)
    extra["estimator"] = str(df["estimator"].iloc[0])
    extra["baseline"] = str(df["device"].iloc[0])
    all_notes = [f"{d}: {n}" for d, notes in zip(df["device"], df["notes"], strict=True)
                 for n in notes]
    if fmt == "csv":  # a CSV has rows only: the notes go to stderr as in the table format
        extra["_notes"] = all_notes
        return {"devices": df.drop(columns=["notes"])}, extra
    if fmt == "json":
        extra["notes"] = all_notes
        return {"devices": Table.from_records(json_records(df), JSON_COLUMNS)}, extra
    extra["_notes"] = all_notes
    devices = df[["device", "runtime", "batch", "ttft_ms", "tpot_ms", "e2e_latency_ms",
                  "output_tokens_per_s", "total_tokens_per_s", "speedup",
                  "usd_per_million_tokens", "tokens_per_joule"]]
    memory = df[["device", "weights_GiB", "kv_cache_GiB", "activations_GiB", "reserve_GiB",
                 "memory_GiB", "capacity_GiB", "fits", "max_batch", "devices_needed"]]
    intervals = Table.from_records(
        [{"device": r["device"], "metric": label, "lower": r[f"{key}_lower"], "value": r[key],
          "upper": r[f"{key}_upper"], "unit": unit}
         for r in df.to_dict("records") for label, key, unit in METRICS],
        ("device", "metric", "lower", "value", "upper", "unit"))
    return {"devices": devices, "memory": memory, "intervals": intervals}, extra


def json_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of several devices as ``ServingPrediction.as_dict`` writes one device:
    ``memory_GiB`` the breakdown {total, weights, kv_cache, activations, reserve, capacity}."""
    from roofcast import api

    records = []
    for row in df.drop(columns=["notes"]).to_dict("records"):
        memory = {part: row.pop(col) for part, col in api.LLM_MEMORY.items()}
        records.append({**row, "memory_GiB": memory})
    return records


# ----------------------------------------------------------------------------- --list
def list_output() -> tuple[dict[str, Any], dict[str, Any]]:
    """The bundled configs: parameters (billions), layers, heads, context, KV bytes per token."""
    from roofcast import api

    df = api.llm_configs()
    table = df.assign(params_B=df["params"] / 1e9, active_params_B=df["active_params"] / 1e9)
    table = table[["name", "family", "params_B", "active_params_B", "layers", "d_model", "heads",
                   "kv_heads", "head_dim", "max_context", "kv_bytes_per_token_fp16"]]
    return {"models": table}, {"bundled_models": len(table)}
