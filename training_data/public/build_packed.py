"""Build the packaged public kernel table from the full public files.

    python -m roofcast.training_data.public.build_packed [--data-dir DIR] [--out-dir DIR]

Reads the four files under ``DIR/gpu_kernels/`` (default ``$ROOFCAST_SHARED_DATA``, else
``../shared/data`` beside the checkout) with ``public_kernels.load_kernels`` and writes
``kernels.parquet`` + ``kernels.json`` (``training_data.packed_kernels``) beside this file.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from roofcast.training_data.packed_kernels import PACKED_DIR, write_packed
from roofcast.training_data.public_kernels import KERNEL_FILES, load_kernels, shared_data_dir


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, help="folder holding gpu_kernels/")
    p.add_argument("--out-dir", type=Path, default=PACKED_DIR)
    args = p.parse_args(argv)
    folder = shared_data_dir(args.data_dir)
    table = load_kernels(folder)
    sources = {
        f"gpu_kernels/{name}": sha256(folder / "gpu_kernels" / name) for name in KERNEL_FILES
    }
    path = write_packed(table.kernels, {"sources": sources, "skipped": table.skipped,
                                        "unmapped": table.unmapped}, args.out_dir)
    print(f"{path}: {len(table.kernels)} rows, {path.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
