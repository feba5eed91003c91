"""roofcast: performance prediction and what-if simulation for deep learning models.

The repository's top-level folders (``graph_import``, ``hw_catalog``, ``predictor``,
``training_data``, ``app``) install as subpackages of this one package.

The Python API (``roofcast.api``, imported on first attribute access so that ``import
roofcast`` stays cheap; its errors name keywords such as ``dims=``, not command-line flags):

* ``load_model(path_or_zoo_name_or_bytes, **dims)`` -> ``Model`` (dims bound here, batch 1
  by default);
* ``device(id_or_whatif_spec)`` -> ``HardwareSpec`` (``"h100-sxm:mem_bw_scale=2"``);
* ``predict(model, hw, **config)`` -> ``Prediction`` (``total_ms``, ``per_op``, ``by_bound``, ...);
* ``compare(model, hws, **config)``, ``sweep(model, hws, batches, ...)`` -> DataFrames;
* ``advise(model, hw, objective)`` -> ``Advice``; ``train(sources)`` -> a fitted estimator;
* ``runtimes()`` -> the execution profiles (``runtime=NAME`` on predict/compare/sweep/advise);
* ``make_estimator(name, **params)`` -> an estimator object for ``estimator=``;
* ``llm(model, hw, input_tokens=, output_tokens=, batch=|concurrency=, weights=, kv_cache=,
  runtime=)`` -> a ``ServingPrediction`` (TTFT, TPOT, tokens/s, memory fit) for one device, a
  DataFrame for a list; ``llm_configs()`` -> the bundled LLM configs.
* several devices: ``systems()`` -> the catalog's multi-device systems (DataFrame),
  ``system(id_or_whatif)`` -> ``SystemSpec`` (``"hgx-h100:nodes=4"``);
  ``predict(model, system=..., tp=..., pp=..., global_batch=...)`` (or ``hw=..., devices=N``)
  -> a ``ParallelPrediction`` (step time = compute + exposed communication + bubble +
  optimizer, per-device memory); ``plan(model, system, global_batch=..., mode=)`` -> the
  plans ranked (``PlanSearch``; ``mode="serve"``: a DataFrame of serving plans).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

#: the API's names, all defined in ``roofcast.api``.
API: tuple[str, ...] = ("ExecutionProfile", "Model", "Prediction", "advise", "compare", "device",
                        "llm", "llm_configs", "load_model", "make_estimator", "plan", "predict",
                        "predict_parallel", "runtimes", "sweep", "system", "systems", "train",
                        "zoo_models")
__all__ = [*API, "__version__"]


def __getattr__(name: str) -> Any:
    """``roofcast.predict`` etc.: loaded from ``roofcast.api`` on first access; a function's
    errors name Python keywords, not command-line flags (``api_words.python_surface``)."""
    if name in API:
        import inspect

        from roofcast import api
        from roofcast.api_words import python_surface

        value = getattr(api, name)
        return python_surface(value) if inspect.isfunction(value) else value
    raise AttributeError(f"module 'roofcast' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API])
