"""Design-space sweeps from a spec file, on one process or a Dask cluster (issue 18).

``types`` holds the contract (spec, task, result); ``spec`` reads and validates a sweep file;
``tasks`` cuts the grid into tasks and runs one; ``schedulers`` runs the tasks locally or on
Dask, each task's cells delivered as it finishes; ``stream`` checks each delivery, fills the
speedups and hands the cells to a sink (in memory, or ``output.DatasetWriter``); ``output``
writes the Parquet dataset, the summary and the Pareto front (also incrementally).
"""
