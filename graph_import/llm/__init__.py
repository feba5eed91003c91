"""Decoder-only LLMs as structure: ``LLMArch`` (``arch``), read from a Hugging Face
``config.json`` (``hf_config``), a bundled config by name (``configs/``) or an ONNX decoder
export (``onnx_decoder``); ``load_llm(ref)`` picks the reader. No weights, no network."""
