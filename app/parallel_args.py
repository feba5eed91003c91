"""The multi-device flags of ``predict``, ``compare``, ``llm`` and ``plan``, and their checks.

Where the run happens: ``--system ID`` (a catalog system, ``roofcast systems list``, or a what-if
``hgx-h100:nodes=4``) or ``--hw ID --devices N`` (N of a catalog device, as
``hw_catalog.systems.resolve_system`` builds them: NVSwitch for SXM parts, NVLink bridge pairs
or PCIe otherwise, nodes of 8 beyond 8 devices). How the model is split: ``--dp/--tp/--pp/--ep``,
``--micro-batches``, ``--zero 0|1|2|3``, ``--sequence-parallel``, ``--recompute`` and
``--global-batch N`` (the samples of one whole step); a degree left out is completed by
``predictor.parallel.plan.complete_plan`` (dp = devices / (tp x pp)).

No parallel flag: the command runs on one device exactly as before. Light on purpose (no numpy,
pandas): the parser is built for every ``roofcast`` call.
"""

from __future__ import annotations

import argparse
from typing import Any

from roofcast.app.argtypes import positive_int, system_list, zero_stage

#: plan flags (argparse dest) -> ``ParallelPlan`` field.
PLAN_FLAGS: dict[str, str] = {"dp": "dp", "tp": "tp", "pp": "pp", "ep": "ep",
                              "micro_batches": "micro_batches", "zero": "zero",
                              "sequence_parallel": "sequence_parallel",
                              "recompute": "recompute", "tp_comm_overlap": "tp_comm_overlap"}
#: ``--tp-comm-overlap on|off`` -> ``ParallelPlan.tp_comm_overlap``.
ON_OFF: dict[str, bool] = {"on": True, "off": False}
#: serving degrees (``llm``): ``ServingConfig`` fields.
SERVING_FLAGS: tuple[str, ...] = ("tp", "pp", "ep")
SYSTEM_HELP = ("multi-device system: a catalog id (roofcast systems list) or a what-if "
               "BASE:key=value,... such as hgx-h100:nodes=4")


def add_placement_args(p: argparse.ArgumentParser, *, several: bool = False) -> None:
    """``--system`` (``several``: a comma-separated list) and ``--devices N`` (with ``--hw``)."""
    if several:
        p.add_argument("--system", type=system_list, metavar="A,B",
                       help=SYSTEM_HELP + "; several comma-separated to compare them")
    else:
        p.add_argument("--system", metavar="ID", help=SYSTEM_HELP)
    p.add_argument("--devices", type=positive_int, metavar="N",
                   help="with --hw: N of that device as one system (NVSwitch / NVLink pairs / "
                        "PCIe from its catalog links; nodes of 8 beyond 8)")


