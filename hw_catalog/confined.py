"""Files read from a folder without trusting them: regular files inside the folder, size-capped.

:func:`confined_file` checks an entry of a folder (device files, learned model folders): a link
is followed only to a file directly inside the same folder; the entry must be a regular file
(no FIFO, device or folder) of at most ``max_bytes``. :func:`read_confined` opens it with
``O_NONBLOCK | O_NOFOLLOW`` and checks type and size again on the descriptor (no swap between
check and read). :func:`confined_path` checks a path a user names (a spec's model) without
opening anything: relative, no control characters, links resolved before the check, inside the
folder. :func:`read_capped` reads a file the user gave (type and size checked on the
descriptor); :func:`write_target` refuses an output path that is a link, FIFO, device or folder.
Every problem raises the caller's error type, naming the file, what is wrong and what to do.
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
    return _read_checked(path, target, os.O_NOFOLLOW, max_bytes, what, what, error)


def _control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 or 0x80 <= ord(c) < 0xA0 for c in text)


def confined_path(text: str, folder: Path, *, what: str, error: type[Exception],
                  allow_dir: bool = False) -> Path:
    """The resolved path that ``text`` (relative to ``folder``) names, if it stays inside
    ``folder`` once links are resolved and is a regular file (a folder with ``allow_dir``);
    nothing is opened (module docstring)."""
    if not isinstance(text, str) or not text or _control(text):
        raise error(f"{text!r}: not a plain relative path (empty or with control characters)")
    if Path(text).is_absolute() or text.startswith("~"):
        raise error(f"{text!r} is an absolute path; write the {what} path relative to {folder}")
    home = folder.resolve()
    try:
        target = (home / text).resolve()
    except (OSError, RuntimeError, ValueError):  # a link loop
        raise error(f"{text!r}: a looping symbolic link, not a {what}") from None
    if not target.is_relative_to(home):
        raise error(f"{text!r} leads outside the folder {home} (links resolved); put the {what} "
                    "inside it")
    try:
        st = os.stat(target)
    except OSError as exc:
        raise error(f"{text!r}: no {what} there ({exc.strerror})") from None
    if not (stat.S_ISREG(st.st_mode) or (allow_dir and stat.S_ISDIR(st.st_mode))):
        raise error(f"{text!r} is {_kind(st.st_mode)}; a {what} must be a plain file")
    return target


def read_capped(path: Path, *, max_bytes: int, what: str, error: type[Exception]) -> bytes:
    """The bytes of the regular file ``path`` (a user's own argument: links followed), at most
    ``max_bytes``; a FIFO, device or folder is refused without blocking."""
    return _read_checked(path, path, 0, max_bytes, what, f"the {what}", error)


def _read_checked(path, target, flags: int, max_bytes: int, what: str, named: str,
                  error) -> bytes:
    """At most ``max_bytes`` of ``target`` opened non-blocking (``| flags``), type and size
    checked on the descriptor; errors name ``path`` and say "cannot read {named}"."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | flags)
    except OSError as exc:
        raise error(f"{path}: cannot read {named}: {exc.strerror}") from None
    try:
        _check_stat(path, os.fstat(fd), max_bytes, what, error)
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read {named}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise error(f"{path}: grew beyond {max_bytes} bytes while being read")
    return data


def write_target(path: Path, *, what: str, error: type[Exception]) -> Path:
    """``path`` if a file may be written there (replaced atomically): absent or a regular
    file, never a symbolic link (not followed), FIFO, device or folder."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise error(f"{path}: cannot write the {what}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise error(f"{path} is a symbolic link; roofcast does not write through links: give "
                    f"the {what} a plain path")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{path} is {_kind(st.st_mode)}; give a file name for the {what}")
    return path
