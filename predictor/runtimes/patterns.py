"""Kernel-mapping patterns: registered functions that say which ONNX nodes a runtime runs as one
kernel, which launch none, which kernel replaces a group, and which kernels it adds.

A pattern is ``fn(graph, plan) -> plan``: it reads the imported ``Graph`` and the ``KernelPlan``
built by the patterns before it, and returns a new plan (plans are frozen). Profiles name
patterns in their TOML (``patterns``, ``fusion_patterns``); ``register_pattern("name")`` adds
one. A new runtime behaviour is a new registered function, never a branch in an existing one.
``rules.build_plan(graph, profile, fusion)`` runs a profile's patterns in order.

Groups are merged, never overwritten: ``KernelPlan.merged(members, order)`` joins every group
that shares a node with ``members`` into one (head = the member first in topological order), so
patterns compose (a MatMul+bias group and a later GELU epilogue become one kernel). A group with
a ``replace`` kernel (fused attention) is *locked*: later patterns leave its members alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from roofcast.graph_import.types import Graph
from roofcast.predictor.runtimes.rules_graph import topo_order


@dataclass(frozen=True)
class Kernel:
    """One kernel's work, priced like a workload row.

    ``bytes_read`` / ``bytes_written``: bytes at the tensors' own ONNX dtype ``dtype`` (the
    workload rescales them to the run's precision like any float tensor); ``engine``: an
    ``Engine`` value; ``gemm``: (batch, m, n, k) when the kernel is one GEMM, else None.
    """

    op_type: str
    family: str
    engine: str
    flops: float
    bytes_read: float
    bytes_written: float
    dtype: str = "float"
    gemm: tuple[float, float, float, float] | None = None


@dataclass(frozen=True)
class ExtraKernel:
    """A kernel the runtime launches that the graph has no node for (e.g. the scale of the
    attention scores an export folded into q and k). It runs right after node ``after``, whose
    place in the step DAG carries its time; ``label`` makes its row key unique."""

    after: str
    label: str
    kernel: Kernel


@dataclass(frozen=True)
class KernelPlan:
    """What the runtime launches for a graph, relative to one kernel per costed node.

    ``groups``: head node name -> member node names (head first): one kernel each.
    ``free``: node names that launch no kernel (views, folded pads).
    ``replace``: head -> the kernel that runs for its group instead of the members' summed work
    (fused attention: flops of both matmuls, bytes of Q, K, V and O only); such groups are locked.
    ``extra``: kernels the runtime adds. ``notes``: one phrase per pattern that changed
    something ("24 erf-GELU chains as one kernel"). ``attention_score_passes``: the profile's
    setting, read by the ``attention-score-passes`` pattern.
    """

    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    free: frozenset[str] = frozenset()
    replace: Mapping[str, Kernel] = field(default_factory=dict)
    extra: tuple[ExtraKernel, ...] = ()
    notes: tuple[str, ...] = ()
    attention_score_passes: int = 0

    def group_of(self, name: str) -> str | None:
        """The head of the group holding ``name`` (None when it runs alone)."""
        for head, members in self.groups.items():
            if name in members:
                return head
        return None

    def locked(self) -> frozenset[str]:
        """Nodes inside a group with a ``replace`` kernel: no later pattern may regroup them."""
        return frozenset(m for h in self.replace for m in self.groups.get(h, (h,)))

    def merged(self, members: Iterable[str], order: Mapping[str, int],
               kernel: Kernel | None = None) -> KernelPlan:
        """The plan with ``members`` in one group, joined with every group sharing a node with
        them; ``kernel`` (optional) replaces the group's work. Free members are dropped."""
        wanted = {m for m in members if m not in self.free}
        groups = dict(self.groups)
        repl = dict(self.replace)
        for head, ms in list(groups.items()):
            if wanted & set(ms):
                wanted |= set(ms)
                del groups[head]
                if head in repl and kernel is None:
                    kernel = repl[head]
                repl.pop(head, None)
        if len(wanted) < 2 and kernel is None:
            return self
        ordered = tuple(sorted(wanted, key=lambda m: order[m]))
        groups[ordered[0]] = ordered
        if kernel is not None:
            repl[ordered[0]] = kernel
        return replace(self, groups=groups, replace=repl)

    def with_free(self, names: Iterable[str]) -> KernelPlan:
        """The plan with ``names`` launching no kernel."""
        return replace(self, free=self.free | frozenset(names))

    def with_extra(self, extra: Iterable[ExtraKernel]) -> KernelPlan:
        return replace(self, extra=self.extra + tuple(extra))

    def with_note(self, note: str) -> KernelPlan:
        return replace(self, notes=(*self.notes, note))


Pattern = Callable[[Graph, KernelPlan], KernelPlan]
PATTERNS: dict[str, Pattern] = {}


def register_pattern(name: str) -> Callable[[Pattern], Pattern]:
    """Decorator: register ``fn`` as the kernel-mapping pattern ``name``."""
    def deco(fn: Pattern) -> Pattern:
        if name in PATTERNS:
            raise ValueError(f"pattern {name!r} registered twice")
        PATTERNS[name] = fn
        return fn
    return deco


def plan_summary(profile_name: str, plan: KernelPlan) -> str:
    """One line naming what the plan changed ("pytorch-eager: 48 bias adds in addmm, ...")."""
    if not plan.notes:
        return f"{profile_name}: one kernel per costed node (no pattern changed the graph)"
    return f"{profile_name}: " + ", ".join(plan.notes)


def merge_each(graph: Graph, plan: KernelPlan,
               matches: Iterable[tuple[Iterable[str], Kernel | None]], note: str) -> KernelPlan:
    """``plan`` with each match ``(members, kernel)`` merged into one group (``kernel``, when
    not None, replaces its work), skipping a match that touches a locked node; with the note
    ``"<count> <note>"`` when any merged. The loop every grouping pattern shares."""
    order = topo_order(graph)
    count = 0
    for members, kernel in matches:
        members = tuple(members)
        if set(members) & plan.locked():
            continue
        plan = plan.merged(members, order, kernel=kernel)
        count += 1
    return plan.with_note(f"{count} {note}") if count else plan
