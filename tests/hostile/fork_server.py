"""Fork server of ``tests/hostile/helpers.py``: imports the libraries and roofcast modules the
CLI uses (imports only: no cache is filled, nothing of the environment read), then for each JSON
request on stdin forks a child that runs ``python -m roofcast.app.cli ARGV`` (or
``python PATH`` for ``--script PATH``) in a new session under ``RLIMIT_AS``, with the given
folder, environment and stdout/stderr files, and kills its process group at the time limit.
Replies one JSON line: exit code (negative: killed by that signal), peak RSS (KiB), hung,
seconds."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pkgutil
import resource
import signal
import sys
import time

PRELOAD = ("numpy", "pandas", "pyarrow", "pyarrow.compute", "networkx", "onnx", "onnx.numpy_helper",
           "ml_dtypes", "cloudpickle", "dateutil", "google.protobuf", "xgboost", "roofcast.api",
           "roofcast.app.cli")
WRITE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


def _child(request: dict) -> None:
    """In the forked child: become ``python -m roofcast.app.cli ARGV`` and never return."""
    code = 1
    try:
        os.setsid()
        limit = request["mem_bytes"]
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGINT, signal.default_int_handler)
        fds = (os.open(os.devnull, os.O_RDONLY), os.open(request["out"], WRITE, 0o644),
               os.open(request["err"], WRITE, 0o644))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        encoding = sys.stdout.encoding  # the locale's, as a new interpreter would pick
        sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding=encoding, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace",  # noqa: SIM115
                          buffering=1, closefd=False)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import tempfile
        tempfile.tempdir = None  # TMPDIR is read again on first use
        sys.path[0] = request["cwd"]  # what -m puts first
        code = _run(request["argv"])
    except BaseException:  # the set-up itself failed: say why, where stderr now points
        import traceback
        traceback.print_exc()
    finally:
        os._exit(code)


def _run(argv: list[str]) -> int:
    """Run the CLI module as ``__main__`` (or, for ``["--script", PATH]``, the Python file PATH
    as ``python PATH`` would); the exit code as the interpreter would make it."""
    import atexit
    import runpy
    import traceback
    sys.modules.pop("roofcast.app.cli", None)  # run afresh as __main__, as -m does
    try:
        if argv[:1] == ["--script"]:
            sys.argv = argv[1:]
            sys.path[0] = os.path.dirname(os.path.abspath(argv[1]))
            runpy.run_path(argv[1], run_name="__main__")
        else:
            sys.argv = ["roofcast.app.cli", *argv]
            runpy.run_module("roofcast.app.cli", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # the interpreter prints any other escape and exits 1
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream: ignored, as ever
            stream.flush()
    return code


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _serve(request: dict) -> dict:
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        _child(request)
    status, usage, hung = None, None, False
    while status is None:
        done, st, ru = os.wait4(pid, os.WNOHANG)
        if done:
            status, usage = st, ru
        elif time.perf_counter() - start > request["timeout_s"]:
            hung = True
            os.killpg(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
        else:
            time.sleep(0.01)
    return {"rc": os.waitstatus_to_exitcode(status), "maxrss_kib": usage.ru_maxrss,
            "hung": hung, "seconds": time.perf_counter() - start}


def main() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # optional: the child imports what it needs
            importlib.import_module(name)
    commands = importlib.import_module("roofcast.app.commands")
    for module in pkgutil.iter_modules(commands.__path__):
        importlib.import_module(f"roofcast.app.commands.{module.name}")
    for line in sys.stdin:
        reply = _serve(json.loads(line))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
