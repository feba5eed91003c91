"""The Python surface's words in error messages: library messages name a setting by its
command-line flag (``--dim sequence=128``, ``--allow-incomplete``: the CLI prints them as they
are, the app rewrites them in ``app/wording.py``); ``roofcast.X`` rewrites them to the
keyword that sets it (``dims={'sequence': 128}``, ``allow_incomplete=True``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

#: command-line flag -> the Python keyword that sets the same thing.
KEYWORDS: dict[str, str] = {
    "seq": "seq_tokens", "from": "sources", **{f: f.replace("-", "_") for f in (
        "batch", "allow-incomplete", "objective", "hw", "system", "devices", "global-batch",
        "precision", "mode", "runtime", "estimator", "optimizer", "threads", "inter-op",
        "fusion", "dp", "tp", "pp", "ep", "micro-batches", "zero", "sequence-parallel",
        "recompute", "max-batch", "input-tokens", "output-tokens", "concurrency", "weights",
        "kv-cache", "activations", "baseline", "cap")},
}
#: on/off flags: ``--recompute`` is ``recompute=True``.
SWITCHES = frozenset({"allow-incomplete", "inter-op", "sequence-parallel", "recompute"})
#: flags whose value is a word (``--objective latency`` -> ``objective='latency'``).
WORD_VALUES = frozenset({"objective", "hw", "system", "mode", "runtime", "estimator",
                         "precision", "optimizer", "baseline"})

_FLAG = "|".join(sorted(map(re.escape, KEYWORDS), key=len, reverse=True))
_DIM = re.compile(r"(?<![\w-])--dim (?P<name>[^\s=,()]+)=(?P<value>[^\s,();]+)")
_FLAG_RE = re.compile(rf"(?<![\w-])--(?P<flag>{_FLAG})(?![\w-])(?: (?P<value>[A-Z][A-Z0-9_]*"
                      r"|\d+|[a-z][\w.:-]*))?")


def python_words(message: str) -> str:
    """``message`` with each known flag replaced by its keyword (module docstring)."""
    message = _DIM.sub(lambda m: f"dims={{'{m['name']}': {m['value']}}}", message)
    message = re.sub(r"(?<![\w-])--dim(?![\w-])", "dims=", message)
    return _FLAG_RE.sub(_keyword, message)


def _keyword(m: re.Match) -> str:
    flag, value = m["flag"], m["value"]
    keyword = KEYWORDS[flag]
    if flag in SWITCHES:
        return f"{keyword}=True" + (f" {value}" if value else "")
    if value is None:
        return f"{keyword}="
    if value[0].islower():  # a word: quoted only where the flag takes a word
        return f"{keyword}='{value}'" if flag in WORD_VALUES else f"{keyword}= {value}"
    return f"{keyword}={value}"


def python_surface(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose user errors (the packages' own error types) speak ``python_words``."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if isinstance(exc, _user_errors()) and exc.args and isinstance(exc.args[0], str):
                exc.args = (python_words(exc.args[0]), *exc.args[1:])
            raise

    return call


def _user_errors() -> tuple[type[BaseException], ...]:
    from roofcast.graph_import.errors import ModelImportError
    from roofcast.hw_catalog.errors import HardwareSpecError
    from roofcast.predictor.errors import PredictionError

    return ModelImportError, PredictionError, HardwareSpecError
