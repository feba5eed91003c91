"""Hostile user device folders and what-if values: a clean error or a warning, never a hang,
a traceback, an outside file read, a NaN/inf device, or a lost user file.

Each case of ``CASES`` writes one bad entry (or a few) into a user device folder next to a good
device file. Before ``hw_catalog.device_files``, a FIFO there hung every command, a binary file or
a broken symlink was a traceback, a link to ``/etc/passwd`` was parsed, and any bad file broke
every command; now the bad file is skipped with a ``DeviceFileWarning`` naming it and the good
one still loads. What-if values (``--hw "h100-sxm:peak_scale=1e-320"``, derived scales of 1e300)
used to give NaN/inf times with exit 0. Saving a what-if device whose name collided with another
device deleted the user's existing file.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from roofcast.hw_catalog import HardwareSpecError, get_device, load_catalog
from roofcast.hw_catalog.catalog import BUILTIN_DIR, MAX_BASE_DEPTH
from roofcast.hw_catalog.device_files import MAX_FILE_BYTES, MAX_WARNINGS
from roofcast.hw_catalog.errors import DeviceFileWarning
from roofcast.hw_catalog.user_devices import save_user_device
from tests.hostile.helpers import deadline

GOOD = 'id = "good-dev"\nbase = "h100-sxm"\nmem_bw_scale = 2\n'


def _file(name: str, content: str | bytes) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = folder / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return apply


def _link(name: str, target: Callable[[Path], Path | str]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        os.symlink(target(folder), folder / name)
    return apply


def _outside_device(folder: Path) -> Path:
    other = folder.parent / "elsewhere"
    other.mkdir(exist_ok=True)
    (other / "linked.toml").write_text('id = "linked"\nbase = "h100-sxm"\npeak_scale = 2\n')
    return other / "linked.toml"


def _sparse(name: str, size: int) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        with (folder / name).open("wb") as fh:
            fh.truncate(size)
    return apply


def _derived(dev_id: str, body: str) -> Callable[[Path], None]:
    return _file(f"{dev_id}.toml", f'id = "{dev_id}"\n{body}')


def _chain(n: int, factor: float) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        prev = "h100-sxm"
        for i in range(1, n + 1):
            _derived(f"c{i:04d}", f'base = "{prev}"\nmem_bw_scale = {factor}\n')(folder)
            prev = f"c{i:04d}"
    return apply


def _all(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        for step in steps:
            step(folder)
    return apply


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    # --- what kind of file
    "FIFO": (lambda f: os.mkfifo(f / "fifo.toml"), r"fifo.toml: not a regular file \(a FIFO\)"),
    "folder named x.toml": (lambda f: (f / "dir.toml").mkdir(), r"not a regular file \(a folder\)"),
    "broken symlink": (_link("dead.toml", lambda f: f / "nowhere.toml"), r"broken symbolic link"),
    "symlink to /etc/passwd": (_link("pw.toml", lambda f: "/etc/passwd"),
                               r"symbolic link to /etc/passwd, outside the folder"),
    "symlink to /dev/zero": (_link("zero.toml", lambda f: "/dev/zero"), r"outside the folder"),
    "symlink to /proc/self/environ": (_link("env.toml", lambda f: "/proc/self/environ"),
                                      r"outside the folder"),
    "symlink to a device file elsewhere": (_link("linked.toml", _outside_device),
                                           r"outside the folder"),
    "symlink loop": (lambda f: (os.symlink(f / "l2.toml", f / "l1.toml"),
                                os.symlink(f / "l1.toml", f / "l2.toml")),
                     r"broken symbolic link"),
    "1 MiB file": (_sparse("huge.toml", 4 * MAX_FILE_BYTES), r"huge.toml: \d+ bytes is more than "
                                                             r"a device file may have"),
    # --- what is in it
    "binary": (_file("bin.toml", bytes(range(256)) * 8), r"bin.toml: not UTF-8 text"),
    "latin-1 text": (_file("latin.toml", 'id = "latin"\nname = "caf\xe9"\n'.encode("latin-1")),
                     r"not UTF-8 text"),
    "NUL bytes": (_file("nul.toml", 'id = "nul"\x00\n'), r"TOML syntax error"),
    "syntax error": (_file("syntax.toml", "id = 'syntax'\nname = \n"), r"TOML syntax error"),
    "dotted key 100000 parts": (_file("dots.toml", ".".join(["a"] * 100_000) + " = 1\n"),
                                r"dotted key with more than 32 parts"),
    "quoted dotted key": (_file("qdots.toml", ".".join(['"a"'] * 5_000) + " = 1\n"),
                          r"dotted key with more than 32 parts"),
    "inline-table dotted key": (_file("idots.toml", "x = {" + ".".join(["b"] * 5_000) + " = 1}\n"),
                                r"dotted key with more than 32 parts"),
    "arrays nested 100000 deep": (_file("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000),
                                  r"nested too deeply"),
    "5000-digit integer": (_derived("digits", 'base = "h100-sxm"\n[compute]\nunits = '
                                    + "9" * 5000 + "\n"), r"TOML value cannot be read"),
    "wrong types": (_file("types.toml", 'id = 5\nname = [1]\nkind = {a = 1}\n'),
                    r"key 'id' must be a string"),
    "table for a number": (_derived("tbl", 'base = "h100-sxm"\n[compute]\nunits = {a = 1}\n'),
                           r"key 'compute.units' must be an integer"),
    "file name differs from id": (_file("named.toml", 'id = "other"\nbase = "h100-sxm"\n'
                                                      'peak_scale = 2\n'),
                                  r"file name must be 'other.toml'"),
    # --- clashes with other devices
    "redefines a built-in id": (_derived("h100-sxm", 'base = "a100-80gb-sxm"\npeak_scale = 2\n'),
                                r"device id 'h100-sxm' is defined twice"),
    "alias of a built-in": (_derived("mine", 'base = "h100-sxm"\npeak_scale = 2\n'
                                     'aliases = ["NVIDIA A100-SXM4-80GB"]\n'), r"collides with"),
    # --- derivation
    "unknown base": (_derived("orphan", 'base = "h100-sxn"\npeak_scale = 2\n'),
                     r"base 'h100-sxn' is not a known device"),
    "base is itself": (_derived("selfish", 'base = "selfish"\npeak_scale = 2\n'),
                       r"base chain loops: selfish -> selfish"),
    "base loop": (_all(_derived("loop-a", 'base = "loop-b"\npeak_scale = 2\n'),
                       _derived("loop-b", 'base = "loop-a"\npeak_scale = 2\n')),
                  r"base chain loops"),
    "derived 300 deep": (_chain(300, 1.0), rf"derived from a derived device more than "
                                           rf"{MAX_BASE_DEPTH} times"),
    # --- what-if values
    "peak_scale = 1e300": (_derived("big", 'base = "h100-sxm"\npeak_scale = 1e300\n'),
                           r"scale 'peak_scale' = 1e\+300 is outside 0.001..1000"),
    "peak_scale = 1e-320": (_derived("tiny", 'base = "h100-sxm"\npeak_scale = 1e-320\n'),
                            r"scale 'peak_scale' = 1e-320 is outside"),
    "mem_bw_scale = nan": (_derived("nan", 'base = "h100-sxm"\nmem_bw_scale = nan\n'),
                           r"key 'mem_bw_scale' must be a number, got float nan"),
    "bandwidth = inf": (_derived("inf", 'base = "h100-sxm"\n[memory]\nbandwidth_GBps = inf\n'),
                        r"key 'memory.bandwidth_GBps' must be a number, got float inf"),
    "scale 1000 chained 4x": (_chain(4, 1000.0), r"after scaling is more than 1000x outside"),
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "devices"
    out.mkdir()
    (out / "good-dev.toml").write_text(GOOD)
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_bad_device_file_is_skipped_with_a_warning(folder: Path, case: str):
    make, match = CASES[case]
    make(folder)
    start = time.perf_counter()
    with deadline(30), pytest.warns(DeviceFileWarning) as caught:
        catalog = load_catalog(BUILTIN_DIR, folder)
    assert time.perf_counter() - start < 10
    messages = [str(w.message) for w in caught]
    assert any(re.search(match, m) for m in messages), messages
    assert all(m.startswith("skipped ") for m in messages)
    assert catalog.devices["good-dev"].mem_bw_Bps == pytest.approx(
        2 * catalog.devices["h100-sxm"].mem_bw_Bps)
    assert catalog.skipped
    assert catalog.files["h100-sxm"] == str(BUILTIN_DIR / "h100-sxm.toml")
    for message in messages:
        assert "root:" not in message
        assert "PATH=" not in message


def test_symlink_inside_the_folder_is_followed(folder: Path, tmp_path: Path):
    (folder / "real.toml.txt").write_text('id = "via-link"\nbase = "h100-sxm"\npeak_scale = 2\n')
    os.symlink("real.toml.txt", folder / "via-link.toml")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeviceFileWarning)
        catalog = load_catalog(BUILTIN_DIR, folder)
    assert catalog.devices["via-link"].base == "h100-sxm"
    assert not catalog.skipped


def _cli(args: list[str], folder: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROOFCAST_HW_DIR": str(folder)}
    return subprocess.run([sys.executable, "-m", "roofcast.app.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_lists_good_devices_despite_every_bad_file_at_once(folder: Path):
    for make, _ in CASES.values():
        with contextlib.suppress(FileExistsError):
            make(folder)
    with deadline(30), pytest.warns(DeviceFileWarning):
        n_skipped = len(load_catalog(BUILTIN_DIR, folder).skipped)
    proc = _cli(["hw", "list"], folder)
    assert proc.returncode == 0, proc.stderr
    assert "good-dev" in proc.stdout
    assert "Traceback" not in proc.stderr
    # one line per warning, in the CLI's own words (no Python file:line report, no source line)
    assert proc.stderr.count("roofcast hw: warning: skipped device file: ") == MAX_WARNINGS
    assert "DeviceFileWarning" not in proc.stderr
    assert all(line.startswith("roofcast hw: warning: ") for line in proc.stderr.splitlines())
    assert f"skipped {n_skipped - MAX_WARNINGS} more device files" in proc.stderr
    assert "root:" not in proc.stderr + proc.stdout


def test_cli_names_the_problem_of_a_skipped_device(folder: Path):
    CASES["peak_scale = 1e300"][0](folder)
    proc = _cli(["hw", "show", "big"], folder)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert re.search(r"error: device 'big' was not loaded: .*big.toml: scale 'peak_scale'",
                     proc.stderr)


@pytest.mark.parametrize("spec", ["h100-sxm:peak_scale=1e-320", "h100-sxm:peak_scale=1e300",
                                  "h100-sxm:mem_bw_scale=0", "h100-sxm:mem_bw_GBps=nan",
                                  "h100-sxm:units=1e400", "h100-sxm:launch_overhead_us=1e-320"])
def test_cli_refuses_insane_what_if_values_with_exit_2(folder: Path, spec: str):
    proc = _cli(["predict", "resnet50", "--hw", spec, "--format", "json"], folder)
    assert proc.returncode == 2, proc.stdout[:300]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("roofcast predict: error: ")
    assert proc.stderr.count("\n") == 1


# ---------------------------------------------------------------------------- saving
def _mine(folder: Path) -> tuple[Path, str]:
    path = save_user_device("h100-sxm", {"mem_bw_scale": 2.0}, "mine", name="My H100")
    assert path == folder / "mine.toml"
    return path, path.read_text()


@pytest.fixture
def user_folder(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(folder))
    return folder


def test_overwrite_with_a_colliding_name_keeps_the_users_file(user_folder: Path):
    path, before = _mine(user_folder)
    with pytest.raises(HardwareSpecError, match=r"name 'NVIDIA A100-SXM4-80GB' is already used "
                                                r"by device 'a100-80gb-sxm'"):
        save_user_device("h100-sxm", {"mem_bw_scale": 3.0}, "mine",
                         name="NVIDIA A100-SXM4-80GB", overwrite=True)
    assert path.read_text() == before
    assert get_device("mine").name == "My H100"
    assert sorted(p.name for p in user_folder.iterdir()) == ["good-dev.toml", "mine.toml"]


def test_new_id_with_a_colliding_name_writes_nothing(user_folder: Path):
    with pytest.raises(HardwareSpecError, match=r"already used by device 'good-dev'"):
        save_user_device("h100-sxm", {"mem_bw_scale": 3.0}, "other", name="GOOD_DEV")
    assert sorted(p.name for p in user_folder.iterdir()) == ["good-dev.toml"]


def test_a_skipped_user_file_is_not_overwritten(user_folder: Path):
    bad = user_folder / "draft.toml"
    bad.write_text('id = "draft"\nbase = "h100-sxm"\nmem_bw_scale = 1e300\n')
    with pytest.warns(DeviceFileWarning), pytest.raises(
            HardwareSpecError, match=r"draft.toml already exists but does not load"):
        save_user_device("h100-sxm", {"mem_bw_scale": 3.0}, "draft", overwrite=True)
    assert "1e300" in bad.read_text()


def test_overwrite_that_breaks_a_derived_device_is_rolled_back(user_folder: Path):
    path, before = _mine(user_folder)
    (user_folder / "child.toml").write_text('id = "child"\nbase = "mine"\nmem_bw_scale = 900\n')
    assert get_device("child")
    # mine at 900x would put child at 2 * 900 * 900 x h100 bandwidth: beyond the headroom
    with pytest.warns(DeviceFileWarning), pytest.raises(
            HardwareSpecError, match=r"would leave device files unusable.*child.toml"):
        save_user_device("h100-sxm", {"mem_bw_scale": 900.0}, "mine", overwrite=True)
    assert path.read_text() == before
    assert not [p for p in user_folder.iterdir() if p.name.startswith(".")]
    assert get_device("child").mem_bw_Bps == pytest.approx(
        1800 * get_device("h100-sxm").mem_bw_Bps)
