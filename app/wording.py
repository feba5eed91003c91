"""The library's user messages in the app's words.

The library is shared with the CLI, and where a message tells the user what to do it names the
command-line flags (``--dim NAME=VALUE``, ``--batch N``, ``--allow-incomplete``,
``--objective``). In the app those flags do not exist: the same advice points at the app's own
controls. ``in_app_words`` rewrites a message with ``CLI_TO_APP`` (pattern -> replacement,
applied in order, specific patterns first); ``cli_flags`` finds any flag left, for tests.

``incomplete_message`` is the app's own message for a model that cannot be fully costed (the
library's ``predictor.workload.check_complete`` says the same with flags).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: (pattern, replacement) in the order applied; a flag the table does not know stays visible
#: (``cli_flags`` finds it), never silently dropped.
CLI_TO_APP: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Bind dims with --dim NAME=VALUE \(or --batch N\), or accept an incomplete "
                r"prediction \(--allow-incomplete\) that leaves that work out"),
     "Give every symbolic dim a size on the Model page (the batch: Batch size); the app "
     "predicts only models whose every node is costed"),
    (re.compile(r"\(--dim (?P<first>[^\s=,()]+)=\d+(?:, --dim [^\s=,()]+=\d+)*\)"),
     "(give each a size on the Model page)"),
    (re.compile(r"e\.g\. --dim (?P<name>[^\s=,()]+)=(?P<value>\d+)"),
     r"e.g. \g<name> = \g<value> on the Model page"),
    (re.compile(r"(?:with|pass e\.g\.) --dim (?:NAME|[^\s=,()]+)=(?:N|VALUE|\d+)"),
     "on the Model page"),
    (re.compile(r"the --dim values"), "the dim sizes on the Model page"),
    (re.compile(r"--dim (?:NAME|[^\s=,()]+)=(?:N|VALUE|\d+)"), "a dim size on the Model page"),
    (re.compile(r"--batch N"), "Batch size"),
    (re.compile(r"use --objective latency"), "choose the latency objective"),
)
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def in_app_words(message: str) -> str:
    """``message`` with the CLI's flags replaced by the app's controls (``CLI_TO_APP``)."""
    for pattern, replacement in CLI_TO_APP:
        message = pattern.sub(replacement, message)
    return message


def cli_flags(message: str) -> list[str]:
    """The command-line flags (``--name``) ``message`` still names."""
    return FLAG.findall(message)


def incomplete_message(model: str, unbound: tuple[str, ...], unresolved: Mapping[str, str],
                       unsupported: Mapping[str, int]) -> str | None:
    """Why ``model`` cannot be predicted in full, in the app's words (None when it can):
    unbound symbolic dims (give them a size on the Model page), nodes without concrete shapes
    (the first one and its reason), op types without a cost rule."""
    problems = []
    if unbound:
        problems.append(f"its symbolic dims {', '.join(unbound)} have no size: give each one on "
                        "the Model page")
    if unresolved and not unbound:  # with unbound dims, unresolved nodes follow from them
        name = sorted(unresolved)[0]
        problems.append(f"{len(unresolved)} node(s) have no concrete shapes (e.g. {name!r}: "
                        f"{in_app_words(unresolved[name])})")
    if unsupported:
        ops = ", ".join(f"{k} ×{v}" for k, v in sorted(unsupported.items()))
        problems.append(f"roofcast has no cost rule for the op types {ops}")
    if not problems:
        return None
    return (f"{model} cannot be fully costed, and the app predicts only models whose every "
            f"node is costed: " + "; ".join(problems) + ". The Model page lists the nodes.")


def inline_code(text: str | None, missing: str = "none chosen") -> str:
    """``text`` as Markdown inline code, or ``missing`` in plain (italic) words when there is
    none: an empty code span shows its two backticks."""
    return f"`{text}`" if text else f"*{missing}*"
