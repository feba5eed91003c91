"""Whole outputs as text and ``--output FILE``: ``render`` (tables and header scalars in a
``--format``, ``app.output.emit``), ``check_writable`` (before any work),
``write_file`` / ``write_atomically`` (the file is complete or untouched; links, FIFOs and
folders refused) and ``deliver`` (stdout or that file). Used by ``llm``, ``plan``, ``measure``
and the multi-device ``predict`` / ``compare``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from roofcast.app.output import emit


def render(tables: dict[str, Any], fmt: str, extra: dict[str, Any]) -> str:
    import io

    buf = io.StringIO()
    emit(tables, fmt, out=buf, extra={k: v for k, v in extra.items() if not k.startswith("_")})
    return buf.getvalue()


def check_writable(path: Path) -> None:
    """PredictionError unless ``path`` can be written: absent or a regular file (never a
    symbolic link, FIFO, device or folder: ``hw_catalog.confined.write_target``, the policy of
    every ``--output`` file), in a folder that exists."""
    from roofcast.hw_catalog.confined import write_target
    from roofcast.predictor.errors import PredictionError

    write_target(path, what="--output file", error=PredictionError)
    if not path.parent.is_dir():
        raise PredictionError(f"--output {path}: folder {path.parent} does not exist")


def write_file(path: Path, write: Callable[[str], None]) -> None:
    """``write(tmp)`` a temporary file beside ``path``, then rename it over ``path`` (checked
    by ``check_writable`` before and again just before the rename, so a link put there
    meanwhile is refused, not replaced): a reader sees the old file or the whole new one."""
    import contextlib
    import os
    import tempfile

    from roofcast.predictor.errors import PredictionError

    check_writable(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain open() would create it
        write(tmp)
        check_writable(path)
        os.replace(tmp, path)
    except OSError as exc:
        raise PredictionError(f"cannot write --output {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def write_atomically(path: Path, text: str) -> None:
    """``text`` written to ``path`` by ``write_file``."""
    write_file(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def deliver(text: str, output: Path | None, command: str) -> None:
    """``text`` on stdout, or written atomically to ``output`` with "roofcast COMMAND: wrote
    FILE" on stderr."""
    import sys

    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, text)
        print(f"roofcast {command}: wrote {output}", file=sys.stderr)
