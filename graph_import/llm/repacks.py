"""Hugging Face ids of quantized repacks -> (base id, weight dtype).

A repack (``nvidia/Llama-3.1-8B-Instruct-FP8``, ``RedHatAI/...-FP8-dynamic``, ``...-NVFP4``,
``...-AWQ``, ``...-GPTQ-Int4``, ``...-quantized.w4a16``) keeps its base model's shapes and
stores the weights at another dtype. ``REPACK_SUFFIXES`` maps a name suffix (case-insensitive,
after ``-`` or ``.``) to that dtype; ``split_repack`` strips the owner and the suffixes (the
outermost names the dtype), leaving the base repository name for the bundled lookup.
"""

from __future__ import annotations

import re

#: repack name suffix (a regular expression, matched at the end) -> weight dtype
REPACK_SUFFIXES: dict[str, str] = {
    r"fp8(-dynamic|-kv|-block)?": "fp8",
    r"(nv)?fp4": "nvfp4",
    r"mxfp4": "mxfp4",
    r"(awq|gptq(-int4)?|int4|w4a16|quantized\.w4a16|bnb-4bit)": "int4",
    r"(gptq-int8|int8|w8a8|w8a16|quantized\.w8a8|quantized\.w8a16)": "int8",
}
_SUFFIX = re.compile("[-.](" + "|".join(f"(?:{s})" for s in REPACK_SUFFIXES) + ")$", re.I)


def split_repack(ref: str) -> tuple[str, str] | None:
    """(base repository name, weight dtype) of a repack id, or None when ``ref`` names none."""
    repo = ref.strip().rsplit("/", 1)[-1]
    dtype = ""
    while (m := _SUFFIX.search(repo)) is not None:  # stacked: -AWQ-INT4, -FP8-KV
        dtype = dtype or next(d for s, d in REPACK_SUFFIXES.items()
                              if re.fullmatch(s, m.group(1), re.I))
        repo = repo[: m.start()]
    return (repo, dtype) if dtype else None
