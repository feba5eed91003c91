"""Errors a user can cause while importing a model.

Every message says what is wrong and what to do; the CLI and the app print it as one line.
"""


class ModelImportError(ValueError):
    """The ONNX input cannot be imported (bad file, hostile content, unbound dims, ...)."""


class WorkloadSchemaError(ValueError):
    """A workload table breaks the column contract of ``graph_import.workload_schema``."""


class LLMConfigError(ModelImportError):
    """A Hugging Face ``config.json`` (or a bundled LLM name) cannot be turned into an
    ``LLMArch``: unreadable, not a JSON object, an unknown ``model_type``, a missing or
    implausible field, fields that contradict each other, an unknown bundled name."""
