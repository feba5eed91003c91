"""Collective-communication time: measured curves, else a fitted latency + bandwidth step model."""

from roofcast.predictor.collectives.model import collective_time_s, model_time_s
from roofcast.predictor.collectives.steps import COLLECTIVES

__all__ = ["COLLECTIVES", "collective_time_s", "model_time_s"]
