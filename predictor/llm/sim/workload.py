"""Requests to simulate: arrival times (s) and prompt / output lengths (tokens), seeded.

Arrivals: ``closed`` (a fixed number of clients, each sends its next request when the previous
one finishes: times are set by the engine loop), ``poisson`` at ``rate`` requests/s
(exponential gaps of mean ``1 / rate``) or ``gamma`` (gaps of mean ``1 / rate`` and coefficient
of variation ``cv``: shape ``1 / cv^2``; cv > 1 is burstier than Poisson). Lengths: ``fixed``,
``uniform`` over ``[lo, hi]`` or ``lognormal`` of a given mean and cv (rounded, at least 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from roofcast.predictor.errors import PredictionError


@dataclass(frozen=True)
class Requests:
    """``arrival_s`` (NaN: set by a closed loop), ``input_tokens``, ``output_tokens``: arrays
    of one length; ``clients``: the closed loop's concurrency (0: open loop)."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    clients: int = 0

    def __len__(self) -> int:
        return len(self.input_tokens)


@dataclass(frozen=True)
class Lengths:
    """A length distribution: ``kind`` (``LENGTHS``), ``mean`` tokens, ``spread`` (uniform:
    half-width; lognormal: cv; fixed: unused)."""

    kind: str = "fixed"
    mean: float = 512.0
    spread: float = 0.0

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` lengths (integers >= 1)."""
        if self.kind not in LENGTHS:
            raise PredictionError(f"unknown length distribution {self.kind!r}; use one of "
                                  f"{', '.join(LENGTHS)}")
        _check_positive(self.mean, "mean length")
        if not math.isfinite(self.spread) or self.spread < 0:
            raise PredictionError(f"length spread must be a finite number >= 0, got "
                                  f"{self.spread!r}")
        return np.maximum(1, np.rint(LENGTHS[self.kind](self, n, rng))).astype(np.int64)


def _lognormal(d: Lengths, n: int, rng: np.random.Generator) -> np.ndarray:
    sigma2 = math.log1p(d.spread**2)
    return rng.lognormal(math.log(d.mean) - sigma2 / 2, math.sqrt(sigma2), n)


#: length distribution -> sampler.
LENGTHS: dict[str, Callable[[Lengths, int, np.random.Generator], np.ndarray]] = {
    "fixed": lambda d, n, rng: np.full(n, d.mean),
    "uniform": lambda d, n, rng: rng.uniform(d.mean - d.spread, d.mean + d.spread, n),
    "lognormal": _lognormal,
}


def _check_positive(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise PredictionError(f"{what} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise PredictionError(f"{what} must be a finite number > 0, got {value!r}")
    return v


def _gamma_gaps(n: int, rate: float, cv: float, rng: np.random.Generator) -> np.ndarray:
    shape = 1.0 / cv**2
    return rng.gamma(shape, 1.0 / (rate * shape), n)


#: open-loop arrival process -> gaps sampler (n, rate, cv, rng).
ARRIVALS: dict[str, Callable[[int, float, float, np.random.Generator], np.ndarray]] = {
    "poisson": lambda n, rate, cv, rng: rng.exponential(1.0 / rate, n),
    "gamma": _gamma_gaps,
}


def open_loop(n: int, rate: float, inputs: Lengths, outputs: Lengths, *,
              process: str = "poisson", cv: float = 1.0, seed: int = 0) -> Requests:
    """``n`` requests arriving at ``rate`` requests/s under ``process`` (module docstring),
    the first at its first gap."""
    if process not in ARRIVALS:
        raise PredictionError(f"unknown arrival process {process!r}; use closed, "
                              f"{', '.join(ARRIVALS)}")
    rate = _check_positive(rate, "rate")
    cv = _check_positive(cv, "arrival cv")
    rng = np.random.default_rng(seed)
    times = np.cumsum(ARRIVALS[process](n, rate, cv, rng))
    return Requests(times, inputs.sample(n, rng), outputs.sample(n, rng))


def closed_loop(n: int, clients: int, inputs: Lengths, outputs: Lengths, *,
                seed: int = 0) -> Requests:
    """``n`` requests from ``clients`` clients that each send the next when one finishes."""
    if clients < 1:
        raise PredictionError(f"concurrency must be >= 1, got {clients}")
    rng = np.random.default_rng(seed)
    times = np.full(n, np.nan)
    times[:clients] = 0.0
    return Requests(times, inputs.sample(n, rng), outputs.sample(n, rng), clients)
