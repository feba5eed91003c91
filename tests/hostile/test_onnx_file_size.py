"""A model file is size-checked on its descriptor before it is read, and read once: a file
over the cap is refused without reading, one under it costs its size in memory once (not
twice), a zero-filled (sparse) file is refused from its first byte."""

from __future__ import annotations

import tracemalloc

import pytest

from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.load import load_model

MIB = 1 << 20


def sparse(path, size: int, head: bytes = b"") -> None:
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(size)


def peak_bytes_of(fn) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(ModelImportError) as info:
            fn()
        return tracemalloc.get_traced_memory()[1], str(info.value)
    finally:
        tracemalloc.stop()


def test_a_file_over_the_cap_is_refused_without_reading(tmp_path):
    path = tmp_path / "big.onnx"
    sparse(path, 2**40, b"\x08")  # 1 TiB, sparse
    peak, message = peak_bytes_of(lambda: load_model(path))
    assert "over the limit" in message
    assert peak < MIB


def test_a_file_under_the_cap_is_held_once(tmp_path):
    path = tmp_path / "under.onnx"
    sparse(path, 32 * MIB, b"\x08\x07")  # ir_version 7, then zeros: not a valid model
    peak, message = peak_bytes_of(lambda: load_model(path, max_bytes=33 * MIB))
    assert "not a readable ONNX model" in message
    assert peak < 1.5 * 32 * MIB


def test_a_zero_filled_file_is_refused_from_its_first_byte(tmp_path):
    path = tmp_path / "zeros.onnx"
    sparse(path, 64 * MIB)
    peak, message = peak_bytes_of(lambda: load_model(path))
    assert "starts with a zero byte" in message
    assert peak < MIB
