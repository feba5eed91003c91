"""A model reference -> how it is sharded over several devices and its ``ParallelSource``.

``model_kind`` says ``llm`` (an ``LLMArch``, a bundled name, Hugging Face id, ``llm:NAME`` or a
``config.json``: Megatron-LM on the architecture, ``parallel.llm_source``), ``graph`` (an ONNX
file, zoo name or ``Model``: sharded from the graph, ``parallel.graph_source``) or ``source`` (a
``ParallelSource`` used as is); ``parallel_source`` builds it. Shared by the API
(``roofcast.parallel_api``) and the sweeps below it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofcast.models import Model, load_model
from roofcast.predictor.errors import PredictionError

if TYPE_CHECKING:
    from roofcast.predictor.parallel.types import ParallelSource

#: tokens per training sample when an LLM run gives none (capped at the model's context).
DEFAULT_SEQ_TOKENS = 4096
#: a model reference that starts so is an LLM config (``llm:gpt2``: the bundled config, not the
#: zoo's ONNX export of the same name).
LLM_PREFIX = "llm:"
#: default precision of an LLM training run (mixed precision as Megatron-LM trains).
LLM_TRAIN_PRECISION = "bf16"


def is_source(model: Any) -> bool:
    """Whether ``model`` is already a ``ParallelSource`` (it has ``facts`` and ``build``)."""
    return hasattr(model, "facts") and callable(getattr(model, "build", None))


def model_kind(model: Any, *, onnx_decoders: bool = False) -> str:
    """``"llm"``, ``"graph"`` or ``"source"`` (a ``ParallelSource``, used as is): how
    ``model`` is sharded.

    An ``LLMArch``, a bundled LLM name or Hugging Face id (when no zoo model has that name;
    ``llm:NAME`` forces the LLM config, e.g. ``llm:gpt2``), a ``config.json`` (or a folder
    holding one) -> ``llm``; a ``Model``, a zoo name (``zoo:NAME`` forces the zoo), any other
    ONNX file -> ``graph``; with ``onnx_decoders`` an ONNX file that
    ``load_llm`` reads as a decoder -> ``llm`` (``roofcast plan`` does this). A name that is
    neither is refused naming both lists."""
    from roofcast.graph_import.errors import LLMConfigError
    from roofcast.graph_import.llm.arch import LLMArch
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.training_data import zoo

    if is_source(model):
        return "source"
    if isinstance(model, LLMArch):
        return "llm"
    if isinstance(model, Model | bytes):
        return "graph"
    text = str(model)
    if text.startswith(LLM_PREFIX):
        return "llm"
    path = Path(text)
    if path.exists():
        if path.is_dir() or path.suffix.lower() == ".json":
            return "llm"
        if onnx_decoders:
            try:
                load_llm(path)
                return "llm"
            except LLMConfigError:
                return "graph"
        return "graph"
    if text.startswith("zoo:") or text in zoo.list_models():
        return "graph"
    try:
        load_llm(text)
    except LLMConfigError as exc:
        raise PredictionError(
            f"unknown model {text!r}: no file, no zoo model ({', '.join(zoo.list_models())}) "
            f"and no LLM config ({exc})") from None
    return "llm"


def parallel_source(model: Any, *, mode: str = "train", precision: str | None = None,
                    optimizer: str = "adam", runtime: str | None = None,
                    seq_tokens: int | None = None, dims: Mapping[str, int] | None = None,
                    onnx_decoders: bool = False, **settings: Any) -> ParallelSource:
    """The ``ParallelSource`` of ``model`` (``model_kind``).

    LLM: ``LLMParallelSource(arch, seq_tokens=seq_tokens or min(4096, context),
    precision=precision or "bf16", runtime, optimizer)``; ``dims``/``settings`` do not apply.
    Graph: ``GraphParallelSource(model.graph_at, run_config(graph, precision (fp32), mode,
    optimizer, runtime, **settings), name)`` — ``dims`` bind the model's other dims (the batch
    is each micro-batch's, set by the plan); ``seq_tokens`` binds a ``sequence`` dim."""
    kind = model_kind(model, onnx_decoders=onnx_decoders)
    if kind == "source":
        return model
    if kind == "llm":
        from roofcast.graph_import.llm.load import load_llm
        from roofcast.predictor.parallel.llm_source import LLMParallelSource

        extra = sorted(k for k, v in settings.items() if v is not None) + (["dims"] if dims else [])
        if extra:
            flags = ", ".join("--dim" if k == "dims" else "--" + k.replace("_", "-")
                              for k in extra)  # library words: flags (api_words rewrites them)
            raise PredictionError(f"{flags}: not for an LLM config (its layers come from the "
                                  "config, not from an import); give --seq, --precision, "
                                  "--optimizer, --runtime")
        arch = model if not isinstance(model, str | Path) else load_llm(
            str(model).removeprefix(LLM_PREFIX) if isinstance(model, str) else model)
        seq = seq_tokens or min(DEFAULT_SEQ_TOKENS, arch.max_context)
        return LLMParallelSource(arch, seq_tokens=seq,
                                 precision=precision or LLM_TRAIN_PRECISION, runtime=runtime,
                                 optimizer=optimizer)
    from roofcast.predictor.config import run_config
    from roofcast.predictor.parallel.graph_source import GraphParallelSource

    bound = {**(dims or {}), **({} if seq_tokens is None else {"sequence": seq_tokens})}
    m = load_model(model.removeprefix("zoo:") if isinstance(model, str) else model, bound)
    config = run_config(m.graph, precision=precision or "fp32", mode=mode, optimizer=optimizer,
                        runtime=runtime, **settings)
    return GraphParallelSource(m.graph_at, config, name=m.name)
