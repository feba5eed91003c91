"""The memory model: bytes a device holds, one result type (``DeviceMemory``) for every road.

``types``: ``DeviceMemory``. ``state``: weights, gradients and optimizer states per parameter
and ZeRO's division. ``graph``: an ONNX graph on one device (liveness). ``batch``: the largest
batch that fits. ``decoder`` / ``decoder_activations``: a decoder LLM's weights, KV cache and
activations. ``serving``: a serving replica's fullest device. ``plan``: a parallel plan's most
loaded device. Rationale and derivations: docs/design/memory.md.
"""
