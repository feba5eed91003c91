"""The runtime catalog: built-in execution profiles (``profiles/*.toml``) plus the user's.

User profiles live in ``$ROOFCAST_RUNTIME_DIR``, else ``$XDG_CONFIG_HOME/roofcast/runtimes``,
else ``~/.config/roofcast/runtimes`` (beside the user device folder). A user file with a problem
raises ``PredictionError`` naming the file when that runtime is asked for; a user profile may not
reuse a built-in name. ``default_runtime_name(kind)``: ``onnxruntime-cpu`` on CPUs,
``pytorch-eager`` on GPUs and accelerators.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.runtimes.profile import ExecutionProfile, profile_from_document

BUILTIN_DIR = Path(__file__).resolve().parent / "profiles"
ENV_VAR = "ROOFCAST_RUNTIME_DIR"
MAX_PROFILE_BYTES = 64 * 1024
MAX_PROFILES = 256
DEFAULTS: dict[str, str] = {"cpu": "onnxruntime-cpu", "gpu": "pytorch-eager",
                            "accelerator": "pytorch-eager"}


def user_dir() -> Path:
    """The user's runtime folder (may not exist), beside the user device folder."""
    from roofcast.hw_catalog.catalog import config_folder

    return config_folder(ENV_VAR, "runtimes")


def _read(path: Path, folder: Path) -> dict:
    from roofcast.hw_catalog.confined import read_confined

    text = read_confined(path, folder, max_bytes=MAX_PROFILE_BYTES, what="runtime profile",
                         error=PredictionError)
    try:
        return tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PredictionError(f"{path}: not a valid TOML runtime profile ({exc}); see "
                              f"{BUILTIN_DIR}/pytorch-eager.toml for the format") from exc


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    files = sorted(p for p in folder.iterdir() if p.suffix == ".toml")
    if len(files) > MAX_PROFILES:
        raise PredictionError(f"{folder}: more than {MAX_PROFILES} runtime profiles")
    return files


def _load(path: Path, folder: Path) -> ExecutionProfile:
    import roofcast.predictor.runtimes.ort_plan  # noqa: F401  (registers its patterns)
    from roofcast.predictor.runtimes.rules import known_patterns

    prof = profile_from_document(_read(path, folder), str(path), known_patterns=known_patterns())
    if prof.name != path.stem:
        raise PredictionError(f"{path}: file name must be '{prof.name}.toml' to match its name")
    return prof


def runtime_files() -> dict[str, tuple[Path, Path]]:
    """Runtime name -> (file, its folder), built-ins first; a user file reusing a built-in name
    is an error."""
    out: dict[str, tuple[Path, Path]] = {}
    for folder in (BUILTIN_DIR, user_dir()):
        for path in _files(folder):
            if path.stem in out:
                raise PredictionError(f"{path}: runtime {path.stem!r} is already defined by "
                                      f"{out[path.stem][0]}; give the user profile another name")
            out[path.stem] = (path, folder)
    return out


def runtime_names() -> tuple[str, ...]:
    """Every runtime name: built-in then user."""
    return tuple(runtime_files())


def get_runtime(name: str | ExecutionProfile) -> ExecutionProfile:
    """The profile called ``name`` (a profile object is returned as is)."""
    if isinstance(name, ExecutionProfile):
        return name
    files = runtime_files()
    if not isinstance(name, str) or name not in files:
        raise PredictionError(f"unknown runtime {name!r}; choose one of: {', '.join(files)}")
    return _load(*files[name])


def default_runtime_name(kind: str) -> str:
    """The runtime a device of ``kind`` gets when the run names none."""
    return DEFAULTS.get(kind, "pytorch-eager")


def resolve_runtime(name: str | ExecutionProfile | None, kind: str) -> ExecutionProfile:
    """The profile of a run on a device of ``kind``: ``name`` (None: the kind's default),
    refused when the runtime does not run on that kind."""
    prof = get_runtime(default_runtime_name(kind) if name is None else name)
    if not prof.runs_on(kind):
        raise PredictionError(
            f"runtime {prof.name!r} runs on {', '.join(prof.device_kinds)} devices, not {kind}; "
            f"for a {kind} choose one of: "
            f"{', '.join(n for n in runtime_names() if get_runtime(n).runs_on(kind))}")
    return prof
