"""Multi-device runs: data, tensor, pipeline and expert parallelism over a system's fabric.

``types`` holds the contract (plan, model facts, the per-device sharded workload a source
builds, the prediction); sources turn a single-device model into sharded workloads
(``graph_source``: an ONNX graph; ``llm_source``: a decoder LLM's architecture); ``engine``
times a plan on a system; ``search`` ranks the feasible plans.
"""
