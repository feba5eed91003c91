"""Weightless ONNX exports of decoder-only LLMs, with and without ``past_key_values`` inputs.

They test ``graph_import.llm.onnx_decoder`` (ONNX decoder -> ``LLMArch``) on real exporter
output: every file here is detected and must give back the config it was exported from.
Run in the zoo environment (torch, transformers, onnxscript; see ``export_zoo.py``)::

    /work/venv-zoo/bin/python tools/zoo/export_llm.py            # everything
    /work/venv-zoo/bin/python tools/zoo/export_llm.py --only gpt2_kv

No weights are downloaded: models are built from configs with random init and made weightless
by ``export_zoo.make_weightless`` (initializers over 1024 elements keep name, dtype and dims, and
point at a ``NAME.weights.bin`` that is never written). Each ``NAME.onnx`` has a ``NAME.json``
sidecar: the config (``config_non_default`` and the fields the detector must find), exporter,
opset, versions, the graph inputs/outputs, ``params`` (torch ``sum(p.numel())``, tied counted
once) and ``onnx_float_initializer_elements`` (what the file holds).

KV exports take ``input_ids [batch, sequence]``, ``attention_mask [batch, total_sequence]`` and
``past_key_values.N.key/value [batch, kv_heads, past_sequence, head_dim]`` and return ``logits``
and ``present.N.key/value`` (the names optimum uses), through a wrapper that fills a
``transformers.DynamicCache`` from the flat past tensors.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import onnx
import torch
from torch import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
#: where the LLM decoder exports live (package data this script writes)
LLM_DIR = pathlib.Path(__file__).resolve().parents[2] / "training_data" / "zoo" / "llm"
from export_zoo import (  # noqa: E402  (the zoo helpers, beside this file)
    _strip_names,
    _versions,
    check_weightless,
    inline_small_external,
    make_weightless,
    randomize_tensors,
)

OPSET = 17
DYNAMO_OPSET = 18
EXPORT_DIMS = {"batch": 1, "sequence": 8, "past_sequence": 8}
TIED_NOTE = ("tied head: exported without TorchScript constant folding, so the LM head reads the "
             "embedding table through a Transpose instead of a folded second copy")


@dataclasses.dataclass
class LLMExport:
    name: str
    description: str
    cls_name: str
    config: Any
    kv: bool  # past_key_values inputs and present outputs
    notes: tuple[str, ...] = ()
    #: TorchScript constant folding; off for tied heads, whose transpose it would fold into a
    #: second copy of the embedding (the file would then hold an untied head)
    fold: bool = True
    exporter: str = "torchscript"  # or "dynamo" (torch.export -> onnxscript, opset 18)


BUILDERS: dict[str, Callable[[], LLMExport]] = {}


def llm_export(name: str) -> Callable[[Callable[[], LLMExport]], Callable[[], LLMExport]]:
    def deco(fn: Callable[[], LLMExport]) -> Callable[[], LLMExport]:
        if name in BUILDERS:
            raise ValueError(f"duplicate export {name!r}")
        BUILDERS[name] = fn
        return fn

    return deco


@llm_export("llama_kv")
def _llama_kv() -> LLMExport:
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                      num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      attn_implementation="eager")
    return LLMExport("llama_kv", "Llama decoder shaped like TinyLlama-1.1B (22 layers, "
                     "hidden 2048, 32 query / 4 KV heads GQA, SwiGLU 5632, RMSNorm, RoPE, "
                     "vocab 32000) with past_key_values inputs", "LlamaForCausalLM", cfg, kv=True)


@llm_export("qwen2_kv")
def _qwen2_kv() -> LLMExport:
    from transformers import Qwen2Config

    cfg = Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                      num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                      max_position_embeddings=32768, tie_word_embeddings=True,
                      attn_implementation="eager")
    return LLMExport("qwen2_kv", "Qwen2 decoder shaped like Qwen2-0.5B (24 layers, hidden 896, 14 "
                     "query / 2 KV heads, q/k/v biases, SwiGLU 4864, vocab 151936, tied head) "
                     "with past_key_values inputs", "Qwen2ForCausalLM", cfg, kv=True,
                     fold=False, notes=(TIED_NOTE,))


@llm_export("gpt2_kv")
def _gpt2_kv() -> LLMExport:
    from transformers import GPT2Config

    cfg = GPT2Config(attn_implementation="eager")
    return LLMExport("gpt2_kv", "GPT-2 small (12 layers, hidden 768, 12 heads MHA, learned "
                     "positions 1024, GELU-tanh, LayerNorm, vocab 50257, tied head) with "
                     "past_key_values inputs", "GPT2LMHeadModel", cfg, kv=True,
                     fold=False, notes=(TIED_NOTE,))


@llm_export("falcon_mqa_kv")
def _falcon_mqa_kv() -> LLMExport:
    from transformers import FalconConfig

    cfg = FalconConfig(hidden_size=4544, num_attention_heads=71, num_hidden_layers=2,
                       vocab_size=65024, multi_query=True, parallel_attn=True, bias=False,
                       new_decoder_architecture=False, alibi=False, max_position_embeddings=2048,
                       tie_word_embeddings=True, attn_implementation="eager")
    return LLMExport("falcon_mqa_kv", "Falcon-7B layer shape (hidden 4544, 71 query heads / 1 KV "
                     "head MQA, parallel attention+MLP block, GELU MLP 4x, LayerNorm, RoPE, vocab "
                     "65024, tied head) with only 2 of its 32 layers (to keep the export small), "
                     "with past_key_values inputs", "FalconForCausalLM", cfg, kv=True, fold=False,
                     notes=(TIED_NOTE, "2 layers instead of Falcon-7B's 32"))


@llm_export("llama_kv_dynamo")
def _llama_kv_dynamo() -> LLMExport:
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                      num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=4096, tie_word_embeddings=False,
                      attn_implementation="eager")
    return LLMExport("llama_kv_dynamo", "Small Llama (4 layers, hidden 1024, 16 query / 4 KV "
                     "heads, SwiGLU 2816, vocab 32000) with past_key_values inputs, exported by "
                     "the dynamo exporter (opset 18) instead of TorchScript", "LlamaForCausalLM",
                     cfg, kv=True, exporter="dynamo")


@llm_export("mixtral_moe")
def _mixtral_moe() -> LLMExport:
    from transformers import MixtralConfig

    cfg = MixtralConfig(hidden_size=1024, intermediate_size=1792, num_hidden_layers=4,
                        num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                        max_position_embeddings=4096, num_local_experts=8, num_experts_per_tok=2,
                        tie_word_embeddings=False, sliding_window=None,
                        attn_implementation="eager", experts_implementation="batched_mm")
    return LLMExport("mixtral_moe", "Mixtral-style sparse MoE decoder, shrunk (4 layers, hidden "
                     "1024, 16 query / 4 KV heads, 8 SwiGLU experts of 1792, top-2 routing, vocab "
                     "32000), no KV inputs; experts run as transformers' batched_mm (3-D expert "
                     "weights gathered by the router's TopK indices)", "MixtralForCausalLM", cfg,
                     kv=False)


@llm_export("mixtral_moe_kv")
def _mixtral_moe_kv() -> LLMExport:
    spec = _mixtral_moe()
    return dataclasses.replace(spec, name="mixtral_moe_kv", kv=True,
                               description=spec.description.replace("no KV inputs",
                                                                    "with past_key_values inputs"))


# --------------------------------------------------------------------------- wrappers


class _Prefill(nn.Module):
    """``(input_ids, attention_mask) -> logits`` without a cache."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.hf = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.hf(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


