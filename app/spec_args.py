"""The speculative-decoding flags of ``llm`` and ``plan --mode serve --rate``, and their parse.

``--spec-decode draft:MODEL:K|mtp:K`` names who drafts K tokens per step; ``--spec-accept A``
the acceptance rate per drafted token (0..1). Both or neither: ``spec_decode`` refuses an
acceptance rate without a drafter. Light on purpose: the parser is built for every call.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_spec_args(group: argparse.ArgumentParser | Any, what: str) -> None:
    """``--spec-decode`` and ``--spec-accept`` on ``group``; ``what`` starts the help line."""
    group.add_argument("--spec-decode", metavar="draft:MODEL:K|mtp:K",
                       help=f"{what}: a draft model (or the model's MTP layer) proposes K "
                            "tokens per step, the model verifies them (needs --spec-accept)")
    group.add_argument("--spec-accept", type=float, metavar="A",
                       help="acceptance rate per drafted token, 0..1")


def spec_decode(args: argparse.Namespace):
    """``--spec-decode`` with ``--spec-accept`` as a ``SpecDecode`` (None: neither given)."""
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.llm.spec_decode import parse_spec

    if args.spec_decode is None:
        if args.spec_accept is not None:
            raise PredictionError("--spec-accept needs --spec-decode draft:MODEL:K or mtp:K")
        return None
    return parse_spec(args.spec_decode, args.spec_accept)
