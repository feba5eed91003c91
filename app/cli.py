"""The ``roofcast`` command line: one subcommand per module in ``app.commands``.

A command module is written so that building the parser stays cheap (``roofcast --help`` in
well under 0.3 s): at module level it imports only the standard library, ``app.argtypes``,
``app.output`` and other light modules (no numpy, pandas, onnx, networkx, scikit-learn, xgboost,
streamlit, onnxruntime; ``tests/app/test_cli_imports.py`` checks this for every module listed in
``COMMAND_MODULES``). It exposes ``register(subparsers)``, which adds its parser and sets
``func(args) -> int``; the function imports what the command needs when it runs. A name that
must be one of a list kept in a heavy module is checked by ``type=argtypes.OneOf(loader, what)``
(``choices=`` would import the list to print the help).

Errors a user can cause are the project's own exception types (``user_errors()``): they print
as one line on stderr with exit code 2. Any other exception prints one line naming a log file
with the traceback, exit code 1 (``main``): the command line never shows a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES = ("inspect", "hw", "runtimes", "predict", "compare", "sweep", "measure", "data",
                   "train", "models", "app", "advise", "llm", "systems", "plan")


def user_errors() -> tuple[type[BaseException], ...]:
    """Each package's user-facing error type; add a package's here when it gains one. Imported
    only when a command fails (``except user_errors()`` evaluates it then)."""
    from roofcast.graph_import.errors import ModelImportError
    from roofcast.hw_catalog.errors import HardwareSpecError
    from roofcast.predictor.errors import PredictionError
    from roofcast.training_data.errors import MeasurementError

    return ModelImportError, PredictionError, HardwareSpecError, MeasurementError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="roofcast", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"roofcast.app.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; every outcome is an exit code, never a traceback:

    0 success, 2 a user error (``user_errors()``: one line on stderr) or a bad argument
    (argparse), 1 an unexpected failure (one line on stderr naming the log file that holds the
    traceback, ``write_crash_log``), 130 interrupted (Ctrl-C); a closed stdout (``| head``) ends
    quietly."""
    command = "roofcast"
    try:
        args = build_parser().parse_args(argv)
        command = f"roofcast {args.command}"
        _one_line_warnings(command)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except SystemExit:
        raise
    except Exception as exc:
        if isinstance(exc, user_errors()):
            print(f"{command}: error: {exc}", file=sys.stderr)
            return 2
        log = write_crash_log()
        print(f"{command}: failed unexpectedly ({type(exc).__name__}); this is a bug in roofcast, "
              f"not in your input: the traceback is in {log}", file=sys.stderr)
        return 1


def _one_line_warnings(command: str) -> None:
    """Warnings meant for the user (a skipped device file, ...) as ``roofcast X: warning: ...``,
    one line each, instead of Python's file:line report with a source line."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"{command}: warning: {message}", file=file or sys.stderr)

    warnings.showwarning = show


def write_crash_log() -> str:
    """Write the traceback being handled to ``<data folder>/logs/crash-<time>-<pid>.log`` (the
    measurement store's data folder; the temp folder when that cannot be written) and return
    its path (``"(no log: ...)"`` when neither can be written)."""
    import os
    import tempfile
    import time
    import traceback

    text = f"roofcast {' '.join(sys.argv[1:])}\n\n{traceback.format_exc()}"
    name = f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    reasons = []
    for folder in (_data_logs(), tempfile.gettempdir()):
        if folder is None:
            continue
        try:
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            return path
        except OSError as exc:
            reasons.append(str(exc))
    return f"(no log: {'; '.join(reasons)})"


def _data_logs() -> str | None:
    try:
        from roofcast.training_data.store import default_path

        return str(default_path().parent / "logs")
    except Exception:  # the failure may be in importing it: fall back to the temp folder
        return None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush of a closed pipe is quiet."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
