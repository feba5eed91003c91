"""The ``roofcast`` command line: one subcommand per module in ``app.commands``.

Each command module exposes ``register(subparsers)`` which adds its parser and sets
``func(args) -> int``. Errors a user can cause are the project's own exception types
(``USER_ERRORS``): they print as one line on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from roofcast.graph_import.errors import ModelImportError
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.predictor.errors import PredictionError
from roofcast.training_data.errors import MeasurementError

COMMAND_MODULES = ("inspect", "hw", "predict", "compare", "measure", "data", "train", "models",
                   "app", "advise")

# Each package's user-facing error type; add a package's here when it gains one.
USER_ERRORS: tuple[type[BaseException], ...] = (ModelImportError, PredictionError,
                                                HardwareSpecError, MeasurementError)


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
    except USER_ERRORS as exc:
        print(f"roofcast {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("roofcast: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
