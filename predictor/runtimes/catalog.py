"""The runtime catalog: built-in execution profiles (``profiles/*.toml``) plus the user's.

User profiles live in ``$ROOFCAST_RUNTIME_DIR``, else ``$XDG_CONFIG_HOME/roofcast/runtimes``,
else ``~/.config/roofcast/runtimes`` (beside the user device folder). A user file with a problem
raises ``PredictionError`` naming the file when that runtime is asked for; a user profile may not
reuse a built-in name. ``default_runtime_name(kind)`` and ``default_serving_engine(kind)``: the
runtime and the LLM serving engine a device of ``kind`` gets (``roofcast.defaults``);
``resolve_engine(name, hw)``: a serving engine for a device, refused (naming the engines that do
run there) when it is not one, or does not run on the device's kind or vendor.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from roofcast.defaults import ENGINE_BY_KIND, RUNTIME_BY_KIND, engine_for, runtime_for
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.runtimes.profile import ExecutionProfile, profile_from_document

BUILTIN_DIR = Path(__file__).resolve().parent / "profiles"
ENV_VAR = "ROOFCAST_RUNTIME_DIR"
MAX_PROFILE_BYTES = 64 * 1024
MAX_PROFILES = 256
#: device kind -> default runtime, and -> default serving engine (``roofcast.defaults``)
DEFAULTS: Mapping[str, str] = RUNTIME_BY_KIND
SERVING_DEFAULTS: Mapping[str, str] = ENGINE_BY_KIND


def user_dir() -> Path:
    """The user's runtime folder (may not exist), beside the user device folder."""
    from roofcast.hw_catalog.catalog import config_folder

    return config_folder(ENV_VAR, "runtimes")


def _read(path: Path, folder: Path) -> dict:
    from roofcast.hw_catalog.confined import read_confined
    from roofcast.hw_catalog.safe_load import load_toml

    text = read_confined(path, folder, max_bytes=MAX_PROFILE_BYTES, what="runtime profile",
                         error=PredictionError)
    return load_toml(text, f"{path}: not a valid TOML runtime profile (see "
                     f"{BUILTIN_DIR}/pytorch-eager.toml for the format)", error=PredictionError,
                     max_bytes=MAX_PROFILE_BYTES)


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
    return runtime_for(kind)


def default_serving_engine(kind: str) -> str:
    """The LLM serving engine a device of ``kind`` gets when the run names none."""
    return engine_for(kind)


def _runs_there(prof: ExecutionProfile, kind: str, vendor: str | None) -> bool:
    return prof.runs_on(kind) and (vendor is None or prof.runs_on_vendor(vendor))


def _refuse(prof: ExecutionProfile, kind: str, vendor: str | None, *, serving: bool) -> None:
    """Raise unless ``prof`` runs on a ``vendor`` device of ``kind``; the message names the
    runtimes (serving engines when ``serving``) that do."""
    if _runs_there(prof, kind, vendor):
        return
    where = f"{kind} by {vendor}" if vendor else kind
    if not prof.runs_on(kind):
        what = f"runs on {', '.join(prof.device_kinds)} devices, not {kind}"
    else:
        what = f"runs on {', '.join(prof.vendors)} devices only, not {vendor}"
    others = [n for n in runtime_names() if _runs_there(p := get_runtime(n), kind, vendor)
              and (not serving or p.serving is not None)]
    raise PredictionError(f"{'engine' if serving else 'runtime'} {prof.name!r} {what}; for a "
                          f"{where} choose one of: {', '.join(others) or '(none)'}")


def resolve_runtime(name: str | ExecutionProfile | None, kind: str,
                    vendor: str | None = None) -> ExecutionProfile:
    """The profile of a run on a device of ``kind`` (and ``vendor``, when known): ``name``
    (None: the kind's default), refused when the runtime does not run on that kind or vendor."""
    prof = get_runtime(default_runtime_name(kind) if name is None else name)
    _refuse(prof, kind, vendor, serving=False)
    return prof


def resolve_engine(name: str | ExecutionProfile | None, hw, *,
                   allow_plain: bool = False) -> ExecutionProfile:
    """The LLM serving engine of a run on device ``hw`` (a ``HardwareSpec``): ``name`` (None:
    ``default_serving_engine(hw.kind)``), refused when it does not run on the device's kind or
    vendor, or has no ``[serving]`` table — unless ``allow_plain``: a plain runtime
    (``pytorch-eager``: Hugging Face ``generate``) then serves with ``ServingSpec``'s defaults.
    The message names the engines that do run there."""
    prof = get_runtime(default_serving_engine(hw.kind) if name is None else name)
    if prof.serving is None and not allow_plain:
        engines = [n for n in runtime_names() if get_runtime(n).serving is not None
                   and _runs_there(get_runtime(n), hw.kind, hw.vendor)]
        raise PredictionError(f"runtime {prof.name!r} is not an LLM serving engine (no [serving] "
                              f"table); for {hw.id} choose one of: "
                              f"{', '.join(engines) or '(none)'}")
    _refuse(prof, hw.kind, hw.vendor, serving=True)
    return prof
