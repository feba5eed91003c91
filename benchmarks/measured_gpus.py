"""The ``--gpu`` choice shared by the benchmarks on this project's measured H100 / H200 folders.

``gpu_folders(kind)``: ``--gpu`` name -> (``training_data/measured/<gpu>_<kind>`` folder, catalog
device id); ``add_gpu_option`` / ``chosen_gpus``: the option and its validation (an unknown name
is refused by argparse: one line naming the choices, exit 2).
"""

from __future__ import annotations

import argparse
from pathlib import Path

MEASURED = Path(__file__).resolve().parents[1] / "training_data/measured"
#: --gpu name -> catalog device id of the GPU measured
CATALOG_ID = {"h100": "h100-sxm", "h200": "h200"}


def gpu_folders(kind: str) -> dict[str, tuple[Path, str]]:
    """--gpu name -> (its ``<gpu>_<kind>`` data folder, catalog device id)."""
    return {gpu: (MEASURED / f"{gpu}_{kind}", hw) for gpu, hw in CATALOG_ID.items()}


def add_gpu_option(ap: argparse.ArgumentParser, default: str = "h100,h200") -> None:
    """``--gpu``: a comma-separated list of measured GPUs."""
    ap.add_argument("--gpu", default=default, help="measured GPUs: " + ", ".join(CATALOG_ID))


def chosen_gpus(ap: argparse.ArgumentParser, text: str) -> list[str]:
    """The GPUs ``text`` names; an unknown one is ``ap.error`` (exit 2, one line)."""
    gpus = [g for g in text.split(",") if g]
    unknown = sorted(set(gpus) - set(CATALOG_ID))
    if unknown or not gpus:
        ap.error(f"unknown --gpu {', '.join(unknown) or repr(text)}; choose from "
                 f"{', '.join(CATALOG_ID)}")
    return gpus
