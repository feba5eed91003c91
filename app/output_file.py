"""Whole outputs as text and ``--output FILE``: ``render`` (tables and header scalars in a
``--format``, ``app.output.emit``), ``check_writable`` (before any work),
``write_atomically`` (the file is complete or untouched) and ``deliver`` (stdout or that
file). Used by ``llm``, ``plan`` and the multi-device ``predict`` / ``compare``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roofcast.app.output import emit


def render(tables: dict[str, Any], fmt: str, extra: dict[str, Any]) -> str:
    import io

    buf = io.StringIO()
    emit(tables, fmt, out=buf, extra={k: v for k, v in extra.items() if not k.startswith("_")})
    return buf.getvalue()


def check_writable(path: Path) -> None:
    """PredictionError unless ``path`` can be written: its folder exists, it is no folder."""
    from roofcast.predictor.errors import PredictionError

    if path.is_dir():
        raise PredictionError(f"--output {path} is a folder; give a file name")
    if not path.parent.is_dir():
        raise PredictionError(f"--output {path}: folder {path.parent} does not exist")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path``: a
    reader sees the old file or the whole new one, never a part."""
    import os
    import tempfile

    from roofcast.predictor.errors import PredictionError

    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise PredictionError(f"cannot write --output {path}: {exc.strerror or exc}") from None


def deliver(text: str, output: Path | None, command: str) -> None:
    """``text`` on stdout, or written atomically to ``output`` with "roofcast COMMAND: wrote
    FILE" on stderr."""
    import sys

    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, text)
        print(f"roofcast {command}: wrote {output}", file=sys.stderr)
