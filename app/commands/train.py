"""``roofcast train``: fit the learned per-family predictors, validate them, save them.

Sources (``--from``, comma-separated or repeated; default ``bundled,public``): ``bundled`` (the
bundled CPU dataset), ``public`` (public GPU kernels: NeuSight, DeepBench), ``store`` (the
measurement store, ``--store PATH``), a CSV/Parquet FILE of measurement rows, or a DIR written
by ``roofcast data export --format parquet --partition-by device``. Validation: leave one device
out (GPU rows), leave one model out (CPU rows); per-family and end-to-end errors are printed
beside the analytical baseline. ``--scheduler local|dask-local:N|dask://HOST:PORT`` trains on
Dask workers (one exported DIR; at most 100,000 rows give the local model exactly).

Saving: installed as ``--install NAME`` (default ``latest``) and made active for
``--estimator learned|auto`` everywhere (``roofcast models list|use|remove``; ``roofcast models
use default`` returns to the shipped model); ``--output DIR`` writes the folder there (use it
with ``ROOFCAST_LEARNED_MODEL=DIR``). Saving never loses a file: the new model is swapped in by
renames, and an ``--output`` that cannot be written is refused before training.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from roofcast.app.argtypes import positive_int
from roofcast.app.output import add_format_arg, emit

DEFAULT_INSTALL_NAME = "latest"

if TYPE_CHECKING:
    pass


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train and validate the learned predictors",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="sources", action="append", metavar="SRC",
                   help="bundled | public | store | FILE (comma-separated or repeated; "
                        "default bundled,public)")
    p.add_argument("--scheduler", default="local", metavar="S",
                   help="local (default) | dask-local:N | dask://HOST:PORT (Dask: --from one "
                        "exported Parquet DIR)")
    p.add_argument("--devices", metavar="A,B", help="train only on these device ids")
    p.add_argument("--holdout-device", action="append", default=[], metavar="ID",
                   help="keep this device out of training and report errors on it (repeatable)")
    p.add_argument("--holdout-model", action="append", default=[], metavar="NAME",
                   help="keep this model out of training and report errors on it (repeatable)")
    p.add_argument("--install", metavar="NAME",
                   help=f"install the model under NAME and make it the active one (default "
                        f"{DEFAULT_INSTALL_NAME!r} unless --output is given)")
    p.add_argument("--output", metavar="DIR", help="write the model folder to DIR")
    p.add_argument("--no-save", action="store_true", help="validate only, save nothing")
    p.add_argument("--store", metavar="PATH", help="measurement store file for --from store")
    p.add_argument("--cap", type=positive_int, default=None, metavar="N",
                   help="public kernels: at most N rows per (family, device) (default 1500)")
    p.add_argument(
        "--quick", action="store_true", help="smaller ensembles, fewer rows (fast check)"
    )
    p.add_argument("--per-group", action="store_true", help="also print errors per device/model")
    add_format_arg(p)
    p.set_defaults(func=run)


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for text in values or [] for v in text.split(",") if v.strip()]


def _sources(values: list[str] | None) -> list[str]:
    """The ``--from`` sources (not given: ``bundled,public``); given but empty (``--from ""``,
    ``",,,"``) or naming a source twice is refused (``api_checks.distinct_names``)."""
    from roofcast.api_checks import distinct_names

    if values is None:
        return ["bundled", "public"]
    return distinct_names([v for text in values for v in text.split(",")], "from",
                          "bundled,public")


def _load(args: argparse.Namespace, sources: list[str], devices: list[str] | None, cap: int,
          say, stack: ExitStack):
    """(training set, fitter) for the sources on ``args.scheduler``: exported Parquet DIRs are
    read by ``distributed`` (on the cluster for a Dask scheduler, which then fits there too),
    the other sources by ``data.load_sources``."""
    from roofcast.predictor import dask_client
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.learned import distributed
    from roofcast.predictor.learned.data import combine, load_sources
    from roofcast.predictor.learned.model import FamilyModel
    from roofcast.training_data.partitioned import is_export

    on_dask = dask_client.parse_scheduler(args.scheduler).is_dask
    exports = [s for s in sources if Path(s).is_dir() and is_export(s)]
    others = [s for s in sources if s not in exports]
    fit = FamilyModel.fit
    if on_dask:
        if others or len(exports) != 1:
            raise PredictionError(f"--scheduler {args.scheduler} trains on one exported Parquet "
                                  "folder: --from DIR (write it with `roofcast data export "
                                  "--format parquet --partition-by device --output DIR`)")
        client = stack.enter_context(distributed.open_client(args.scheduler))
        workers = len(client.scheduler_info().get("workers", {}))
        say(f"Dask scheduler {client.scheduler.address}: {workers} workers")
        data = distributed.read_cluster(exports[0], client)
        sets = [data.ts]
        fit = distributed.DaskFitter(client, data)
    else:
        sets = [distributed.read_local(e) for e in exports]
    for e, ts in zip(exports, sets, strict=True):
        say(f"{e}: {len(ts)} rows from the Parquet export"
            + (f" (dropped {ts.dropped})" if ts.dropped else ""))
    if others:
        sets.append(load_sources(others, devices=devices, store_path=args.store, cap=cap,
                                 say=say))
    ts = sets[0] if len(sets) == 1 else combine(sets)
    if devices and exports:
        from roofcast.hw_catalog.catalog import get_device

        ts = ts.subset(ts.X["device"].isin({get_device(d).id for d in devices}).to_numpy())
        if len(ts) == 0:
            raise PredictionError("no training rows left after the --devices filter")
    return ts, fit


def run(args: argparse.Namespace) -> int:
    from roofcast.predictor.learned.training import (
        evaluate_holdout,
        split_holdout,
        train,
        validation_tables,
    )

    def say(msg: str) -> None:
        if args.format == "table":
            print(f"roofcast train: {msg}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    install_name = _install_name(args)
    sources = _sources(args.sources)
    devices = _split([args.devices]) if args.devices else None
    cap = _cap(args)
    with ExitStack() as stack:
        ts, fit = _load(args, sources, devices, cap, say, stack)
        train_ts, held = split_holdout(ts, _split(args.holdout_device), _split(args.holdout_model))
        result = train(train_ts, quick=args.quick, progress=say, fit=fit,
                       meta=_meta(args, ts, sources, cap))
    tables = validation_tables(result)
    if not args.per_group:
        tables.pop("per_group", None)
    if held is not None:
        tables.update(evaluate_holdout(result.model, held))
    extra: dict = {"sources": ",".join(sources),
                   **{f"rows {u.name}": f"{u.rows} from {u.origin}" for u in ts.used},
                   "training_rows": len(train_ts),
                   "held_out_rows": 0 if held is None else len(held),
                   "data_hash": ts.data_hash[:16], "models": ",".join(sorted(result.model.models))}
    extra.update(_save(result.model, args.output, install_name))
    for i, note in enumerate(result.notes):
        extra[f"note {i + 1}"] = note
    extra["elapsed_s"] = round(time.perf_counter() - t0, 1)
    emit({k: df.round(2) if len(df) else df for k, df in tables.items()}, args.format,
         extra=extra)
    return 0


def _install_name(args: argparse.Namespace) -> str | None:
    """The name to install under (None: not installed); checked, and ``--output`` checked
    writable, before training rather than after it."""
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.learned.installed import check_name
    from roofcast.predictor.learned.persistence import check_output

    if args.no_save and (args.install or args.output):
        raise PredictionError("--no-save saves nothing: drop it, or drop --install/--output")
    install_name = None if args.no_save else (
        args.install or (None if args.output else DEFAULT_INSTALL_NAME))
    if install_name is not None:
        check_name(install_name)
    if args.output:
        check_output(args.output)  # before training, not after it
    return install_name


def _cap(args: argparse.Namespace) -> int:
    """Public kernels per (family, device): ``--cap``, else the default (a fifth if quick)."""
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.learned.data import DEFAULT_CAP

    cap = args.cap if args.cap is not None else (DEFAULT_CAP // 5 if args.quick else DEFAULT_CAP)
    if cap < 1:
        raise PredictionError(f"--cap must be >= 1, got {cap}")
    return cap


def _meta(args: argparse.Namespace, ts, sources: list[str], cap: int) -> dict:
    """The provenance saved with the model: sources, command line, holdouts, time, rows."""
    from datetime import UTC, datetime

    command = "roofcast train " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["train"] else ""
    return {"sources": sources, "command": command, "cap": cap,
            "scheduler": args.scheduler,
            "holdout_devices": _split(args.holdout_device),
            "holdout_models": _split(args.holdout_model),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "source_rows": {u.name: u.rows for u in ts.used},
            "source_origins": {u.name: u.origin for u in ts.used}}


def _save(model, output: str | None, install_name: str | None) -> dict:
    """Write the model to ``output`` and/or install it; the summary lines saying where."""
    from roofcast.predictor.learned.installed import install
    from roofcast.predictor.learned.persistence import save

    extra: dict = {}
    if output:
        extra["saved_to"] = str(save(model, output))
        extra["use_with"] = (f"ROOFCAST_LEARNED_MODEL={extra['saved_to']} roofcast predict ... "
                             "--estimator auto")
    if install_name is not None:
        extra["installed_as"] = f"{install_name} ({install(model, install_name)}), active"
        extra["use_with"] = ("roofcast predict ... --estimator learned|auto; back to the shipped "
                             "model: roofcast models use default")
    return extra
