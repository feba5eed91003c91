"""``ExecutionProfile``: how a runtime executes a graph — the third input beside the workload and
the hardware.

A profile is data (one TOML per runtime in ``profiles/``, user profiles in the user's runtime
folder, see ``catalog``): the ``device_kinds`` and ``vendors`` it runs on, its kernel-mapping
``patterns`` (always) and ``fusion_patterns`` (when fusion is on), ``dispatch_floor_us`` per
device kind (host µs per kernel; a kernel costs max(it, the device's launch overhead);
``graph_capture``: the launch overhead only), math defaults (``tf32_families``, ``attention``
eager|fused, ``attention_score_passes``), ``precisions``, ``learned_from`` (whose measured
kernels train its learned efficiencies), an optional ``[serving]`` table for LLM engines
(``ServingSpec``), ``notes`` and ``sources``.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.runtimes.profile).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# PRECISIONS: the compute precisions a run may ask for (``RunConfig.precision``) and a profile
# may list (the one dtype table's "precision" role)
from roofcast.dtypes import PRECISIONS
from roofcast.hw_catalog import get_device
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.system import FABRIC_KINDS
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.types import KV_DTYPES, WEIGHT_DTYPES

DEVICE_KINDS: tuple[str, ...] = ("gpu", "cpu", "accelerator")
ATTENTION_IMPLEMENTATIONS: tuple[str, ...] = ("eager", "fused")
KNOWN_KEYS: frozenset[str] = frozenset({
    "name", "description", "device_kinds", "patterns", "fusion_patterns", "fusion_default",
    "dispatch_floor_us", "graph_capture", "tf32_families", "attention",
    "attention_score_passes", "precisions", "learned_from", "notes", "sources", "vendors",
    "serving",
})
SERVING_KEYS: frozenset[str] = frozenset({
    "weights", "kv_cache", "batching", "memory_utilization", "max_prefill_tokens",
    "step_overhead_us", "kv_convert_per", "custom_allreduce", "version", "kernel_estimator",
    "native_kv", "step_overhead_source", "fused_kernels",
})
CUSTOM_ALLREDUCE_KEYS: frozenset[str] = frozenset({"world_sizes", "fabrics", "rules"})
CUSTOM_ALLREDUCE_RULE_KEYS: frozenset[str] = frozenset({"max_ranks", "below_bytes", "algorithm"})
#: the engine all-reduce kernels a rule may name: ``predictor.collectives.steps``'
#: ``ENGINE_ALGORITHMS["all_reduce"]`` (kept here so the profile loader imports nothing heavy;
#: a test keeps the two equal).
ENGINE_ALLREDUCE_ALGORITHMS: tuple[str, ...] = ("one_shot", "two_shot")
MAX_CUSTOM_ALLREDUCE_BYTES = float(1 << 40)
#: how often a decode attention kernel converts a quantised KV element (``ServingSpec``).
KV_CONVERT_PER: tuple[str, ...] = ("kv-head", "query-head")
BATCHING: tuple[str, ...] = ("continuous", "static")
#: decoder-layer fusions a serving profile may name (``predictor.llm.fusions.FUSIONS``).
SERVING_FUSIONS: tuple[str, ...] = ("add-norm", "rope-kv-in-attention")
MAX_PREFILL_TOKENS = 1 << 24
MAX_STEP_OVERHEAD_US = 1e5
MAX_FLOOR_US = 1e5
#: op families whose fp32 math a runtime may run as TF32 (matrix-unit families only).
TF32_FAMILIES: tuple[str, ...] = ("conv", "matmul", "attention")


@dataclass(frozen=True)
class CustomAllReduceRule:
    """Groups of at most ``max_ranks`` ranks reduce messages of fewer than ``below_bytes`` bytes
    with the engine kernel ``algorithm`` (``ENGINE_ALLREDUCE_ALGORITHMS``)."""

    max_ranks: int
    below_bytes: float
    algorithm: str


@dataclass(frozen=True)
class CustomAllReduce:
    """An engine's own all-reduce kernels (the ``[serving.custom_allreduce]`` table): used for
    groups of ``world_sizes`` ranks on one node of a fabric of ``fabrics`` kinds; the first of
    ``rules`` that admits the group and the message picks the kernel; none: NCCL."""

    world_sizes: tuple[int, ...]
    fabrics: tuple[str, ...]
    rules: tuple[CustomAllReduceRule, ...]

    def algorithm(self, size_bytes: float, n_ranks: int, fabric_kind: str) -> str | None:
        """The engine kernel for one all-reduce of ``size_bytes`` over ``n_ranks``, else None
        (NCCL)."""
        if n_ranks not in self.world_sizes or fabric_kind not in self.fabrics:
            return None
        for rule in self.rules:
            if n_ranks <= rule.max_ranks and size_bytes < rule.below_bytes:
                return rule.algorithm
        return None


@dataclass(frozen=True)
class ServingSpec:
    """What an LLM serving engine does (the profile's optional ``[serving]`` table).

    ``weights``/``kv_cache``: the weight and KV-cache dtypes it runs
    (``predictor.llm.types.WEIGHT_DTYPES``/``KV_DTYPES``); ``batching``: ``continuous``
    (requests join and leave the running batch every step) or ``static``;
    ``memory_utilization``: the fraction of device memory the engine claims (vLLM's
    ``gpu_memory_utilization``), the rest is reserve; ``max_prefill_tokens``: tokens of prompt
    one scheduler step takes (chunked prefill budget; 0: whole prompts);
    ``step_overhead_us``: host time per engine step before calibration (scheduling, sampling);
    ``kv_convert_per``: ``query-head`` when its attention kernel runs one thread block per
    query head and so converts a quantised KV element once per query head of its KV head
    (``predictor.llm.precision``), ``kv-head`` (default) when it groups them;
    ``custom_allreduce``: its own tensor-parallel all-reduce kernels (None: NCCL only);
    ``version``: the engine release the profile describes; ``kernel_estimator``: the estimator
    its step kernels are timed with when the run names the serving default ('' : the run's);
    ``native_kv``: KV dtypes its attention reads without conversion on devices with the
    dtype's matrix units; ``step_overhead_source``: where ``step_overhead_us`` comes from;
    ``fused_kernels``: the decoder-layer fusions it runs (``SERVING_FUSIONS``,
    ``predictor.llm.fusions``).
    """

    weights: tuple[str, ...] = ("fp16", "bf16")
    kv_cache: tuple[str, ...] = ("fp16", "bf16")
    batching: str = "continuous"
    memory_utilization: float = 0.9
    max_prefill_tokens: int = 0
    step_overhead_us: float = 0.0
    kv_convert_per: str = "kv-head"
    custom_allreduce: CustomAllReduce | None = None
    version: str = ""
    kernel_estimator: str = ""
    native_kv: tuple[str, ...] = ()
    step_overhead_source: str = ""
    fused_kernels: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExecutionProfile:
    """One runtime's execution model (module docstring). ``source``: the file it came from."""

    name: str
    description: str
    device_kinds: tuple[str, ...]
    patterns: tuple[str, ...] = ()
    fusion_patterns: tuple[str, ...] = ()
    fusion_default: bool = False
    dispatch_floor_us: Mapping[str, float] = field(default_factory=dict, hash=False)
    graph_capture: bool = False
    tf32_families: tuple[str, ...] = ()
    attention: str = "eager"
    attention_score_passes: int = 0
    precisions: tuple[str, ...] = ("fp32",)
    learned_from: str = ""
    notes: str = ""
    sources: tuple[str, ...] = ()
    source: str = ""
    #: device vendors it runs on (``HardwareSpec.vendor`` prefixes, e.g. ``NVIDIA``); empty: any.
    vendors: tuple[str, ...] = ()
    #: the LLM serving engine's settings; None: not a serving engine.
    serving: ServingSpec | None = None

    def runs_on(self, kind: str) -> bool:
        """Whether the runtime runs on devices of ``kind``."""
        return kind in self.device_kinds

    def runs_on_vendor(self, vendor: str) -> bool:
        """Whether the runtime runs on ``vendor``'s devices (``vendors`` empty: any; else a
        listed name is a case-insensitive prefix of ``vendor``)."""
        v = vendor.strip().casefold()
        return not self.vendors or any(v.startswith(x.casefold()) for x in self.vendors)

    def dispatch_floor_s(self, kind: str, device_launch_s: float) -> float:
        """Per-kernel host cost (s) on a device of ``kind`` whose own launch overhead is
        ``device_launch_s``: ``max(floor_us[kind] x 1e-6, device_launch_s)`` — the runtime's host
        dispatch and the device's launch overlap (asynchronous launches), so the slower one sets
        the pace; a kind without a figure, or ``graph_capture`` (no host dispatch), gets
        ``device_launch_s`` alone (docs/design/road.md)."""
        launch = float(device_launch_s)
        if self.graph_capture or kind not in self.dispatch_floor_us:
            return launch
        return max(float(self.dispatch_floor_us[kind]) * 1e-6, launch)

    def hidden_launch_note(self, kind: str, device_launch_s: float) -> str:
        """A word when the device's launch overhead is below this runtime's host dispatch floor
        (``dispatch_floor_s`` takes the floor: changing the launch overhead there does
        nothing); '' otherwise."""
        floor_s = self.dispatch_floor_s(kind, device_launch_s)
        if floor_s <= device_launch_s:
            return ""
        return (f"launch overhead {device_launch_s * 1e6:.3g} µs is below {self.name}'s host "
                f"dispatch floor {floor_s * 1e6:.3g} µs on {kind}: a kernel costs max(floor, "
                "launch), so the floor sets it; a launch overhead below the floor changes "
                "nothing under this runtime (a graph-capture runtime, e.g. tensorrt, sees it)")

    def patterns_for(self, fusion: bool | None) -> tuple[str, ...]:
        """The pattern names applied for a run with ``fusion`` (None: ``fusion_default``)."""
        on = self.fusion_default if fusion is None else fusion
        return self.patterns + (self.fusion_patterns if on else ())



def whatif_launch_notes(profile: ExecutionProfile, hw: Any) -> tuple[str, ...]:
    """``profile.hidden_launch_note`` for a what-if device (``hw.base`` set) whose launch
    overhead differs from its base device's: a knob the runtime's floor hides says so."""
    if hw.base is None:
        return ()
    try:
        base_launch_s = get_device(hw.base).launch_overhead_s
    except HardwareSpecError:  # a what-if of an object outside the catalog: nothing to compare
        return ()
    if hw.launch_overhead_s == base_launch_s:
        return ()
    note = profile.hidden_launch_note(hw.kind, hw.launch_overhead_s)
    return (note,) if note else ()

def _strings(doc: Mapping[str, Any], key: str, where: str, default: tuple = ()) -> tuple[str, ...]:
    value = doc.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PredictionError(f"{where}: {key} must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _choice(doc: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str,
            where: str) -> str:
    value = doc.get(key, default)
    if value not in allowed:
        raise PredictionError(f"{where}: {key} = {value!r}; choose one of {', '.join(allowed)}")
    return str(value)


def _flag(doc: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = doc.get(key, default)
    if not isinstance(value, bool):
        raise PredictionError(f"{where}: {key} must be true or false, got {value!r}")
    return value


def profile_from_document(doc: Mapping[str, Any], where: str, *, known_patterns: frozenset[str],
                          precisions: tuple[str, ...] = PRECISIONS) -> ExecutionProfile:
    """Validate one profile document (a parsed TOML) and build the profile; every problem is a
    ``PredictionError`` naming ``where``, the key and what is allowed."""
    unknown = sorted(set(doc) - KNOWN_KEYS)
    if unknown:
        raise PredictionError(f"{where}: unknown keys {unknown}; allowed: {sorted(KNOWN_KEYS)}")
    name = _checked_name(doc, where)
    description = doc.get("description", "")
    if not isinstance(description, str) or not description.strip() or "\n" in description.strip():
        raise PredictionError(f"{where}: description must be one non-empty line")
    kinds = _checked_kinds(doc, where)
    patterns, fusion_patterns = _checked_patterns(doc, where, known_patterns)
    floors = _checked_floors(doc, where)
    passes = doc.get("attention_score_passes", 0)
    if isinstance(passes, bool) or not isinstance(passes, int) or not 0 <= passes <= 8:
        raise PredictionError(f"{where}: attention_score_passes must be an integer 0..8")
    precs = _checked_precisions(doc, where, precisions)
    learned_from = doc.get("learned_from", name)
    if not isinstance(learned_from, str) or not learned_from:
        raise PredictionError(f"{where}: learned_from must be a runtime name")
    notes = doc.get("notes", "")
    if not isinstance(notes, str):
        raise PredictionError(f"{where}: notes must be a string")
    attention = _choice(doc, "attention", ATTENTION_IMPLEMENTATIONS, "eager", where)
    _check_attention(attention, int(passes), patterns + fusion_patterns, where)
    families = _strings(doc, "tf32_families", where)
    bad_f = [f for f in families if f not in TF32_FAMILIES]
    if bad_f:
        raise PredictionError(f"{where}: tf32_families {bad_f} unknown; choose among "
                              f"{', '.join(TF32_FAMILIES)}")
    return ExecutionProfile(
        name=name, description=description.strip(), device_kinds=kinds, patterns=patterns,
        fusion_patterns=fusion_patterns,
        fusion_default=_flag(doc, "fusion_default", False, where),
        dispatch_floor_us={str(k): float(v) for k, v in floors.items()},
        graph_capture=_flag(doc, "graph_capture", False, where),
        tf32_families=families, attention=attention,
        attention_score_passes=int(passes), precisions=precs, learned_from=learned_from,
        notes=notes, sources=_strings(doc, "sources", where), source=where,
        vendors=_strings(doc, "vendors", where),
        serving=_serving(doc["serving"], f"{where}: [serving]") if "serving" in doc else None,
    )


def _checked_name(doc: Mapping[str, Any], where: str) -> str:
    name = doc.get("name")
    if not isinstance(name, str) or not name or len(name) > 64 or not all(
            c.isalnum() or c in "-_." for c in name):
        raise PredictionError(f"{where}: name must be 1-64 letters, digits, '-', '_' or '.', "
                              f"got {name!r}")
    return name


def _checked_kinds(doc: Mapping[str, Any], where: str) -> tuple[str, ...]:
    kinds = _strings(doc, "device_kinds", where)
    bad = [k for k in kinds if k not in DEVICE_KINDS]
    if not kinds or bad:
        raise PredictionError(f"{where}: device_kinds must name some of {', '.join(DEVICE_KINDS)}"
                              f"{f'; unknown {bad}' if bad else ''}")
    return kinds


def _checked_patterns(doc: Mapping[str, Any], where: str,
                      known_patterns: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(patterns, fusion_patterns), every one registered."""
    patterns = _strings(doc, "patterns", where)
    fusion_patterns = _strings(doc, "fusion_patterns", where)
    missing = [p for p in patterns + fusion_patterns if p not in known_patterns]
    if missing:
        raise PredictionError(f"{where}: unknown patterns {missing}; registered patterns: "
                              f"{', '.join(sorted(known_patterns))}")
    return patterns, fusion_patterns


def _checked_floors(doc: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    floors = doc.get("dispatch_floor_us", {})
    if not isinstance(floors, Mapping) or any(
            k not in DEVICE_KINDS or isinstance(v, bool) or not isinstance(v, int | float)
            or not 0 <= v <= MAX_FLOOR_US for k, v in floors.items()):
        raise PredictionError(f"{where}: dispatch_floor_us must map device kinds "
                              f"({', '.join(DEVICE_KINDS)}) to microseconds in 0..{MAX_FLOOR_US:g}")
    return floors


def _checked_precisions(doc: Mapping[str, Any], where: str,
                        precisions: tuple[str, ...]) -> tuple[str, ...]:
    precs = _strings(doc, "precisions", where, ("fp32",))
    bad_p = [p for p in precs if p not in precisions]
    if not precs or bad_p:
        raise PredictionError(f"{where}: precisions must name some of {', '.join(precisions)}"
                              f"{f'; unknown {bad_p}' if bad_p else ''}")
    return precs


def _number(doc: Mapping[str, Any], key: str, default: float, low: float, high: float,
            where: str, *, integer: bool = False, open_low: bool = False) -> float:
    value = doc.get(key, default)
    kind = int if integer else int | float
    ok = not isinstance(value, bool) and isinstance(value, kind) and (
        low < value if open_low else low <= value) and value <= high
    if not ok:
        what = "an integer" if integer else "a number"
        raise PredictionError(f"{where}: {key} must be {what} in {'(' if open_low else '['}"
                              f"{low:g}, {high:g}], got {value!r}")
    return value


def _serving(doc: Any, where: str) -> ServingSpec:
    """Validate a profile's ``[serving]`` table (``ServingSpec``): dtypes from
    ``predictor.llm.types``, ``memory_utilization`` in (0, 1], ``max_prefill_tokens`` >= 0,
    ``step_overhead_us`` >= 0."""
    if not isinstance(doc, Mapping):
        raise PredictionError(f"{where} must be a table, got {doc!r}")
    unknown = sorted(set(doc) - SERVING_KEYS)
    if unknown:
        raise PredictionError(f"{where}: unknown keys {unknown}; allowed: {sorted(SERVING_KEYS)}")
    default = ServingSpec()
    dtypes = {}
    for key, allowed in (("weights", WEIGHT_DTYPES), ("kv_cache", KV_DTYPES)):
        got = _strings(doc, key, where, getattr(default, key))
        bad = [d for d in got if d not in allowed]
        if not got or bad:
            raise PredictionError(f"{where}: {key} must name some of {', '.join(allowed)}"
                                  f"{f'; unknown {bad}' if bad else ''}")
        dtypes[key] = got
    return ServingSpec(
        weights=dtypes["weights"], kv_cache=dtypes["kv_cache"],
        batching=_choice(doc, "batching", BATCHING, default.batching, where),
        memory_utilization=float(_number(doc, "memory_utilization", default.memory_utilization,
                                         0.0, 1.0, where, open_low=True)),
        max_prefill_tokens=int(_number(doc, "max_prefill_tokens", default.max_prefill_tokens, 0,
                                       MAX_PREFILL_TOKENS, where, integer=True)),
        step_overhead_us=float(_number(doc, "step_overhead_us", default.step_overhead_us, 0.0,
                                       MAX_STEP_OVERHEAD_US, where)),
        kv_convert_per=_choice(doc, "kv_convert_per", KV_CONVERT_PER, default.kv_convert_per,
                               where),
        custom_allreduce=(_custom_allreduce(doc["custom_allreduce"], f"{where}.custom_allreduce")
                          if "custom_allreduce" in doc else None),
        version=_text(doc, "version", where),
        kernel_estimator=_text(doc, "kernel_estimator", where),
        native_kv=_native_kv(doc, where),
        step_overhead_source=_text(doc, "step_overhead_source", where),
        fused_kernels=_fusions(doc, where),
    )


def _text(doc: Mapping[str, Any], key: str, where: str) -> str:
    """An optional one-line string of ``doc`` ('' when absent)."""
    value = doc.get(key, "")
    if not isinstance(value, str) or "\n" in value.strip():
        raise PredictionError(f"{where}: {key} must be one line of text, got {value!r}")
    return value.strip()


def _native_kv(doc: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """``native_kv``: KV dtypes below 16 bits (``KV_DTYPES``) the attention reads natively."""
    got = _strings(doc, "native_kv", where)
    bad = [d for d in got if d not in KV_DTYPES or d in ("fp32", "fp16", "bf16")]
    if bad:
        raise PredictionError(f"{where}: native_kv must name quantised KV dtypes of "
                              f"{', '.join(KV_DTYPES)}; got {bad}")
    return got


def _fusions(doc: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """``fused_kernels``: names of ``SERVING_FUSIONS``."""
    got = _strings(doc, "fused_kernels", where)
    bad = [f for f in got if f not in SERVING_FUSIONS]
    if bad:
        raise PredictionError(f"{where}: fused_kernels must name some of "
                              f"{', '.join(SERVING_FUSIONS)}; got {bad}")
    return got


def _ints(doc: Mapping[str, Any], key: str, low: int, high: int, where: str) -> tuple[int, ...]:
    value = doc.get(key)
    if not isinstance(value, list) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in value):
        raise PredictionError(f"{where}: {key} must be a non-empty list of integers in "
                              f"{low}..{high}, got {value!r}")
    return tuple(value)


def _custom_allreduce(doc: Any, where: str) -> CustomAllReduce:
    """Validate ``[serving.custom_allreduce]`` (``CustomAllReduce``): ``world_sizes`` integers
    >= 2, ``fabrics`` fabric kinds (``hw_catalog.system.FABRIC_KINDS``), ``rules`` a non-empty
    list of {max_ranks >= 2, below_bytes > 0, algorithm in ``ENGINE_ALLREDUCE_ALGORITHMS``}."""
    if not isinstance(doc, Mapping):
        raise PredictionError(f"{where} must be a table, got {doc!r}")
    unknown = sorted(set(doc) - CUSTOM_ALLREDUCE_KEYS)
    missing = sorted(CUSTOM_ALLREDUCE_KEYS - set(doc))
    if unknown or missing:
        raise PredictionError(f"{where}: keys must be {sorted(CUSTOM_ALLREDUCE_KEYS)}; "
                              f"unknown {unknown}, missing {missing}")
    sizes = _ints(doc, "world_sizes", 2, 1 << 16, where)
    fabrics = _strings(doc, "fabrics", where)
    bad = [f for f in fabrics if f not in FABRIC_KINDS]
    if not fabrics or bad:
        raise PredictionError(f"{where}: fabrics must name some of {', '.join(FABRIC_KINDS)}"
                              f"{f'; unknown {bad}' if bad else ''}")
    rules = doc["rules"]
    if not isinstance(rules, list) or not rules:
        raise PredictionError(f"{where}: rules must be a non-empty list of tables")
    out = []
    for i, rule in enumerate(rules):
        at = f"{where}: rules[{i}]"
        if not isinstance(rule, Mapping) or set(rule) != CUSTOM_ALLREDUCE_RULE_KEYS:
            raise PredictionError(f"{at} must be a table of exactly "
                                  f"{sorted(CUSTOM_ALLREDUCE_RULE_KEYS)}, got {rule!r}")
        out.append(CustomAllReduceRule(
            max_ranks=int(_number(rule, "max_ranks", 0, 2, 1 << 16, at, integer=True)),
            below_bytes=float(_number(rule, "below_bytes", 0, 0.0, MAX_CUSTOM_ALLREDUCE_BYTES,
                                      at, open_low=True)),
            algorithm=_choice(rule, "algorithm", ENGINE_ALLREDUCE_ALGORITHMS, "", at)))
    return CustomAllReduce(sizes, fabrics, tuple(out))


def _check_attention(attention: str, passes: int, patterns: tuple[str, ...], where: str) -> None:
    """The attention settings and the patterns that implement them must agree."""
    if attention == "fused" and "fused-attention" not in patterns:
        raise PredictionError(f"{where}: attention = 'fused' needs the 'fused-attention' pattern "
                              "in patterns")
    if attention == "eager" and "fused-attention" in patterns:
        raise PredictionError(f"{where}: the 'fused-attention' pattern needs attention = 'fused'")
    if passes and (attention != "eager" or "attention-score-passes" not in patterns):
        raise PredictionError(f"{where}: attention_score_passes = {passes} needs attention = "
                              "'eager' and the 'attention-score-passes' pattern")
