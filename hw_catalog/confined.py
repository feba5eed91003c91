"""Files read from a folder without trusting them: regular files inside the folder, size-capped.

Used for device files (``device_files``) and learned model folders
(``predictor.learned.metadata_schema``). :func:`confined_file` checks an entry of ``folder``:

- a symlink is followed only when its target lies **directly inside the same folder** (a broken
  link, or a link to ``/etc/passwd``, ``/proc/self/environ`` or another folder's file, is refused);
- the file must be a **regular file** (a FIFO would block the reader forever, ``/dev/zero`` never
  ends, a folder cannot be read) of at most ``max_bytes``.

:func:`read_confined` then opens it with ``O_NONBLOCK | O_NOFOLLOW`` and checks type and size again
on the open descriptor, so a FIFO or a link swapped in between the check and the read cannot
hang or redirect it, and reads at most ``max_bytes``. Every problem raises the caller's error type
with a message naming the file, what is wrong, and what to do.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a plain file"


def _check_stat(path: Path, st: os.stat_result, max_bytes: int, what: str,
                error: type[Exception]) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{path}: not a regular file ({_kind(st.st_mode)}); a {what} must be a "
                    "plain file")
    if st.st_size > max_bytes:
        raise error(f"{path}: {st.st_size} bytes is more than a {what} may have "
                    f"({max_bytes} bytes); is it really a {what}?")


def confined_file(path: Path, folder: Path, *, max_bytes: int, what: str,
                  error: type[Exception]) -> Path:
    """The path to open for the entry ``path`` of ``folder``: itself, or the target of a link
    that stays inside ``folder``; raises ``error`` unless that is a regular file of at most
    ``max_bytes`` (module docstring)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    target = path
    if stat.S_ISLNK(st.st_mode):
        try:
            target = path.resolve(strict=True)
            st = os.stat(target)
        except (OSError, RuntimeError):
            raise error(f"{path}: broken symbolic link ({os.readlink(path)!r} does not exist); "
                        f"remove it or replace it by the {what}") from None
        home = folder.resolve()
        if target.parent != home:
            raise error(f"{path}: symbolic link to {target}, outside the folder {home}; a "
                        f"{what} is read only from its folder: copy the file into it instead of "
                        "linking")
    _check_stat(path, st, max_bytes, what, error)
    return target


def read_confined(path: Path, folder: Path, *, max_bytes: int, what: str,
                  error: type[Exception]) -> bytes:
    """The bytes of the entry ``path`` of ``folder`` (module docstring)."""
    target = confined_file(path, folder, max_bytes=max_bytes, what=what, error=error)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    try:
        _check_stat(path, os.fstat(fd), max_bytes, what, error)
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise error(f"{path}: grew beyond {max_bytes} bytes while being read")
    return data
