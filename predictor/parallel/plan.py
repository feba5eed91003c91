"""Checking and completing a parallel plan against a model and a system.

``check_plan`` refuses a plan that cannot run (``ParallelPlanError`` naming the degree and
the values that work) and returns notes: ``dp * tp * pp`` = the devices; ``dp *
micro_batches`` divides the global batch; ``tp``, ``pp`` (even stages) and ``ep`` (``ep | dp
* tp``) by ``sharding``'s one check; a ``tp`` beyond a node is noted. Facts the source does
not know (``None``) skip their check with a note. ``complete_plan`` fills ``dp``.
"""

from __future__ import annotations

from roofcast.predictor.parallel.types import (
    PARALLEL_MODES,
    ModelFacts,
    ParallelPlan,
    ParallelPlanError,
)
from roofcast.predictor.sharding import check_ep, check_pp, check_tp, choices, divisors

PLAN_FIELDS: tuple[str, ...] = ("dp", "tp", "pp", "ep", "micro_batches", "zero",
                                "sequence_parallel", "recompute", "tp_comm_overlap")


def _check_global_batch(global_batch: object) -> int:
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise ParallelPlanError(f"global batch must be a positive integer, got {global_batch!r}")
    return global_batch


def _check_devices(plan: ParallelPlan, n_devices: int) -> None:
    if plan.n_devices != n_devices:
        rest = plan.tp * plan.pp
        hint = (f"use dp={n_devices // rest}" if n_devices % rest == 0 else
                f"choose tp x pp dividing {n_devices} (tp={plan.tp} x pp={plan.pp} = {rest} "
                "does not)")
        raise ParallelPlanError(
            f"dp={plan.dp} x tp={plan.tp} x pp={plan.pp} = {plan.n_devices} devices but the "
            f"system has {n_devices}; {hint}")


def _check_batch(plan: ParallelPlan, global_batch: int) -> None:
    if global_batch % plan.dp:
        ok = [d for d in divisors(global_batch) if d <= plan.n_devices]
        raise ParallelPlanError(f"dp={plan.dp} does not divide the global batch {global_batch}; "
                                f"use dp in {choices(ok)} (with tp x pp making up the devices)")
    per_replica = global_batch // plan.dp
    if per_replica % plan.micro_batches:
        raise ParallelPlanError(
            f"micro_batches={plan.micro_batches} does not divide the {per_replica} samples of "
            f"each of the dp={plan.dp} replicas (global batch {global_batch}); use "
            f"micro_batches in {choices(divisors(per_replica))}")


def _check_tp(plan: ParallelPlan, facts: ModelFacts, devices_per_node: int | None) -> list[str]:
    notes = []
    if facts.heads is None and plan.tp > 1:
        notes.append(f"{facts.name}: attention heads unknown; tp={plan.tp} not checked "
                     "against them")
    check_tp(facts.name, plan.tp, facts.heads, facts.kv_heads)
    kv = facts.kv_heads
    if kv is not None and kv < plan.tp:
        notes.append(f"tp={plan.tp} > {kv} KV heads: each KV head is replicated on "
                     f"{plan.tp // kv} tensor ranks")
    if devices_per_node is not None and plan.tp > devices_per_node:
        notes.append(f"tp={plan.tp} spans more than the {devices_per_node} devices of a node: "
                     "tensor-parallel collectives cross the NICs (Megatron-LM keeps tp within "
                     "a node)")
    return notes


def _check_pp(plan: ParallelPlan, facts: ModelFacts) -> list[str]:
    if facts.layers is None:
        return [f"{facts.name}: layer count unknown; pp={plan.pp} not checked against it"] \
            if plan.pp > 1 else []
    check_pp(facts.name, plan.pp, facts.layers, even=True)
    return []


def check_model_degrees(facts: ModelFacts, *, tp: int = 1, pp: int = 1, ep: int = 1) -> None:
    """Refuse degrees the model alone cannot take — tp against the (KV) heads, pp against the
    layers, ep against the experts — before anything about devices or batch, so the reason
    given is the model's ("tp=5 does not divide the 12 heads of bert_base ...")."""
    probe = ParallelPlan(tp=tp, pp=pp, ep=ep)
    _check_tp(probe, facts, None)
    _check_pp(probe, facts)
    check_ep(facts.name, ep, facts.experts)


