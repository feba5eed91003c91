"""The LLM tests' architectures and serving engine, for the serving memory tests."""

from tests.predictor.llm.conftest import archs, engine  # noqa: F401
