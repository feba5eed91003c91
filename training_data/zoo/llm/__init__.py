"""Weightless decoder-only LLM exports for the ONNX decoder reader (package data only; see
``tools/zoo/export_llm.py`` and ``graph_import.llm.onnx_decoder``)."""
