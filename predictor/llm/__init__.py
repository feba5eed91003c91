"""LLM serving predictions: prefill and decode with a KV cache, request metrics, memory fit.

``types``: ``ServingConfig`` (the run: lengths, batch or concurrency, dtypes per tensor class,
engine), ``ServingPrediction``. ``kernels``: one layer's kernels per phase through the op cost
registry; ``precision``: tensor-class dtypes (memory: ``predictor.memory.serving``);
``phases``: kernel times of prefill and decode steps on a device; ``calibration``: per-engine
corrections fitted on measured
serving data; ``serving``: TTFT, TPOT, end-to-end latency and tokens/s (static or continuous
batching), on one device or one tensor/pipeline/expert parallel replica (``sharding``: the
checks and one device's shapes; ``comm``: the step's collectives); ``serving_plan``: every
``tp x pp`` split of a system ranked by tokens/s.
"""
