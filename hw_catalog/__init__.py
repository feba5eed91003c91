"""Hardware catalog: device specs as data, hypothetical devices, local calibration.

Public API::

    from roofcast.hw_catalog import get_device, list_devices, resolve_name, derive, HardwareSpec
    h100 = get_device("h100-sxm")                      # id, name or alias
    fast = get_device("h100-sxm:mem_bw_GBps=6700")     # inline what-if
    fast = derive(h100, mem_bw_scale=2.0)              # same from Python
    h100.peak("matrix", "bf16").flops_per_s            # FLOP/s, with documented fallbacks
    get_system("hgx-h100:nodes=4").n_devices           # systems: 32
"""

from roofcast.hw_catalog.catalog import (
    BUILTIN_DIR,
    Catalog,
    get_device,
    list_devices,
    load_catalog,
    resolve_name,
    user_dir,
)
from roofcast.hw_catalog.derive import derive, parse_inline
from roofcast.hw_catalog.errors import DeviceFileWarning, HardwareSpecError
from roofcast.hw_catalog.spec import HardwareSpec, PeakLookup
from roofcast.hw_catalog.system import FabricSpec, NicSpec, SystemSpec
from roofcast.hw_catalog.systems import get_system, list_systems, system_ids

__all__ = [
    "BUILTIN_DIR",
    "Catalog",
    "DeviceFileWarning",
    "FabricSpec",
    "HardwareSpec",
    "HardwareSpecError",
    "NicSpec",
    "PeakLookup",
    "SystemSpec",
    "derive",
    "get_device",
    "get_system",
    "list_devices",
    "list_systems",
    "load_catalog",
    "parse_inline",
    "resolve_name",
    "system_ids",
    "user_dir",
]