def add_degree_args(p: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """``--dp/--tp/--pp/--ep`` (those in ``names``): parallel degrees, positive integers."""
    helps = {"dp": "data-parallel replicas (default: devices / (tp x pp))",
             "tp": "tensor-parallel ranks (Megatron: heads and GEMMs split; default 1)",
             "pp": "pipeline stages (contiguous layers, 1F1B schedule; default 1)",
             "ep": "expert-parallel ranks of MoE layers (default 1)"}
    for name in names:
        p.add_argument(f"--{name}", type=positive_int, metavar="N", help=helps[name])


def add_training_plan_args(p: argparse.ArgumentParser, *, several: bool) -> None:
    """Placement, degrees and the plan flags of ``predict`` / ``compare`` (``several``:
    ``--system A,B``)."""
    group = p.add_argument_group("several devices (any of these: a multi-device prediction)")
    add_placement_args(group, several=several)
    add_degree_args(group, ("dp", "tp", "pp", "ep"))
    group.add_argument("--micro-batches", type=positive_int, metavar="M",
                       help="micro-batches per replica per step (gradient accumulation; the "
                            "pipeline's m; default 1)")
    group.add_argument("--zero", type=zero_stage, metavar="0|1|2|3",
                       help="ZeRO stage over the data-parallel group (default 0)")
    group.add_argument("--sequence-parallel", action="store_true", default=None,
                       help="split norms/dropout over the sequence in the tensor group")
    group.add_argument("--recompute", action="store_true", default=None,
                       help="full activation recomputation (keep each layer's input only)")
    add_tp_overlap_arg(group)
    group.add_argument("--global-batch", type=positive_int, metavar="N",
                       help="samples of one whole step over all replicas (default: dp x "
                            "micro-batches, one sample per micro-batch)")
    group.add_argument("--seq", type=positive_int, metavar="N",
                       help="tokens per sample: an LLM config's sequence length (default 4096, "
                            "capped at its context); an ONNX model: its 'sequence' dim")


def add_tp_overlap_arg(p: argparse.ArgumentParser | Any) -> None:
    """``--tp-comm-overlap on|off``: Transformer Engine's chunked overlap of the tensor group's
    all-gathers / reduce-scatters with GEMMs (with --sequence-parallel; default on)."""
    p.add_argument("--tp-comm-overlap", choices=tuple(ON_OFF), default=None, metavar="on|off",
                   help="overlap tensor-parallel all-gathers / reduce-scatters with the "
                        "neighbouring GEMMs in tp chunks, as Megatron-Core with Transformer "
                        "Engine's tp_comm_overlap (needs --sequence-parallel; default on)")


def plan_flags_given(args: argparse.Namespace) -> dict[str, Any]:
    """The plan fields the user set (``PLAN_FLAGS`` not left at None)."""
    given = {field: getattr(args, dest) for dest, field in PLAN_FLAGS.items()
             if getattr(args, dest, None) is not None}
    if "tp_comm_overlap" in given:
        given["tp_comm_overlap"] = ON_OFF[given["tp_comm_overlap"]]
    return given


def is_parallel(args: argparse.Namespace) -> bool:
    """Whether any multi-device flag was given (else: the one-device command, unchanged)."""
    return bool(plan_flags_given(args)) or any(
        getattr(args, name, None) is not None for name in ("system", "devices", "global_batch"))


def placement(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """``system`` / ``hw`` / ``devices`` keywords of the run, checked: exactly one of
    ``--system`` and ``--hw``, ``--devices`` only with ``--hw`` (a what-if such as
    ``hgx-h100:nodes=4`` changes a system's size). Raises ``PredictionError``."""
    from roofcast.predictor.errors import PredictionError

    if args.system is not None and args.hw is not None:
        raise PredictionError(f"give --system ID or --hw ID --devices N, not both (roofcast "
                              f"{command} takes the devices of the system)")
    if args.system is not None and args.devices is not None:
        raise PredictionError("--devices goes with --hw; a system has its own devices (resize "
                              "it with a what-if such as --system hgx-h100:nodes=4)")
    if args.system is None and args.hw is None:
        raise PredictionError("give --system ID (roofcast systems list) or --hw ID --devices N")
    if args.system is None and args.devices is None:
        hint = _devices_hint(args)
        raise PredictionError(f"several devices need --devices N with --hw (e.g. --hw "
                              f"{args.hw} --devices {hint}), or --system ID")
    return {"system": args.system, "hw": args.hw, "devices": args.devices}


def _devices_hint(args: argparse.Namespace) -> int:
    """The device count the given degrees multiply to (8 when none is given)."""
    product = 1
    for name in ("dp", "tp", "pp"):
        product *= getattr(args, name, None) or 1
    return product if product > 1 else 8


def one_device_only(args: argparse.Namespace, command: str, flags: tuple[str, ...]) -> None:
    """PredictionError when a one-device-only flag (``flags``: argparse dests) is set on the
    multi-device path, naming what to use instead."""
    from roofcast.predictor.errors import PredictionError

    instead = {"batch": "--global-batch N (the whole step's samples)",
               "max_batch": "roofcast plan, which reports each plan's memory",
               "inter_op": "nothing: stages run their kernels in order",
               "threads": "nothing: CPU threads are a one-device setting"}
    for dest in flags:
        if getattr(args, dest, None) not in (None, False):
            flag = "--" + dest.replace("_", "-")
            raise PredictionError(f"{flag} is a one-device option; on several devices use "
                                  f"{instead.get(dest, 'the plan flags')} (roofcast {command})")
