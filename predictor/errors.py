"""The predictor package's user-facing error type.

Raised for anything a user can get wrong when asking for a prediction: an unknown estimator,
precision, mode or optimizer name, a graph with nothing to predict, a device without the figures
a quantity needs. The message says what is wrong and what to do; the CLI and the app print it as
one line (``app.cli.user_errors``).
"""

from __future__ import annotations


class PredictionError(ValueError):
    """A prediction cannot be made as asked; the message names the bad input and the fix."""
