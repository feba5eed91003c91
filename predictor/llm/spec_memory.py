"""Memory a speculative-decoding draft adds on the fullest device of a replica (bytes).

``draft:MODEL``: the whole draft model (its steps are timed unsharded, so every device holds
it): weights = its weights, KV = its ``request_kv_bytes`` over the request's tokens. ``mtp``:
the target's multi-token-prediction layer (``spec_decode.draft_arch``: one layer of its last
kind) on the device's shard: weights = that layer (the embedding and LM head are the target's,
shared), KV = that layer's cache over the request's tokens. No draft: 0.
"""

from __future__ import annotations

import functools

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.spec_decode import SpecDecode, draft_arch
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.memory.decoder import kind_bytes, layer_bytes, request_kv_bytes
from roofcast.predictor.memory.decoder import weights_bytes as model_weights_bytes


@functools.lru_cache(maxsize=16)
def _draft_model(arch: LLMArch, spec: SpecDecode) -> LLMArch:
    return draft_arch(arch, spec)


def draft_weights_bytes(local: LLMArch, cfg: ServingConfig, experts: int) -> float:
    """Draft weight bytes on a device running ``local`` (the device's shapes; ``experts``:
    the routed experts of a layer it keeps)."""
    spec, dtypes = cfg.spec_decode, TensorDtypes.of(cfg)
    if spec is None:
        return 0.0
    model = _draft_model(local, spec)
    if spec.method != "mtp":
        return model_weights_bytes(model, dtypes)
    if model.layers:
        return float(kind_bytes(model.layers[0], dtypes, experts))
    return float(layer_bytes(model, dtypes, experts))


def draft_kv_bytes(local: LLMArch, cfg: ServingConfig, tokens: int, batch: int = 1) -> float:
    """Draft KV bytes of ``batch`` requests of ``tokens`` tokens on a device running
    ``local``."""
    spec = cfg.spec_decode
    if spec is None:
        return 0.0
    return request_kv_bytes(_draft_model(local, spec), TensorDtypes.of(cfg), tokens, batch)
