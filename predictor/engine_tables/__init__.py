"""Engines' own measured kernel tables as a lookup road (``engine-tables``).

``grid`` interpolates a dense table; ``store`` holds the shipped tables (GEMM, context and
generation attention per device, engine version and dtype) and looks rows up; ``build`` makes
them from aiconfigurator's per-op tables; ``estimator`` is the road: the table's time where the
engine measured that kernel on that device, the ``auto`` kernel model elsewhere.
Design notes: docs/design/engine-tables.md.
"""