def _check_mode(plan: ParallelPlan, mode: str) -> list[str]:
    if mode not in PARALLEL_MODES:
        raise ParallelPlanError(f"mode must be one of {', '.join(PARALLEL_MODES)}, got {mode!r}")
    notes = []
    if mode == "infer":
        if plan.zero:
            raise ParallelPlanError(f"zero={plan.zero} shards training state (gradients, "
                                    "optimizer); in infer mode use zero=0")
        if plan.recompute:
            raise ParallelPlanError("recompute re-runs the forward in the backward; in infer "
                                    "mode there is no backward: leave recompute off")
    if plan.zero and plan.dp == 1:
        notes.append(f"zero={plan.zero} with dp=1 shards over one replica: no saving")
    if plan.sequence_parallel and plan.tp == 1:
        notes.append("sequence parallelism needs tp > 1; with tp=1 it changes nothing")
    if plan.pp > 1 and plan.micro_batches < plan.pp:
        notes.append(f"micro_batches={plan.micro_batches} < pp={plan.pp}: the pipeline never "
                     "fills (bubble fraction (p-1)/(m+p-1) = "
                     f"{(plan.pp - 1) / (plan.micro_batches + plan.pp - 1):.0%})")
    return notes


def check_plan(plan: ParallelPlan, facts: ModelFacts, *, n_devices: int, global_batch: int,
               mode: str, devices_per_node: int | None = None) -> tuple[str, ...]:
    """Refuse a plan that cannot run (``ParallelPlanError`` naming the degree and what to use);
    return notes on unchecked facts and consequences (see the module docstring).

    ``devices_per_node`` (optional): note a tensor group that leaves the node.
    """
    if not isinstance(plan, ParallelPlan):
        raise ParallelPlanError(f"expected a ParallelPlan, got {type(plan).__name__}")
    global_batch = _check_global_batch(global_batch)
    notes = _check_mode(plan, mode)
    # the model's reasons first (as check_model_degrees), then the devices and the batch
    notes += _check_tp(plan, facts, devices_per_node)
    notes += _check_pp(plan, facts)
    check_ep(facts.name, plan.ep, facts.experts)
    _check_devices(plan, n_devices)
    _check_batch(plan, global_batch)
    group = plan.dp * plan.tp
    check_ep(facts.name, plan.ep, facts.experts, group=group, group_text=f"dp x tp = {group}")
    return tuple(notes)


def complete_plan(n_devices: int, **given: object) -> ParallelPlan:
    """A plan from the degrees given (``None`` = not given); ``dp`` defaults to
    ``n_devices / (tp * pp)``. Unknown keys and a ``tp * pp`` that does not divide the devices
    are refused."""
    unknown = sorted(set(given) - set(PLAN_FIELDS))
    if unknown:
        raise ParallelPlanError(f"unknown plan field(s) {', '.join(unknown)}; use "
                                f"{', '.join(PLAN_FIELDS)}")
    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise ParallelPlanError(f"devices must be a positive integer, got {n_devices!r}")
    fields = {k: v for k, v in given.items() if v is not None}
    if "dp" not in fields:
        tp, pp = fields.get("tp", 1), fields.get("pp", 1)
        ParallelPlan(tp=tp, pp=pp)  # type: ignore[arg-type]  # validates the degrees first
        rest = tp * pp  # type: ignore[operator]
        if n_devices % rest:
            raise ParallelPlanError(
                f"tp={tp} x pp={pp} = {rest} does not divide the {n_devices} devices, so no "
                f"data-parallel degree fills them; choose tp x pp in "
                f"{choices(divisors(n_devices))}")
        fields["dp"] = n_devices // rest
    plan = ParallelPlan(**fields)  # type: ignore[arg-type]
    _check_devices(plan, n_devices)
    return plan
