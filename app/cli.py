"""The ``roofcast`` command line: one subcommand per module in ``app.commands``.

A command module keeps building the parser cheap (``roofcast --help`` well under 0.3 s): at
module level it imports only the standard library and light app modules
(``tests/app/test_cli_imports.py``), and exposes ``register(subparsers)``, which adds its parser
with ``func(args) -> int``; ``func`` imports what the command needs and calls ``roofcast.api``.
Help texts are for users (``HELP``, ``UserParser``). Errors a user can cause
(``user_errors()``) print as one line on stderr, exit code 2; any other exception prints one
line naming a log file with the traceback, exit code 1: the command line never shows a
traceback.
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


#: what ``roofcast --help`` says before the commands.
HELP = ("Predict the time, memory and cost of deep learning models (ONNX files, zoo models, LLM "
        "configs) on devices and multi-device systems you may not have, and what changes them.")
EPILOG = "Run 'roofcast COMMAND --help' for a command's options."


class UserParser(argparse.ArgumentParser):
    """An ArgumentParser whose help reads as plain text: the reStructuredText literal marks
    (double backticks) of the command modules' docstrings and help strings are dropped before
    the text is wrapped. Subcommand parsers are of the same class (argparse makes them with
    ``type(parent)``)."""

    def __init__(self, *args, **kwargs) -> None:
        for key in ("description", "epilog"):
            if isinstance(kwargs.get(key), str):
                kwargs[key] = plain(kwargs[key])
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        if isinstance(kwargs.get("help"), str):
            kwargs["help"] = plain(kwargs["help"])
        return super().add_argument(*args, **kwargs)

    def format_help(self) -> str:  # argument groups and subcommand summaries
        return plain(super().format_help())


def plain(text: str) -> str:
    """``text`` without reStructuredText literal marks: ````x```` -> ``x``."""
    return text.replace("``", "")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; given the command line ``argv`` whose first word names a
    command, only that command's (it parses ``argv`` alike, without importing the others)."""
    from roofcast import __version__

    parser = UserParser(prog="roofcast", description=HELP, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"roofcast {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    first = argv[0] if argv else None
    for name in (first,) if first in COMMAND_MODULES else COMMAND_MODULES:
        importlib.import_module(f"roofcast.app.commands.{name}").register(sub)
    return parser


def _run(args: argparse.Namespace) -> int:
    """The command's exit code; the on-disk caches are on (``roofcast.disk_cache``): a model
    file imported before skips onnx (``graph_import.graph_cache``), device files parsed before
    skip tomllib (``hw_catalog.parsed_cache``)."""
    from roofcast.disk_cache import used

    with used():
        return int(args.func(args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; every outcome is an exit code, never a traceback:

    0 success, 2 a user error (``user_errors()``: one line on stderr) or a bad argument
    (argparse), 1 an unexpected failure (one line on stderr naming the log file that holds the
    traceback, ``write_crash_log``), 130 interrupted (Ctrl-C); a closed stdout (``| head``) ends
    quietly."""
    command = "roofcast"
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(argv).parse_args(argv)
        command = f"roofcast {args.command}"
        _one_line_warnings(command)
        code = _run(args)
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


def entry() -> None:
    """The console script: ``main()``, then, when only the main thread is left, the atexit
    handlers and ``os._exit`` without the interpreter's teardown (freeing every module's
    objects: ~0.2 s of a 1 s prediction, pandas and networkx loaded). Output is flushed first;
    any doubt (another thread, a failed flush) takes the normal ``sys.exit``."""
    import atexit
    import os
    import threading

    code = main()
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if threading.active_count() == 1 and run_exitfuncs is not None:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # a closed pipe, a failing handler: let the interpreter report it
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


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
