"""engine_tables.anchor: a device without tables borrows a same-architecture table device's."""

from __future__ import annotations

import pytest

from roofcast.hw_catalog import derive, get_device
from roofcast.predictor.engine_tables.anchor import anchor_of

KNOWN = ("a100-80gb-sxm", "b200", "gb200", "h100-sxm", "h200", "l40s")


@pytest.mark.parametrize(("device", "anchor"), [
    ("b300", "b200"),           # Blackwell Ultra runs Blackwell's kernels
    ("gb300", "gb200"),         # the nearest of the two Blackwells by bandwidth, peak, SMs
    ("h100-pcie", "h100-sxm"),
    ("l4", "l40s"),
    ("a100-40gb-sxm", "a100-80gb-sxm"),
    ("rtx-pro-6000-blackwell", None),  # GB202, another die: no sibling
    ("mi355x", None),           # no AMD tables
    ("h100-sxm", None),         # its own tables
])
def test_siblings_share_vendor_kind_and_architecture(device, anchor):
    got = anchor_of(device, KNOWN)
    assert (got.id if got is not None else None) == anchor


def test_a_what_if_device_is_anchored_through_its_root():
    fast = derive(get_device("b300"), mem_bw_GBps=12000)
    assert anchor_of(fast.id, KNOWN).id == "b200"
    assert anchor_of(derive(get_device("h200"), l2_MB=100).id, KNOWN).id == "h200"
    assert anchor_of("no-such-device", KNOWN) is None
