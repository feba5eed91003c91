"""``roofcast systems list|show``: the multi-device systems of the catalog.

A system is N devices of one catalog device: nodes x devices per node, the intra-node fabric
(NVSwitch, NVLink bridge pairs, PCIe with or without a switch, Infinity Fabric, an NVLink domain)
with its per-device bandwidth (GB/s per direction) and latency, and the NICs per node. Built-in
systems are data files (``hw_catalog/systems/*.toml``); your own go in ``$ROOFCAST_SYSTEMS_DIR``.
Any system can be changed inline as a what-if: ``roofcast systems show hgx-h100:nodes=4``. The
same references go to ``--system`` of ``predict``, ``compare``, ``llm`` and ``plan``.
"""

from __future__ import annotations

import argparse
from typing import Any

from roofcast.app.output import Table, add_format_arg, emit

#: columns of ``systems list`` in the table format (csv / json: every column of
#: ``roofcast.systems()``).
LIST_COLUMNS = ("id", "name", "device", "nodes", "devices_per_node", "devices", "fabric",
                "link_GBps", "nic_count_per_node", "nic_GBps", "measured_as")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("systems", help="multi-device systems: list, show (fabric, NICs, nodes)",
                       description=__doc__)
    systems_sub = p.add_subparsers(dest="systems_command", required=True)
    p_list = systems_sub.add_parser("list", help="list the catalog's systems")
    add_format_arg(p_list)
    p_list.set_defaults(func=run_list)
    p_show = systems_sub.add_parser("show", help="every figure and source of one system")
    p_show.add_argument("system", help="id or alias, or what-if BASE:key=value,... "
                                       "(e.g. hgx-h100:nodes=4,nic_GBps=100)")
    add_format_arg(p_show)
    p_show.set_defaults(func=run_show)


def run_list(args: argparse.Namespace) -> int:
    from roofcast.hw_catalog.systems import list_systems, user_systems_dir
    from roofcast.parallel_api import SYSTEM_COLUMNS, system_row

    rows = [system_row(s) for s in list_systems()]
    columns = LIST_COLUMNS if args.format == "table" else SYSTEM_COLUMNS
    emit({"systems": Table.from_records(rows, columns)}, args.format,
         extra={"n_systems": len(rows), "user_folder": str(user_systems_dir())})
    return 0


def show_tables(spec: Any) -> tuple[dict[str, Table], dict[str, Any]]:
    """Tables of ``systems show``: figures (key, value, unit) and sources; header scalars."""
    from roofcast.parallel_api import system_row

    row = system_row(spec)
    units = {"link_GBps": "GB/s per device per direction", "fabric_latency_us": "us",
             "nic_GBps": "GB/s per NIC per direction", "nic_latency_us": "us",
             "nic_GBps_per_node": "GB/s per node per direction"}
    figures = [{"key": k, "value": "" if v is None else str(v), "unit": units.get(k, "")}
               for k, v in row.items() if k not in ("id", "name", "aliases", "measured_as")]
    tables = {"figures": Table.from_records(figures, ("key", "value", "unit")),
              "sources": Table(("source",), tuple((src,) for src in spec.sources))}
    extra: dict[str, Any] = {"id": spec.id, "name": spec.name}
    for key in ("aliases", "measured_as"):
        if row[key]:
            extra[key] = row[key]
    if spec.notes:
        extra["notes"] = spec.notes
    return tables, extra


def run_show(args: argparse.Namespace) -> int:
    from roofcast.parallel_api import system

    tables, extra = show_tables(system(args.system))
    emit(tables, args.format, extra=extra)
    return 0
