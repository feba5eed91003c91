"""The measurement package's user-facing error type."""

from __future__ import annotations


class MeasurementError(ValueError):
    """A measurement file, row or store the user gave is unusable; the message says which rows,
    why, and what to do. The CLI prints it as one line (``app.cli.user_errors``)."""
