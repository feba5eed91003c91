"""``roofcast data list|stats|export|import``: the measurement store (your measured kernel
times, from ``roofcast measure`` or imported files)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from roofcast.app.argtypes import OneOf
from roofcast.app.output import Table, add_format_arg, emit


def public_datasets() -> tuple[str, ...]:
    from roofcast.training_data.importers import PUBLIC_DATASETS

    return tuple(PUBLIC_DATASETS)

LIST_COLUMNS = (
    "device_id",
    "runtime",
    "op_type",
    "family",
    "dtype",
    "direction",
    "input_shapes",
    "batch",
    "threads_intra",
    "latency_s",
    "run_id",
    "source",
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="measurement store: list, stats, export, import",
                       description=__doc__)
    data_sub = p.add_subparsers(dest="data_command", required=True)

    p_list = data_sub.add_parser("list", help="stored measurements (newest last)")
    _filters(p_list)
    p_list.add_argument("--limit", type=int, default=20, metavar="N",
                        help="at most N rows (default 20; 0 = all)")
    _store_arg(p_list)
    add_format_arg(p_list)
    p_list.set_defaults(func=run_list)

    p_stats = data_sub.add_parser("stats", help="rows per device, dataset and op family")
    _store_arg(p_stats)
    add_format_arg(p_stats)
    p_stats.set_defaults(func=run_stats)

    p_exp = data_sub.add_parser(
        "export", help="write stored rows to a .csv or .parquet file (the import format; CSV "
                       "text cells starting with = + - @ get a leading '), or with --format "
                       "parquet --partition-by device --output DIR a partitioned Parquet "
                       "dataset for `roofcast train --from DIR --scheduler ...`",
        description="FILE: one .csv/.parquet file. --format parquet --partition-by device "
                    "--output DIR: a Hive-partitioned Parquet dataset (DIR/device_id=ID/"
                    "part-N.parquet plus a manifest), written to a temporary folder and renamed "
                    "into place; DIR must be new or empty.")
    p_exp.add_argument("file", type=Path, nargs="?", metavar="FILE")
    p_exp.add_argument("--format", dest="export_format", choices=("parquet",),
                       help="dataset format of --output (parquet)")
    p_exp.add_argument("--partition-by", metavar="COL",
                       help="one folder per value of COL: device (with --output)")
    p_exp.add_argument("--output", type=Path, metavar="DIR",
                       help="dataset folder to create (with --format parquet)")
    _filters(p_exp)
    _store_arg(p_exp)
    p_exp.set_defaults(func=run_export)

    p_imp = data_sub.add_parser(
        "import", help="import a CSV/Parquet file of measurements, or a public dataset",
        description="Import the user's measurements (columns: training_data/README.md; every "
                    "row is checked and one bad row rejects the file, nothing half-written) or "
                    "a public kernel dataset from ../shared/data. Re-importing is a no-op "
                    "(rows counted as duplicates). The file is read in chunks; limits per file, "
                    "checked while reading: $ROOFCAST_MAX_IMPORT_BYTES bytes after gzip "
                    "decompression (default 128 MiB) and $ROOFCAST_MAX_IMPORT_ROWS rows "
                    "(default 500000).")
    what = p_imp.add_mutually_exclusive_group(required=True)
    what.add_argument("file", nargs="?", type=Path, metavar="FILE", help="CSV or Parquet file")
    what.add_argument("--public", type=OneOf(public_datasets, "public dataset"),
                      metavar="NAME",
                      help="public dataset: neusight, deepbench or all (an unknown name lists "
                           "them)")
    p_imp.add_argument("--data-dir", type=Path, metavar="DIR",
                       help="folder holding gpu_kernels/ (default: $ROOFCAST_SHARED_DATA or "
                            "../shared/data beside the checkout)")
    _store_arg(p_imp)
    add_format_arg(p_imp)
    p_imp.set_defaults(func=run_import)


def _store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", type=Path, metavar="PATH",
                   help="store file (default: $ROOFCAST_DATA_DIR/measurements.sqlite, else "
                        "<XDG data dir>/roofcast/measurements.sqlite; `roofcast data stats` "
                        "prints it)")


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device", action="append", metavar="ID", help="device id or alias (repeatable)"
    )
    p.add_argument("--family", action="append", metavar="F", help="op family (repeatable)")
    p.add_argument("--op-type", action="append", metavar="OP", help="ONNX op type (repeatable)")
    p.add_argument("--source", action="append", metavar="S",
                   help="source, or its prefix before ':' such as neusight (repeatable)")
    p.add_argument("--model", action="append", metavar="M", help="model name (repeatable)")


def _filter_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {"device": args.device, "family": args.family, "op_type": args.op_type,
            "source": args.source, "model": args.model}


def run_list(args: argparse.Namespace) -> int:
    from roofcast.training_data.store import Store

    store = Store(args.store)
    limit = None if args.limit <= 0 else args.limit
    df = store.read(**_filter_kwargs(args), limit=limit)
    table = df if args.format != "table" else df[list(LIST_COLUMNS)]
    emit({"measurements": table}, args.format,
         extra={"store": str(store.path), "shown": len(df), "stored": store.count()})
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from roofcast.training_data.store import Store

    store = Store(args.store)
    stats = store.stats()
    emit({"stats": stats}, args.format, extra={"store": str(store.path), "rows": store.count()})
    return 0


def run_export(args: argparse.Namespace) -> int:
    from roofcast.training_data.errors import MeasurementError
    from roofcast.training_data.store import Store

    dataset = args.output is not None or args.export_format or args.partition_by
    if dataset and args.file is not None:
        raise MeasurementError("give either FILE or --output DIR (a partitioned dataset), not both")
    if not dataset:
        if args.file is None:
            raise MeasurementError("give a FILE (.csv/.parquet) or --format parquet "
                                   "--partition-by device --output DIR")
        store = Store(args.store)
        n = store.export(args.file, **_filter_kwargs(args))
        print(f"wrote {n} rows to {args.file}")
        return 0
    if args.output is None:
        raise MeasurementError("a partitioned export needs --output DIR (a new folder)")
    from roofcast.training_data.partitioned import export_partitioned

    report = export_partitioned(Store(args.store), args.output,
                                partition_by=args.partition_by or "device",
                                **_filter_kwargs(args))
    print(f"wrote {report.rows} rows in {report.partitions} partitions ({report.files} files) "
          f"to {report.folder}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from roofcast.training_data.importers import import_file, import_public
    from roofcast.training_data.store import Store

    store = Store(args.store)
    if args.public:
        print(f"importing public dataset {args.public} (1-2 minutes for 'all')...",
              file=sys.stderr, flush=True)
        report = import_public(args.public, store, args.data_dir)
    else:
        report = import_file(args.file, store)
    lost = Table(("reason", "rows"), tuple(sorted(report.not_imported.items())))
    tables = {"rows_per_device": report.per_device}
    if lost.rows:
        tables["not_imported"] = lost
    emit(tables, args.format, extra={
        "imported": report.name, "store": str(store.path), "rows_read": report.rows_read,
        "added": report.added, "duplicates": report.duplicates,
        "not_imported": sum(int(n) for _, n in lost.rows)})
    return 0
