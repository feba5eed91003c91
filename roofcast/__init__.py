"""roofcast: performance prediction and what-if simulation for deep learning models.

The repository's top-level folders (``graph_import``, ``hw_catalog``, ``predictor``,
``training_data``, ``app``) install as subpackages of this one package. The Python API
(``roofcast.api``) is imported on first attribute access, so ``import roofcast`` stays cheap:
``load_model``, ``device``, ``predict``, ``compare``, ``sweep``, ``advise``, ``train``,
``runtimes``, ``make_estimator``, ``llm``, ``llm_configs``, ``systems``, ``system``,
``predict_parallel``, ``plan``. Its errors name keywords such as ``dims=``, not command-line
flags (``api_words``).
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
