"""Run a call on an uploaded model in a child process with a memory and a time limit.

:func:`run_limited` runs the call in a fresh interpreter (``python -m roofcast.app.worker``)
that sets ``RLIMIT_AS`` before importing anything heavy, so one hostile upload costs a child
process, not the shared server. Limits, read on each call: ``ROOFCAST_APP_WORKER_MEMORY_MB``
(address space, default 2048 MB) and ``ROOFCAST_APP_WORKER_TIMEOUT_S`` (wall time, default
60 s). Arguments and results cross as pickles of our own types (the user's file is parsed with
ONNX, never unpickled). A ``USER_ERRORS`` error is raised again in the parent as the same type;
a limit reached raises ``ModelImportError`` naming it and its variable; anything else raises
``RuntimeError`` with the child's traceback. Design: docs/design/app.md.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import traceback
from collections.abc import Callable
from typing import Any

MEMORY_ENV = "ROOFCAST_APP_WORKER_MEMORY_MB"
TIMEOUT_ENV = "ROOFCAST_APP_WORKER_TIMEOUT_S"
DEFAULT_MEMORY_MB = 2048
DEFAULT_TIMEOUT_S = 60.0


def limits() -> tuple[int, float]:
    """(memory MB, timeout s) from the environment (module docstring); raises
    ``ModelImportError`` on a value that is not a positive number."""
    from roofcast.graph_import.errors import ModelImportError

    def read(name: str, default: float) -> float:
        text = os.environ.get(name, "").strip()
        if not text:
            return default
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not value > 0 or value == float("inf"):
            raise ModelImportError(f"${name}={text!r} is not a positive number")
        return value

    return int(read(MEMORY_ENV, DEFAULT_MEMORY_MB)), read(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


def run_limited(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` in a fresh child process under :func:`limits` (module docstring).
    ``func`` must be a module-level function (the child imports it by name)."""
    from roofcast.graph_import.errors import ModelImportError

    memory_mb, timeout_s = limits()
    # `python -m roofcast.app.worker`, not multiprocessing: its spawn would run the server's
    # __main__ again in the child, which inside Streamlit is the app script itself
    child = subprocess.Popen([sys.executable, "-m", "roofcast.app.worker", str(memory_mb)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    try:
        out, _ = child.communicate(pickle.dumps((func, args)), timeout=timeout_s)
        kind, value = pickle.loads(out) if out else ("killed", None)  # our own child's answer
    except subprocess.TimeoutExpired:
        kind, value = "timeout", None
    except (pickle.UnpicklingError, EOFError, ValueError):
        kind, value = "killed", None
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    if kind == "ok":
        return value
    if kind == "user":
        error_type, message = value
        raise error_type(message)
    if kind == "error":
        raise RuntimeError(f"the model worker failed:\n{value}")
    what = {"timeout": f"did not finish within {timeout_s:g} s",
            "memory": f"needed more than {memory_mb} MB of memory",
            "killed": f"stopped the worker process (exit code {child.returncode}; the memory "
                      f"limit is {memory_mb} MB)"}[kind]
    raise ModelImportError(
        f"the uploaded model {what} and was given up; the server is unaffected. If the model is "
        f"genuine, start the app with a larger ${MEMORY_ENV} / ${TIMEOUT_ENV}, or use "
        "`roofcast predict FILE` on the command line")


def _child(memory_mb: int) -> None:
    """The child's body: limit the address space, read ``(func, args)`` from stdin, write
    ``(kind, value)`` to stdout (pickled; anything the call prints goes to stderr)."""
    import resource

    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    # few threads, few malloc arenas: each reserves address space the limit counts
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    _limit_malloc_arenas()
    limit = memory_mb * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        func, args = pickle.loads(sys.stdin.buffer.read())  # from the parent, never a user file
        outcome: tuple[str, Any] = ("ok", func(*args))
    except MemoryError:
        outcome = ("memory", None)
    except Exception as exc:
        from roofcast.app.cli import user_errors

        outcome = (("user", (type(exc), str(exc))) if isinstance(exc, user_errors())
                   else ("error", traceback.format_exc()))
    try:
        data = pickle.dumps(outcome)
    except MemoryError:
        data = pickle.dumps(("memory", None))
    except Exception:  # an unpicklable result or error
        data = pickle.dumps(("error", traceback.format_exc()))
    answer.write(data)
    answer.close()


def _limit_malloc_arenas() -> None:
    """glibc: at most 2 malloc arenas (``M_ARENA_MAX``); elsewhere nothing."""
    import ctypes
    import ctypes.util

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt(-8, 2)


# ----------------------------------------------------------------------------- the app's calls
def import_upload(data: bytes, dims: dict[str, int], name: str, max_bytes: int):
    """``graph_import.import_model`` of uploaded bytes (run in the worker). Protobuf reports a
    parse that ran out of memory as a malformed file: when the child cannot allocate twice the
    file's size either, the failure is the memory limit's (a ``MemoryError``), not the file's."""
    from roofcast.graph_import import import_model
    from roofcast.graph_import.errors import ModelImportError

    try:
        return import_model(data, dims=dims, name=name, max_bytes=max_bytes)
    except ModelImportError as exc:
        if "protobuf parse failed" in str(exc) and not _can_allocate(2 * len(data)):
            raise MemoryError("the ONNX parse ran out of the worker's memory") from exc
        raise


def _can_allocate(n_bytes: int) -> bool:
    try:
        bytearray(n_bytes)
    except MemoryError:
        return False
    return True


def predict_upload(graph: Any, device: str, changes: tuple[tuple[str, float], ...],
                   config: Any, estimator: str):
    """``predictor.simulate.predict_graph`` of an uploaded model's graph on catalog ``device``
    (a what-if device with ``changes``) (run in the worker)."""
    from roofcast.predictor.simulate import predict_graph

    return predict_graph(graph, _device(device, changes), config, estimator)


def advise_upload(data: bytes, dims: dict[str, int], name: str, max_bytes: int,
                  batch_dim: str | None, hw: Any, objective: str, settings: dict[str, Any]):
    """``predictor.advisor.advise`` of an uploaded model (run in the worker): the graph at each
    batch the search asks for is imported here, once per batch, under the worker's limits."""
    import functools

    from roofcast.graph_import import import_model
    from roofcast.predictor.advisor import advise

    @functools.cache
    def loader(b: int):
        full = dict(dims) if batch_dim is None else {**dims, batch_dim: b}
        return import_model(data, dims=full, name=name, max_bytes=max_bytes)

    return advise(loader, hw, objective, **settings)


def compare_upload(graph: Any, devices: list[str], config: Any, estimator: str, baseline: str):
    """``predictor.compare.compare_devices`` of an uploaded model's graph (run in the worker)."""
    from roofcast.predictor.compare import compare_devices

    return compare_devices(lambda _batch: graph, devices, config, estimator, baseline=baseline)


def _device(device: str, changes: tuple[tuple[str, float], ...]):
    from roofcast.hw_catalog import derive, get_device

    base = get_device(device)
    return derive(base, **dict(changes)) if changes else base


if __name__ == "__main__":
    _child(int(sys.argv[1]))
