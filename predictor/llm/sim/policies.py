"""Scheduler policies of serving engines, one registered entry per engine and version.

A policy is data: the loop it runs (``continuous``: requests join and leave the running batch
every step; ``static``: a batch starts and finishes together), ``max_seqs`` running at most,
``max_tokens`` scheduled per step (decode tokens first, prompt chunks with the rest), whether a
prompt may be split over steps (``chunked_prefill``), how requests are admitted (``current``:
blocks for the tokens scheduled now, preempting the newest running request by recompute when a
block runs out; ``full``: blocks for the whole prompt + output, never preempted), whether a
shared prompt prefix is served from cache (``prefix_cache``). A new engine or version is a
new ``register`` call. Defaults and their sources: docs/design/serving_sim.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from roofcast.predictor.errors import PredictionError

LOOPS: tuple[str, ...] = ("continuous", "static")
ADMISSIONS: tuple[str, ...] = ("current", "full")


@dataclass(frozen=True)
class Policy:
    """One engine version's scheduler (module docstring); ``engine``: the runtime profile it
    models; ``watermark``: fraction of KV blocks kept free when admitting a new request."""

    name: str
    engine: str
    loop: str = "continuous"
    max_seqs: int = 256
    max_tokens: int = 8192
    chunked_prefill: bool = True
    admission: str = "current"
    prefix_cache: bool = False
    watermark: float = 0.01
    block_tokens: int = 16
    source: str = ""

    def with_limits(self, max_seqs: int | None = None, max_tokens: int | None = None
                    ) -> Policy:
        """This policy with the user's ``max_seqs`` / ``max_tokens`` (None: keep)."""
        for v, what in ((max_seqs, "max running sequences"), (max_tokens, "max tokens")):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise PredictionError(f"{what} must be a positive integer, got {v!r}")
        return replace(self, max_seqs=max_seqs or self.max_seqs,
                       max_tokens=max_tokens or self.max_tokens)


_REGISTRY: dict[str, Policy] = {}


def register(policy: Policy) -> Policy:
    """Add ``policy`` to the registry (its name must be new)."""
    if policy.loop not in LOOPS or policy.admission not in ADMISSIONS:
        raise PredictionError(f"policy {policy.name!r}: loop must be one of {LOOPS} and "
                              f"admission one of {ADMISSIONS}")
    if policy.name in _REGISTRY:
        raise PredictionError(f"policy {policy.name!r} is already registered")
    _REGISTRY[policy.name] = policy
    return policy


def policy_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_policy(name: str) -> Policy:
    """The registered policy ``name``; one-line refusal naming the known ones."""
    if name not in _REGISTRY:
        raise PredictionError(f"unknown scheduler policy {name!r}; use one of "
                              f"{', '.join(_REGISTRY)}")
    return _REGISTRY[name]


#: the policy an engine runs when none is named (its newest version).
ENGINE_DEFAULT: dict[str, str] = {"vllm": "vllm-v1", "tensorrt-llm": "tensorrt-llm-1",
                                  "sglang": "sglang", "llama.cpp": "static",
                                  "deepspeed-mii": "vllm-v0"}


def default_policy(engine: str, static: bool = False) -> Policy:
    """The policy of runtime ``engine`` (``static``: the static-batching policy); an engine
    without an entry runs vLLM v1's (say so where it matters)."""
    if static:
        return get_policy("static")
    return get_policy(ENGINE_DEFAULT.get(engine, "vllm-v1"))


register(Policy("vllm-v1", "vllm", max_seqs=1024, max_tokens=8192, prefix_cache=True,
                source="vLLM V1 engine args (H100-class GPU, API server defaults)"))
register(Policy("vllm-v0", "vllm", max_seqs=256, max_tokens=2048, prefix_cache=False,
                source="vLLM 0.6 engine args: max_num_seqs 256, chunked prefill 2048"))
register(Policy("tensorrt-llm-1", "tensorrt-llm", max_seqs=2048, max_tokens=8192,
                chunked_prefill=False, admission="full", prefix_cache=True,
                source="TensorRT-LLM 1.x: max_batch_size 2048, max_num_tokens 8192, "
                       "GUARANTEED_NO_EVICT, block reuse on"))
register(Policy("tensorrt-llm-max-util", "tensorrt-llm", max_seqs=2048, max_tokens=8192,
                chunked_prefill=False, admission="current", prefix_cache=True,
                source="TensorRT-LLM 1.x with capacity_scheduler_policy MAX_UTILIZATION"))
register(Policy("sglang", "sglang", max_seqs=4096, max_tokens=8192, prefix_cache=True,
                source="SGLang server args: chunked_prefill_size 8192 (80 GB-class), "
                       "max_running_requests from the KV pool, radix cache on"))
register(Policy("static", "any", loop="static", max_seqs=1, max_tokens=1 << 30,
                chunked_prefill=False, admission="full",
                source="static batching: a batch starts together and finishes together"))
