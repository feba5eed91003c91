"""Speculative decoding: a draft proposes ``K`` tokens, the target verifies them in one step.

With acceptance rate ``A`` per drafted token (independent), a verify step emits on average
``E = (1 - A^(K+1)) / (1 - A)`` tokens per sequence (``E = K + 1`` at ``A = 1``, 1 at
``A = 0``: the target's own token always comes). One step of ``d`` decoding sequences at
context ``c`` costs the target verifying ``K + 1`` new tokens per sequence (a prefill-like
segment ``Segment(d, K + 1, c)``) plus ``K`` draft steps ``Segment(d, 1, c)`` of the draft
(``draft:MODEL``: that model, unsharded; ``mtp``: one layer of the target with its LM head).
Seconds per token = step seconds / ``E``; prompt tokens per step scale by ``E`` where a
steady state counts steps per output token. Draft weights and KV: ``spec_memory``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.kernels import Segment
from roofcast.predictor.llm.phases import Step, StepTimes, time_steps

METHODS: tuple[str, ...] = ("draft", "mtp")
#: draft length limits (tokens proposed per step).
MAX_DRAFT_TOKENS = 16


@dataclass(frozen=True)
class SpecDecode:
    """``method`` ``draft`` (a separate ``draft`` model) or ``mtp`` (the target's
    multi-token-prediction layer); ``k`` drafted tokens per step; ``accept`` in [0, 1]."""

    method: str
    k: int
    accept: float
    draft: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise PredictionError(f"speculative decoding method must be one of "
                                  f"{', '.join(METHODS)}, got {self.method!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or not (
                1 <= self.k <= MAX_DRAFT_TOKENS):
            raise PredictionError(f"draft length K must be an integer in 1..{MAX_DRAFT_TOKENS}, "
                                  f"got {self.k!r}")
        a = self.accept
        if isinstance(a, bool) or not isinstance(a, int | float) or not 0.0 <= a <= 1.0:
            raise PredictionError(f"acceptance rate must be a number in [0, 1], got {a!r}")
        if (self.method == "draft") != bool(self.draft):
            raise PredictionError("draft:MODEL:K names a draft model; mtp:K takes none")

    @property
    def tokens_per_step(self) -> float:
        """``E = (1 - A^(K+1)) / (1 - A)`` tokens emitted per sequence per verify step."""
        a, k = float(self.accept), self.k
        return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)

    def label(self) -> str:
        head = f"draft {self.draft}" if self.method == "draft" else "MTP"
        return f"{head}, K={self.k}, acceptance {self.accept:g}"


def parse_spec(text: str, accept: float | None) -> SpecDecode:
    """``draft:MODEL:K`` or ``mtp:K`` with acceptance ``accept``; one-line refusals."""
    parts = str(text).strip().split(":")
    if accept is None:
        raise PredictionError("speculative decoding needs an acceptance rate (--spec-accept A, "
                              "0..1)")
    shape = (parts[0] == "mtp" and len(parts) == 2) or (parts[0] == "draft" and len(parts) >= 3)
    if shape and parts[-1].strip().isdigit():
        draft = ":".join(parts[1:-1]) or None
        return SpecDecode(parts[0], int(parts[-1]), float(accept), draft)
    raise PredictionError(f"speculative decoding must be draft:MODEL:K or mtp:K (K an integer), "
                          f"got {text!r}")


def draft_arch(arch, spec: SpecDecode):
    """The model the ``K`` draft steps run: ``draft`` loaded, or ``mtp`` one layer of
    ``arch`` (its last layer kind) with its embedding and LM head."""
    if spec.method == "mtp":
        kinds = arch.layers[-1:] if arch.layers else ()
        return replace(arch, name=f"{arch.name} [MTP layer]", n_layers=1, layers=kinds)
    from roofcast.graph_import.llm.load import load_llm

    try:
        return load_llm(spec.draft)
    except (PredictionError, ValueError) as e:
        raise PredictionError(f"draft model {spec.draft!r}: {e}") from None


def verify_step(step: Step, spec: SpecDecode) -> tuple[Step, Step | None]:
    """The target's step with each decode segment (1 new token, sampled) verifying ``K + 1``
    tokens, and the draft's step (those decode segments; None: the step decodes nothing)."""
    target, draft = [], []
    for s in step.segments:
        if s.new_tokens == 1 and s.emits:
            target.append(Segment(s.batch, spec.k + 1, s.context + spec.k))
            draft.append(s)
        else:
            target.append(s)
    return (Step(step.label, tuple(target)),
            Step(step.label, tuple(draft)) if draft else None)


def time_spec_steps(arch, hws: Sequence, steps: Sequence[Step], dtypes, profile,
                    estimator, spec: SpecDecode | None, *, ep: int = 1,
                    draft=None, moe=None) -> StepTimes:
    """``time_steps`` of ``steps`` (``spec`` None), else of their verify steps plus ``K`` x
    their draft steps (``draft``: the draft arch, default ``draft_arch``); the kernel table
    is the target's; ``moe``: the target's expert routing (``kernels.MoeRouting``)."""
    if spec is None:
        return time_steps(arch, hws, steps, dtypes, profile, estimator, ep=ep, moe=moe)
    pairs = [verify_step(s, spec) for s in steps]
    timed = time_steps(arch, hws, [t for t, _ in pairs], dtypes, profile, estimator, ep=ep,
                       moe=moe)
    drafts = [d for _, d in pairs if d is not None]
    if not drafts:
        return timed
    model = draft if draft is not None else draft_arch(arch, spec)
    dt = time_steps(model, hws, drafts, dtypes, profile, estimator)
    rows = [timed.labels.index(d.label) for d in drafts]
    sums = {}
    for c in ("time_s", "lower_s", "upper_s"):
        arr = getattr(timed, c).copy()
        arr[rows] += spec.k * getattr(dt, c)
        sums[c] = arr
    return replace(timed, **sums, notes=tuple(sorted({*timed.notes, *dt.notes})))
