"""The raw bytes of a model source (a path, bytes-like, or a binary file object), read safely.

A path: its type and size are checked on the open descriptor before anything is read (a
folder, FIFO, device or socket is refused; a FIFO is never opened for reading), then it is read
once into a buffer of exactly that size. Anything over ``max_bytes`` or empty raises
:class:`ModelImportError`. Kept apart from ``load`` (which parses with onnx) so that reading
and hashing a model (``graph_cache``) imports no onnx.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from roofcast.graph_import.errors import ModelImportError

DEFAULT_MAX_BYTES = 2**31 - 1  # protobuf's own hard limit for one message


def read_source(source: Any, max_bytes: int) -> bytes | bytearray:
    """The raw bytes of ``source``, refusing more than ``max_bytes`` (a path: before reading
    it)."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    elif isinstance(source, str | os.PathLike):
        data = _read_path(Path(source), max_bytes)
    elif hasattr(source, "read"):
        data = _read_capped(source, max_bytes)
        if not isinstance(data, bytes | bytearray):
            raise ModelImportError(
                "the file object returned text, not bytes: open the model in binary mode ('rb')"
            )
        data = bytes(data)
    else:
        raise ModelImportError(
            f"cannot read a model from a {type(source).__name__}: give a file path or bytes"
        )
    if len(data) > max_bytes:
        raise ModelImportError(_too_big(len(data), max_bytes))
    if not data:
        raise ModelImportError(
            "the model is empty (0 bytes): give a non-empty .onnx file"
        )
    return data


def _read_path(path: Path, max_bytes: int) -> bytearray:
    """The bytes of the file ``path``: type and size checked on the open descriptor (``fstat``)
    before anything is read, then read once into a buffer of exactly that size (a file at the
    cap costs its size in memory once, not twice); a FIFO or device is refused unopened for
    reading (``O_NONBLOCK``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ModelImportError(f"no such file: {str(path)!r}; check the path") from None
    except OSError as exc:
        raise ModelImportError(f"cannot access {str(path)!r}: {exc.strerror}") from None
    try:
        size = _checked_size(path, os.fstat(fd), max_bytes)
        if size and os.pread(fd, 1, 0) == b"\0":  # a protobuf field tag is never 0
            raise ModelImportError(f"{str(path)!r} is not an ONNX model (it starts with a zero "
                                   "byte, as a sparse or zero-filled file does)")
        return _read_exactly(path, fd, size)
    except OSError as exc:
        raise ModelImportError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    finally:
        os.close(fd)


def _checked_size(path: Path, st: os.stat_result, max_bytes: int) -> int:
    if stat.S_ISDIR(st.st_mode):
        raise ModelImportError(f"{str(path)!r} is a folder: give the .onnx file inside it")
    if not stat.S_ISREG(st.st_mode):
        raise ModelImportError(
            f"{str(path)!r} is not a regular file (a device, pipe or socket): give an .onnx file"
        )
    if st.st_size > max_bytes:
        raise ModelImportError(_too_big(st.st_size, max_bytes))
    return st.st_size


def _read_exactly(path: Path, fd: int, size: int) -> bytearray:
    """``size`` bytes of ``fd`` into one buffer; a file that changed size meanwhile is refused."""
    buf = bytearray(size)
    view, done = memoryview(buf), 0
    while done < size:
        n = os.readv(fd, [view[done:]])
        if not n:
            break
        done += n
    if done != size or os.read(fd, 1):
        raise ModelImportError(f"{str(path)!r} changed size while being read; read it again "
                               "once it is written")
    return buf


_READ_CHUNK_BYTES = 1 << 20


def _read_capped(fh: Any, max_bytes: int) -> bytes | str:
    """At most ``max_bytes + 1`` bytes of ``fh``, read in chunks: ``read(max_bytes + 1)`` would
    allocate a 2 GB buffer up front whatever the file's size."""
    chunks: list[Any] = []
    size = 0
    while size <= max_bytes:
        chunk = fh.read(min(_READ_CHUNK_BYTES, max_bytes + 1 - size))
        if not chunk:
            break
        if not isinstance(chunk, bytes | bytearray):
            return chunk  # text mode: the caller refuses it
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _too_big(n_bytes: int, max_bytes: int) -> str:
    return (
        f"the model is {n_bytes} bytes, over the limit of {max_bytes} bytes: give a weightless "
        "export (weights as external data, which roofcast never reads) or raise max_bytes"
    )