class _WithPast(nn.Module):
    """``(input_ids, attention_mask, k0, v0, k1, v1, ...) -> (logits, present k0, v0, ...)``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.hf = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        cache = DynamicCache(ddp_cache_data=pairs, config=self.hf.config)
        out = self.hf(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache,
                      use_cache=True)
        present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        return (out.logits, *present)


def _kv_shape(cfg: Any) -> tuple[int, int]:
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    if getattr(cfg, "multi_query", False) and not getattr(cfg, "new_decoder_architecture", True):
        kv_heads = 1  # Falcon-7B: one K/V head (FalconConfig.num_kv_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return kv_heads, head_dim


def _export(spec: LLMExport, module: nn.Module, path: pathlib.Path) -> None:
    cfg = spec.config
    b, s, p = EXPORT_DIMS["batch"], EXPORT_DIMS["sequence"], EXPORT_DIMS["past_sequence"]
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (b, s), generator=gen)
    names_in, names_out = ["input_ids", "attention_mask"], ["logits"]
    axes: dict[str, dict[int, str]] = {"input_ids": {0: "batch", 1: "sequence"},
                                       "logits": {0: "batch", 1: "sequence"}}
    if spec.kv:
        kv_heads, head_dim = _kv_shape(cfg)
        n = cfg.num_hidden_layers
        mask = torch.ones(b, p + s, dtype=torch.int64)
        past = tuple(torch.randn(b, kv_heads, p, head_dim, generator=gen) for _ in range(2 * n))
        args: tuple[torch.Tensor, ...] = (ids, mask, *past)
        axes["attention_mask"] = {0: "batch", 1: "total_sequence"}
        for i in range(n):
            for kind in ("key", "value"):
                names_in.append(f"past_key_values.{i}.{kind}")
                names_out.append(f"present.{i}.{kind}")
                axes[names_in[-1]] = {0: "batch", 2: "past_sequence"}
                axes[names_out[-1]] = {0: "batch", 2: "total_sequence"}
    else:
        args = (ids, torch.ones(b, s, dtype=torch.int64))
        axes["attention_mask"] = {0: "batch", 1: "sequence"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if spec.exporter == "dynamo":
            auto = torch.export.Dim.AUTO  # past + sequence is not a single-dim expression
            shapes = [dict.fromkeys(axes[n], auto) for n in names_in]
            program = torch.onnx.export(module, args, dynamo=True, opset_version=DYNAMO_OPSET,
                                        input_names=names_in, output_names=names_out,
                                        dynamic_shapes=(shapes[0], shapes[1], tuple(shapes[2:])),
                                        optimize=True, verbose=False)
            program.save(str(path), external_data=True)
        else:
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=OPSET,
                              input_names=names_in, output_names=names_out, dynamic_axes=axes,
                              do_constant_folding=spec.fold)


def _float_elements(model: onnx.ModelProto) -> int:
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
    return sum(math.prod(t.dims) for t in model.graph.initializer if t.data_type in floats)


def export_one(name: str, out_dir: pathlib.Path) -> dict[str, Any]:
    import transformers

    t0 = time.time()
    spec = BUILDERS[name]()
    torch.manual_seed(0)
    hf = getattr(transformers, spec.cls_name)(spec.config).eval()
    module = (_WithPast if spec.kv else _Prefill)(hf)
    randomize_tensors(module)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = pathlib.Path(tmp) / f"{name}.onnx"
        _export(spec, module, tmp_path)
        model = onnx.load(str(tmp_path), load_external_data=False)
        inline_small_external(model, tmp_path.parent)
    weightless = make_weightless(model, f"{name}.weights.bin")
    check_weightless(model, f"{name}.weights.bin")
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx_path = out_dir / f"{name}.onnx"
    onnx_path.write_bytes(model.SerializeToString())
    cfg = spec.config
    diff = {k: v for k, v in cfg.to_diff_dict().items() if k != "transformers_version"}
    meta = {
        "name": name,
        "description": spec.description,
        "source": {"library": "transformers", "class": f"transformers.{spec.cls_name}",
                   "config_class": f"transformers.{type(cfg).__name__}",
                   "config_non_default": diff, "config": json.loads(cfg.to_json_string())},
        "exporter": spec.exporter,
        "opset": DYNAMO_OPSET if spec.exporter == "dynamo" else OPSET,
        "export_dims": EXPORT_DIMS if spec.kv else {"batch": 1, "sequence": 8},
        "with_past": spec.kv,
        "versions": _versions(),
        "onnx_inputs": _strip_names(list(model.graph.input)),
        "onnx_outputs": _strip_names(list(model.graph.output)),
        "params": sum(p.numel() for p in module.parameters()),
        "onnx_float_initializer_elements": _float_elements(model),
        "notes": list(spec.notes),
        "weightless": {"external_data_location": f"{name}.weights.bin (not shipped)", **weightless},
        "onnx_nodes": len(model.graph.node),
        "onnx_op_counts": dict(sorted(Counter(n.op_type for n in model.graph.node).items())),
        "file_bytes": onnx_path.stat().st_size,
    }
    (out_dir / f"{name}.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    print(f"{name:16s} params={meta['params']:>13,} file={meta['file_bytes'] / 1e3:8.1f} kB "
          f"{time.time() - t0:6.1f} s", flush=True)
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(BUILDERS), help="repeatable")
    parser.add_argument("--out", type=pathlib.Path, default=LLM_DIR)
    args = parser.parse_args(argv)
    for name in args.only or sorted(BUILDERS):
        export_one(name, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
