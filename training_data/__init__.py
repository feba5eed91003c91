"""Measured runs: collectors, the measurement store, public datasets and the model zoo."""
