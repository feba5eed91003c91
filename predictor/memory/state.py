"""Training state per parameter element and what ZeRO divides of it (bytes).

Before ZeRO a device holds per parameter element (Rajbhandari et al. 2020, mixed-precision
Adam ``2 + 2 + K`` with ``K = 12``): weights and gradients at the run's precision; optimizer
states = ``OptimizerModel.state_tensors`` tensors at the state precision (fp32; fp64 for fp64
runs) + an fp32 master copy of the weights when the run's precision is narrower.
ZeRO over ``dp`` replicas: stage 1 divides the optimizer states by ``dp``, stage 2 also the
gradients, stage 3 also the weights.
"""

from __future__ import annotations

from roofcast.predictor.precision import storage_bytes
from roofcast.predictor.training import OPTIMIZERS, state_precision


def bytes_per_param(precision: str, optimizer: str) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) bytes per parameter element before ZeRO:
    mixed-precision Adam (2, 2, 12); fp32 Adam (4, 4, 8); fp32 SGD-momentum (4, 4, 4)."""
    width = float(storage_bytes(precision))
    state = float(storage_bytes(state_precision(precision)))
    master = state if width < state else 0.0
    return width, width, master + OPTIMIZERS[optimizer].state_tensors * state


def zero_divisors(zero: int, dp: int) -> tuple[int, int, int]:
    """What ZeRO stage ``zero`` divides (weights, gradients, optimizer states) by over ``dp``
    replicas (P_os, P_os+g, P_os+g+p)."""
    return (dp if zero >= 3 else 1, dp if zero >= 2 else 1, dp if zero >= 1 else 1)
