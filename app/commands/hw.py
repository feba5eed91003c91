"""``roofcast hw list|show|calibrate``: the hardware catalog and the local empirical roofline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from roofcast.app.output import Table, add_format_arg, emit
from roofcast.hw_catalog import HardwareSpec, get_device, list_devices, user_dir
from roofcast.hw_catalog.schema import FIELDS, KINDS, get_path, spec_to_doc


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hw", help="hardware catalog: list, show, calibrate this machine",
                       description=__doc__)
    hw_sub = p.add_subparsers(dest="hw_command", required=True)

    p_list = hw_sub.add_parser("list", help="list catalog devices (built-in and user folder)")
    p_list.add_argument("--kind", choices=KINDS, help="only devices of this kind")
    add_format_arg(p_list)
    p_list.set_defaults(func=run_list)

    p_show = hw_sub.add_parser("show", help="all figures and sources of one device")
    p_show.add_argument("device", help="id, alias, 'local', or inline what-if "
                                       "'h100-sxm:mem_bw_GBps=6700,l2_MB=100'")
    add_format_arg(p_show)
    p_show.set_defaults(func=run_show)

    p_cal = hw_sub.add_parser(
        "calibrate", help="measure this machine's empirical roofline into the 'local' device",
        description="Measure GEMM FLOP/s per dtype and thread count, bandwidth per working-set "
                    "size and ONNX Runtime dispatch overhead (under 90 s; --quick: seconds), "
                    "and write the 'local' device file.")
    p_cal.add_argument("--quick", action="store_true",
                       help="fewer sizes and repeats (a few seconds; rougher figures)")
    p_cal.add_argument("--output", type=Path, metavar="PATH",
                       help="file to write (default: <user folder>/local.toml)")
    add_format_arg(p_cal)
    p_cal.set_defaults(func=run_calibrate)


def _tera(spec: HardwareSpec, engine: str, dtype: str) -> float | None:
    value = spec.peak_flops_or_none(engine, dtype)
    return None if value is None else value / 1e12


#: each figure's column is named by its what-if key (``h100-sxm:matrix_fp16_TOPS=2000``), in
#: that key's unit (TOPS = TFLOP/s, GB = GiB, MB = MiB)
LIST_COLUMNS = ("id", "name", "kind", "matrix_fp16_TOPS", "matrix_bf16_TOPS", "vector_fp32_TOPS",
                "mem_GB", "mem_bw_GBps", "l2_MB", "tdp_W", "price_USD", "source")


def list_table(specs: list[HardwareSpec]) -> Table:
    """One row per device; peaks are exact entries (blank when the device lacks the unit)."""
    rows = [{
        "id": s.id, "name": s.name, "kind": s.kind,
        "matrix_fp16_TOPS": _tera(s, "matrix", "fp16"),
        "matrix_bf16_TOPS": _tera(s, "matrix", "bf16"),
        "vector_fp32_TOPS": _tera(s, "vector", "fp32"),
        "mem_GB": s.mem_capacity_bytes / 2**30, "mem_bw_GBps": s.mem_bw_Bps / 1e9,
        "l2_MB": s.l2_bytes / 2**20, "tdp_W": s.tdp_W, "price_USD": s.price_usd,
        "source": s.origin,
    } for s in specs]
    return Table.from_records(rows, LIST_COLUMNS)


def run_list(args: argparse.Namespace) -> int:
    specs = list_devices(args.kind)
    emit({"devices": list_table(specs)}, args.format,
         extra={"devices": len(specs), "user_folder": str(user_dir())})
    return 0


def show_tables(spec: HardwareSpec) -> tuple[dict[str, Table], dict[str, Any]]:
    """Tables of ``hw show``: figures (key, value, unit), peaks, sources; extra scalars."""
    doc = spec_to_doc(spec)
    fields = [{"key": f.dotted, "value": get_path(doc, f.path), "unit": f.unit}
              for f in FIELDS
              if f.path[0] not in ("peak_TOPS", "sources", "aliases", "notes", "id", "name")
              and get_path(doc, f.path) is not None]
    peaks = [{"engine": e, "dtype": d, "peak_TOPS": v / 1e12,
              "ridge_flop_per_byte": v / spec.mem_bw_Bps}
             for (e, d), v in spec.peak_flops.items()]
    tables = {
        "figures": Table.from_records([{**f, "value": str(f["value"])} for f in fields],
                                      ("key", "value", "unit")),
        "peaks": Table.from_records(peaks, ("engine", "dtype", "peak_TOPS",
                                            "ridge_flop_per_byte")),
        "sources": Table(("source",), tuple((src,) for src in spec.sources)),
    }
    extra: dict[str, Any] = {"id": spec.id, "name": spec.name, "origin": spec.origin}
    if spec.aliases:
        extra["aliases"] = ", ".join(spec.aliases)
    if spec.base:
        extra["base"] = spec.base
    if spec.path:
        extra["file"] = spec.path
    if spec.notes:
        extra["notes"] = spec.notes
    bw = spec.calibration.get("bandwidth") if spec.calibration else None
    if bw:
        curve_key = next(k for k in bw if k.startswith("GBps_") and k != "GBps_1thread")
        tables["bandwidth_curve"] = Table(
            ("working_set_KiB", "GBps_1thread", curve_key),
            tuple(zip(bw["working_set_KiB"], bw["GBps_1thread"], bw[curve_key], strict=True)))
        tables["gemm_curve"] = gemm_table(spec.calibration["gemm"])
        extra["calibrated"] = spec.calibration.get("date", "")
    return tables, extra


def gemm_table(gemm: Any) -> Table:
    """threads x dtype achieved GFLOP/s (GOP/s for int8) from a ``[calibration.gemm]`` table."""
    rows = []
    for dtype, g in gemm.items():
        if "not_measured" in g:
            rows.append({"dtype": dtype, "threads": None, "GFLOPs": None,
                         "note": g["not_measured"]})
            continue
        for t, v in zip(g["threads"], g["GFLOPs"], strict=True):
            rows.append({"dtype": dtype, "threads": t, "GFLOPs": v, "note": ""})
    return Table.from_records(rows, ("dtype", "threads", "GFLOPs", "note"))


def run_show(args: argparse.Namespace) -> int:
    tables, extra = show_tables(get_device(args.device))
    emit(tables, args.format, extra=extra)
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    from roofcast.hw_catalog.calibrate import run_calibration, write_local

    out = args.output or (user_dir() / "local.toml")
    if args.output is not None:
        from roofcast.app.output_file import check_writable

        check_writable(out)  # the --output policy (no link, FIFO or folder), before any work

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    doc = run_calibration(quick=args.quick, progress=progress)
    path = write_local(doc, out)
    cal = doc["calibration"]
    summary = Table.from_records([
        {"figure": "fp32 GEMM (best over 1..N threads)",
         "value": doc["peak_TOPS"]["matrix"]["fp32"] * 1e3,
         "unit": "GFLOP/s"},
        {"figure": "DRAM bandwidth", "value": doc["memory"]["bandwidth_GBps"], "unit": "GB/s"},
        *({"figure": f"{k.removesuffix('_GBps')} bandwidth", "value": v, "unit": "GB/s"}
          for k, v in cal["bandwidth"]["plateaus"].items()
          if k.endswith("_GBps") and k != "DRAM_GBps"),
        {"figure": "ORT dispatch per node", "value": doc["overhead"]["launch_overhead_us"],
         "unit": "us"},
        *([{"figure": "CPU share used by other processes meanwhile",
            "value": cal["other_processes_cpu_share"], "unit": "fraction"}]
          if "other_processes_cpu_share" in cal else []),
    ], ("figure", "value", "unit"))
    emit({"summary": summary, "gemm": gemm_table(cal["gemm"])}, args.format,
         extra={"cpu": cal["cpu_model"], "written": str(path), "duration_s": cal["duration_s"]})
    return 0
