"""The packaged copy of the public GPU kernel table, so training works without the full files.

``training_data/public/kernels.parquet`` holds every row ``public_kernels.load_kernels`` returns
from the four public files (NeuSight MIT, DeepBench Apache-2.0; 274k rows, 2.4 MB against 8 MB
of CSV), same columns, dtypes and order, so any ``--cap``/``--devices``/seed draws the very rows
it draws from the full files and a model trained on either is the same.
``kernels.json`` beside it records what the table was built from: the source files with their
sha256, the rows ``load_kernels`` left out (``skipped``, ``unmapped``), row count, licences.
Rebuild both with ``python -m roofcast.training_data.public.build_packed`` after the full files
or ``load_kernels`` change (a test checks that the copy still equals a fresh load).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

PACKED_DIR = Path(__file__).resolve().parent / "public"
TABLE_FILE = "kernels.parquet"
META_FILE = "kernels.json"
LICENCES = {
    "neusight": "MIT (sitar-lab/NeuSight)",
    "deepbench": "Apache-2.0 (baidu-research/DeepBench)",
}


class PackedDataError(ValueError):
    """The packaged kernel table is missing or does not match its metadata."""


def write_packed(kernels: pd.DataFrame, meta: dict[str, Any],
                 folder: str | Path = PACKED_DIR) -> Path:
    """Write ``kernels`` as ``TABLE_FILE`` and ``meta`` (plus rows, columns, licences) as
    ``META_FILE`` in ``folder``, each written beside and then renamed. Returns the table path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"rows": len(kernels), "columns": list(kernels.columns), **meta, "licences": LICENCES}
    table = folder / TABLE_FILE
    kernels.to_parquet(table.with_suffix(".tmp"), compression="gzip", index=False)
    os.replace(table.with_suffix(".tmp"), table)
    tmp = folder / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1) + "\n")
    os.replace(tmp, folder / META_FILE)
    return table


def read_packed(folder: str | Path = PACKED_DIR) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The packaged table and its metadata; raises :class:`PackedDataError` when either file is
    missing or the table's rows/columns differ from what the metadata records."""
    folder = Path(folder)
    table, meta_path = folder / TABLE_FILE, folder / META_FILE
    if not table.is_file() or not meta_path.is_file():
        raise PackedDataError(
            f"packaged public kernels not found in {folder} ({TABLE_FILE}, {META_FILE}); rebuild "
            "them with `python -m roofcast.training_data.public.build_packed` or set "
            "ROOFCAST_SHARED_DATA to the folder that holds gpu_kernels/")
    meta = json.loads(meta_path.read_text())
    kernels = pd.read_parquet(table)
    if len(kernels) != meta["rows"] or list(kernels.columns) != meta["columns"]:
        raise PackedDataError(f"{table} holds {len(kernels)} rows / columns {list(kernels.columns)}"
                              f" but {META_FILE} records {meta['rows']} / {meta['columns']}; "
                              "rebuild with `python -m roofcast.training_data.public.build_packed`")
    return kernels, meta
