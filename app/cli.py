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
as one line on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES = ("inspect", "hw", "predict", "compare", "measure", "data", "train", "models",
                   "app", "advise")


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
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("roofcast: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except user_errors() as exc:
        print(f"roofcast {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
