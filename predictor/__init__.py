"""Analytical and learned per-op time predictors, graph simulation and what-if sweeps."""
