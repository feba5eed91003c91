"""Collective-communication time: measured curves, else a fitted latency + bandwidth step model."""

from roofcast.predictor.collectives.model import collective_time_s, engine_time_s, model_time_s
from roofcast.predictor.collectives.steps import COLLECTIVES, ENGINE_ALGORITHMS

__all__ = ["COLLECTIVES", "ENGINE_ALGORITHMS", "collective_time_s", "engine_time_s", "model_time_s"]
