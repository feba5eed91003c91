"""Measured runs: per-op times from ONNX Runtime's profiler, mapped back to graph nodes.

* ``ort_cpu``: whole models (``prepare`` once, ``measure_prepared`` per config) -> tidy rows
  (``training_data.schema``) plus a summary of where the end-to-end time goes;
* ``node_mapping``: ORT's optimised graph -> the original nodes each kernel covers;
* ``random_inputs``: weightless models made runnable in memory, inputs in valid ranges;
* ``profile``: the profiler's JSON -> per-run kernel times;
* ``microbench``: one-node models over shape grids, through the same path;
* ``gpu``: the CUDA provider when present (isolated per-node timing), a clear reason otherwise;
* ``rows``: tidy-row helpers shared by the collectors;
* ``ort_levels``: ORT's graph-optimisation levels by name.
"""
