"""Which table device anchors a device the engine tables do not hold.

A device without tables borrows those of its *sibling*: a table device of the same vendor and
kind whose architecture is the same (``FAMILY`` folds a refresh into its generation: Blackwell
Ultra runs Blackwell's kernels), the nearest in ``log`` memory bandwidth, 16-bit matrix peak
and units when several are. A what-if device (``hw_catalog.derive``) is anchored through its
root. The road then scales the sibling's table time by the kernel model's device ratio
(``estimator``). Measured: held-out H100/H200/B200/GB200 rows read this way are 4.3 % off
at the median, the learned model alone 20.9 % (``benchmarks/engine_tables_sibling.py``).
"""

from __future__ import annotations

import math
from collections.abc import Collection

from roofcast.hw_catalog.derive import what_if_root
from roofcast.hw_catalog.spec import HardwareSpec

#: architecture -> the generation whose kernels it runs (a refresh of the same SMs).
FAMILY: dict[str, str] = {"Blackwell Ultra": "Blackwell"}


def _family(hw: HardwareSpec) -> tuple[str, str, str]:
    return hw.vendor, hw.kind, FAMILY.get(hw.architecture, hw.architecture)


def _distance(a: HardwareSpec, b: HardwareSpec) -> float:
    def figures(hw: HardwareSpec) -> tuple[float, ...]:
        peak = hw.peak_flops_or_none("matrix", "bf16") or hw.peak_flops_or_none("matrix", "fp16")
        return hw.mem_bw_Bps, peak or 1.0, float(hw.units)
    return math.dist([math.log(x) for x in figures(a)], [math.log(x) for x in figures(b)])


def anchor_of(device: str, known: Collection[str]) -> HardwareSpec | None:
    """The table device (id in ``known``) that anchors ``device`` (module docstring), else
    None (``device`` itself has tables, or nothing of its kind does)."""
    from roofcast.hw_catalog import get_device
    from roofcast.hw_catalog.errors import HardwareSpecError

    if device in known:
        return None
    found = what_if_root(device)
    try:
        base = found[1] if found is not None else get_device(device)
    except HardwareSpecError:
        return None
    if base.id in known:
        return base
    peers = []
    for other in known:
        try:
            spec = get_device(other)
        except HardwareSpecError:
            continue
        if _family(spec) == _family(base):
            peers.append(spec)
    return min(peers, key=lambda p: (_distance(p, base), p.id)) if peers else None
