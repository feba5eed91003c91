"""Regenerate roofcast's model zoo: weightless ONNX graphs of real architectures + metadata.

Needs the optional export dependencies (``pip install -e '.[zoo]'`` in a separate environment;
the tests never do): ``python tools/zoo/export_zoo.py [--only NAME ...] [--alt]``. No weights
are downloaded: every model is built from a constructor or config with random init. Writes
``NAME.onnx`` (initializers above ``WEIGHTLESS_THRESHOLD_ELEMENTS`` declared external and never
written) and ``NAME.json`` (parameter count, buffers, ``forward_flops`` from PyTorch's flop
counter, and how the ONNX initializer count reconciles with it) to ``training_data/zoo/``.
Details (meta-device builds of the NeuSight models, re-drawn tensors, what the FLOP counter
counts): ``docs/design/module-notes.md`` (tools.zoo.export_zoo).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.metadata
import inspect
import itertools
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
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: where the zoo lives (the package data this script writes)
ZOO_DIR = ROOT / "training_data" / "zoo"
ALT_DIR = ZOO_DIR / "alt_exporter"
WEIGHTLESS_THRESHOLD_ELEMENTS = 1024
TORCHSCRIPT_OPSET = 17
DYNAMO_OPSET = 18
ZOO_EXPORTER = "torchscript"
ALT_EXPORTER = "dynamo"
ALT_MODELS = ("resnet50", "bert_base", "gpt2", "llama", "vit_b_16")
FLOP_COUNTER_NOTE = (
    "torch.utils.flop_counter.FlopCounterMode, eager PyTorch on CPU, attention forced through the "
    "math SDPA path and HF models with attn_implementation='eager' so attention matmuls are seen "
    "as bmm/matmul. Counts only matmul/conv-class aten ops (mm, addmm, bmm, baddbmm, "
    "convolution, SDPA kernels) at 2 FLOPs per multiply-add; elementwise, activation, "
    "normalisation, softmax, pooling, embedding lookups and LSTM gate nonlinearities count 0."
)


# --------------------------------------------------------------------------- model specs


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One graph input: ``dims`` mixes symbolic names ('batch', 'sequence') and fixed ints."""

    name: str
    dtype: torch.dtype
    dims: tuple[int | str, ...]
    fill: str = "randn"  # randn | randint | ones
    high: int = 2  # exclusive upper bound for randint


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    name: str
    dims: tuple[int | str, ...]


@dataclasses.dataclass
class ZooModel:
    name: str
    description: str
    source: dict[str, Any]
    module: nn.Module
    inputs: tuple[InputSpec, ...]
    outputs: tuple[OutputSpec, ...]
    export_dims: dict[str, int]
    flop_dims: tuple[dict[str, int], ...]
    notes: dict[str, Any] = dataclasses.field(default_factory=dict)
    max_sequence: int | None = None  # longest 'sequence' the model accepts (position table size)
    on_disk: bool = False  # built on the meta device; export_one backs its tensors by files


BUILDERS: dict[str, Callable[[], ZooModel]] = {}


def zoo_model(name: str) -> Callable[[Callable[[], ZooModel]], Callable[[], ZooModel]]:
    """Register a builder under a zoo name (refuses duplicates)."""

    def deco(fn: Callable[[], ZooModel]) -> Callable[[], ZooModel]:
        if name in BUILDERS:
            raise ValueError(f"duplicate zoo model {name!r}")
        BUILDERS[name] = fn
        return fn

    return deco


IMAGE_FLOP_DIMS = ({"batch": 1}, {"batch": 2})
TEXT_FLOP_DIMS = (
    {"batch": 1, "sequence": 128},
    {"batch": 2, "sequence": 128},
    {"batch": 1, "sequence": 256},
)
TEXT_EXPORT_DIMS = {"batch": 2, "sequence": 128}


def _image_model(name: str, description: str, ctor: str, module: nn.Module,
                 size: int = 224, classes: int = 1000) -> ZooModel:
    return ZooModel(
        name=name,
        description=description,
        source={"library": "torchvision",
                "constructor": f"torchvision.models.{ctor}(weights=None)"},
        module=module,
        inputs=(InputSpec("input", torch.float32, ("batch", 3, size, size)),),
        outputs=(OutputSpec("logits", ("batch", classes)),),
        export_dims={"batch": 2},
        flop_dims=IMAGE_FLOP_DIMS,
    )


def _tv(ctor: str) -> nn.Module:
    import torchvision

    return getattr(torchvision.models, ctor)(weights=None)


@zoo_model("resnet50")
def _resnet50() -> ZooModel:
    return _image_model("resnet50", "ResNet-50 (He et al. 2016), bottleneck blocks, ImageNet head",
                        "resnet50", _tv("resnet50"))


@zoo_model("vgg16")
def _vgg16() -> ZooModel:
    return _image_model("vgg16", "VGG-16 without BatchNorm (Simonyan & Zisserman 2015)",
                        "vgg16", _tv("vgg16"))


@zoo_model("mobilenet_v2")
def _mobilenet_v2() -> ZooModel:
    return _image_model("mobilenet_v2", "MobileNetV2 (Sandler et al. 2018), inverted residuals, "
                        "depthwise convs, ReLU6", "mobilenet_v2", _tv("mobilenet_v2"))


@zoo_model("efficientnet_b0")
def _efficientnet_b0() -> ZooModel:
    return _image_model("efficientnet_b0", "EfficientNet-B0 (Tan & Le 2019), MBConv with "
                        "squeeze-excitation and SiLU", "efficientnet_b0", _tv("efficientnet_b0"))


@zoo_model("convnext_tiny")
def _convnext_tiny() -> ZooModel:
    return _image_model("convnext_tiny", "ConvNeXt-T (Liu et al. 2022), 7x7 depthwise convs, "
                        "channels-last LayerNorm, GELU MLPs, layer scale",
                        "convnext_tiny", _tv("convnext_tiny"))


@zoo_model("vit_b_16")
def _vit_b_16() -> ZooModel:
    return _image_model("vit_b_16", "ViT-B/16 (Dosovitskiy et al. 2021), 12 layers, hidden 768, "
                        "224x224 -> 196 patches + class token", "vit_b_16", _tv("vit_b_16"))


class _SSDLiteHead(nn.Module):
    """SSDlite320 backbone + box/class heads, raw outputs (no anchors decoding, no NMS)."""

    def __init__(self) -> None:
        super().__init__()
        import torchvision

        det = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
            weights=None, weights_backbone=None)
        self.backbone = det.backbone
        self.head = det.head

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = list(self.backbone(x).values())
        out = self.head(features)
        return out["bbox_regression"], out["cls_logits"]


@zoo_model("ssdlite_mobilenet_v3")
def _ssdlite() -> ZooModel:
    return ZooModel(
        name="ssdlite_mobilenet_v3",
        description="SSDlite320 detector (MobileNetV3-Large backbone with SE and hard-swish, "
                    "SSDlite heads) for 91 COCO classes, raw head outputs at 320x320 "
                    "(3234 anchors): no box decoding, no NMS",
        source={"library": "torchvision",
                "constructor": "torchvision.models.detection.ssdlite320_mobilenet_v3_large("
                               "weights=None, weights_backbone=None); backbone + head only"},
        module=_SSDLiteHead(),
        inputs=(InputSpec("input", torch.float32, ("batch", 3, 320, 320)),),
        outputs=(OutputSpec("bbox_regression", ("batch", 3234, 4)),
                 OutputSpec("cls_logits", ("batch", 3234, 91))),
        export_dims={"batch": 2},
        flop_dims=IMAGE_FLOP_DIMS,
    )


class _DoubleConv(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
        )


class UNet(nn.Module):
    """Ronneberger et al. 2015 UNet with same-padding 3x3 convs + BatchNorm, max-pool down,
    transposed-conv up (2x2, stride 2), skip concatenation; widths 64..1024."""

    def __init__(self, in_channels: int = 3, classes: int = 2) -> None:
        super().__init__()
        widths = (64, 128, 256, 512, 1024)
        self.inc = _DoubleConv(in_channels, widths[0])
        self.downs = nn.ModuleList(_DoubleConv(a, b) for a, b in itertools.pairwise(widths))
        self.pool = nn.MaxPool2d(2)
        rev = widths[::-1]
        self.ups = nn.ModuleList(
            nn.ConvTranspose2d(a, b, 2, stride=2) for a, b in itertools.pairwise(rev))
        self.up_convs = nn.ModuleList(_DoubleConv(a, b) for a, b in itertools.pairwise(rev))
        self.outc = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(self.pool(skips[-1])))
        y = skips.pop()
        for up, conv in zip(self.ups, self.up_convs, strict=True):
            y = conv(torch.cat([skips.pop(), up(y)], dim=1))
        return self.outc(y)


@zoo_model("unet")
def _unet() -> ZooModel:
    return ZooModel(
        name="unet",
        description="Classic UNet (Ronneberger et al. 2015; milesial/Pytorch-UNet layout, "
                    "bilinear=False): 4 levels, widths 64-1024, BatchNorm, transposed-conv "
                    "upsampling, 3 input channels, 2 classes, 256x256",
        source={"library": "roofcast (hand-written in export_zoo.py)", "constructor": "UNet(3, 2)"},
        module=UNet(3, 2),
        inputs=(InputSpec("input", torch.float32, ("batch", 3, 256, 256)),),
        outputs=(OutputSpec("mask_logits", ("batch", 2, 256, 256)),),
        export_dims={"batch": 2},
        flop_dims=IMAGE_FLOP_DIMS,
    )


class LSTMLanguageModel(nn.Module):
    """Zaremba et al. 2014 'medium' LM: Embedding(10000, 650) -> 2-layer LSTM(650) -> Linear."""

    def __init__(self, vocab: int = 10000, hidden: int = 650, layers: int = 2) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, num_layers=layers, batch_first=True, dropout=0.5)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embedding(tokens))
        return self.decoder(out)


@zoo_model("lstm_lm")
def _lstm_lm() -> ZooModel:
    return ZooModel(
        name="lstm_lm",
        description="LSTM language model, Zaremba et al. 2014 'medium' (PTB): Embedding(10000, "
                    "650), 2-layer LSTM with 650 units (untied), Linear(650, 10000)",
        source={"library": "roofcast (hand-written in export_zoo.py)",
                "constructor": "LSTMLanguageModel(vocab=10000, hidden=650, layers=2)"},
        module=LSTMLanguageModel(),
        inputs=(InputSpec("tokens", torch.int64, ("batch", "sequence"), "randint", 10000),),
        outputs=(OutputSpec("logits", ("batch", "sequence", 10000)),),
        export_dims={"batch": 2, "sequence": 35},
        flop_dims=({"batch": 1, "sequence": 35}, {"batch": 2, "sequence": 35},
                   {"batch": 1, "sequence": 70}),
        notes={"lstm_flops": "FlopCounterMode sees the CPU LSTM as its mm/addmm calls: "
                             "per step and layer 2*4H*(I+H) FLOPs (+ bias adds not counted)"},
    )


# ----------------------------------------------------------------- Hugging Face transformers


class _HFWrapper(nn.Module):
    """Call an HF model with keyword inputs and return the chosen outputs as a tuple."""

    def __init__(self, model: nn.Module, input_names: tuple[str, ...],
                 output_keys: tuple[str, ...]):
        super().__init__()
        self.hf = model  # short attribute: it prefixes every ONNX node and tensor name
        self.input_names = input_names
        self.output_keys = output_keys

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.hf(**dict(zip(self.input_names, args, strict=True)))
        return tuple(out[k] for k in self.output_keys)


def _text_inputs(vocab: int, mask: bool = True) -> tuple[InputSpec, ...]:
    ids = InputSpec("input_ids", torch.int64, ("batch", "sequence"), "randint", vocab)
    if not mask:
        return (ids,)
    return ids, InputSpec("attention_mask", torch.int64, ("batch", "sequence"), "ones")


def _hf(name: str, description: str, cls_name: str, config: Any, inputs: tuple[InputSpec, ...],
        outputs: tuple[OutputSpec, ...], output_keys: tuple[str, ...], **kw: Any) -> ZooModel:
    import transformers

    model = getattr(transformers, cls_name)(config)
    config_diff = {k: v for k, v in config.to_diff_dict().items() if k != "transformers_version"}
    return ZooModel(
        name=name,
        description=description,
        source={"library": "transformers", "class": f"transformers.{cls_name}",
                "config_class": f"transformers.{type(config).__name__}",
                "config_non_default": config_diff},
        module=_HFWrapper(model, tuple(i.name for i in inputs), output_keys),
        inputs=inputs,
        outputs=outputs,
        export_dims=kw.pop("export_dims", TEXT_EXPORT_DIMS),
        flop_dims=kw.pop("flop_dims", TEXT_FLOP_DIMS),
        max_sequence=getattr(config, "max_position_embeddings", None),
        **kw,
    )


@zoo_model("bert_base")
def _bert_base() -> ZooModel:
    from transformers import BertConfig

    cfg = BertConfig(attn_implementation="eager")
    return _hf("bert_base", "BERT-base uncased encoder (Devlin et al. 2019): 12 layers, hidden "
               "768, 12 heads, FFN 3072, vocab 30522, with pooler", "BertModel", cfg,
               _text_inputs(cfg.vocab_size),
               (OutputSpec("last_hidden_state", ("batch", "sequence", 768)),
                OutputSpec("pooler_output", ("batch", 768))),
               ("last_hidden_state", "pooler_output"))


@zoo_model("gpt2")
def _gpt2() -> ZooModel:
    from transformers import GPT2Config

    cfg = GPT2Config(use_cache=False, attn_implementation="eager")
    return _hf("gpt2", "GPT-2 small (Radford et al. 2019) with LM head: 12 layers, hidden 768, "
               "12 heads, vocab 50257, LM head tied to the token embedding", "GPT2LMHeadModel",
               cfg, _text_inputs(cfg.vocab_size),
               (OutputSpec("logits", ("batch", "sequence", cfg.vocab_size)),), ("logits",))


@zoo_model("llama")
def _llama() -> ZooModel:
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                      num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      use_cache=False, attn_implementation="eager")
    return _hf("llama", "Llama-style decoder shaped like TinyLlama-1.1B: 22 layers, hidden 2048, "
               "32 query heads / 4 KV heads (GQA), SwiGLU FFN 5632, RMSNorm, RoPE, vocab 32000, "
               "untied LM head", "LlamaForCausalLM", cfg, _text_inputs(cfg.vocab_size),
               (OutputSpec("logits", ("batch", "sequence", cfg.vocab_size)),), ("logits",))


@zoo_model("t5_encoder")
def _t5_encoder() -> ZooModel:
    from transformers import T5Config

    cfg = T5Config(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128,
                   relative_attention_num_buckets=32, feed_forward_proj="relu", use_cache=False,
                   attn_implementation="eager")
    return _hf("t5_encoder", "T5-small encoder (Raffel et al. 2020): 6 layers, d_model 512, 8 "
               "heads, FFN 2048 ReLU, relative position buckets, RMS-style LayerNorm",
               "T5EncoderModel", cfg, _text_inputs(cfg.vocab_size),
               (OutputSpec("last_hidden_state", ("batch", "sequence", 512)),),
               ("last_hidden_state",))


@zoo_model("whisper_encoder")
def _whisper_encoder() -> ZooModel:
    import transformers

    cfg = transformers.WhisperConfig(
        d_model=512, encoder_layers=6, encoder_attention_heads=8, encoder_ffn_dim=2048,
        decoder_layers=6, decoder_attention_heads=8, decoder_ffn_dim=2048, num_mel_bins=80,
        vocab_size=51865, max_source_positions=1500, use_cache=False,
        attn_implementation="eager")
    encoder = transformers.WhisperModel(cfg).get_encoder()
    config_diff = {k: v for k, v in cfg.to_diff_dict().items() if k != "transformers_version"}
    inputs = (InputSpec("input_features", torch.float32, ("batch", 80, 3000)),)
    return ZooModel(
        name="whisper_encoder",
        description="Whisper-base audio encoder (Radford et al. 2022): 2 conv1d stem (stride 2), "
                    "6 transformer layers, d_model 512, 8 heads, FFN 2048 GELU, 30 s of 80-bin "
                    "log-mel frames (3000 frames -> 1500 positions; the encoder requires exactly "
                    "3000 frames, so only batch is dynamic)",
        source={"library": "transformers",
                "class": "transformers.WhisperModel(config).get_encoder()",
                "config_class": "transformers.WhisperConfig", "config_non_default": config_diff},
        module=_HFWrapper(encoder, ("input_features",), ("last_hidden_state",)),
        inputs=inputs,
        outputs=(OutputSpec("last_hidden_state", ("batch", 1500, 512)),),
        export_dims={"batch": 2},
        flop_dims=IMAGE_FLOP_DIMS,
    )


# ------------------------------------------------- NeuSight's whole-model GPU latency models
#
# ``$ROOFCAST_SHARED_DATA/gpu_models`` (else ``../shared/data/gpu_models`` beside the repository)
# holds the HF configs of the models NeuSight timed end to end on A100/V100 in PyTorch eager
# (``neusight_model_latency.csv``). Its harness (sitar-lab/NeuSight ``neusight/Tracing/trace.py``)
# builds ``AutoModelForCausalLM`` / ``AutoModelForSeq2SeqLM.from_config(config,
# attn_implementation="eager")``, eval mode, ``torch.no_grad()``, inputs of ones:
# GPT: ``model(input_ids)`` -> GPT2LMHeadModel with its (tied) LM head;
# Switch: ``model(input_ids, input_ids, input_ids)``, i.e. positionally input_ids,
# attention_mask and decoder_input_ids all ``[batch, sequence]``, whole model (``num_layer`` 0:
# all 24 encoder + 24 decoder layers, not one layer scaled), with its sparse MLP replaced by
# ``custom_switchtransmlp_forward``: every expert runs on a padded buffer of
# ``batch * expert_capacity`` tokens whatever the routing. The exports below reproduce those
# modules; ``use_cache=False`` (the harness's cache only returned the k/v tensors it had already
# computed: no extra kernels).

NEUSIGHT_MODELS_DIR = "gpu_models"


def _neusight_config(stem: str) -> dict[str, Any]:
    """The HF config JSON NeuSight built ``stem`` from (see the block comment above)."""
    import os

    base = os.environ.get("ROOFCAST_SHARED_DATA") or str(ROOT.parent / "shared" / "data")
    path = pathlib.Path(base) / NEUSIGHT_MODELS_DIR / "configs" / f"{stem}.json"
    if not path.is_file():
        raise SystemExit(f"{path} not found: set ROOFCAST_SHARED_DATA to the folder holding "
                         f"{NEUSIGHT_MODELS_DIR}/configs/")
    return json.loads(path.read_text())


class _CausalLMHarness(nn.Module):
    """``model(input_ids)`` -> logits, the mask an all-ones tensor built inside the graph.

    The harness passed no mask (transformers 4.38 then masked with each layer's causal buffer);
    transformers 5 without a mask traces a packed-sequence check (``torch.diff`` of the position
    ids, no ONNX export), with an all-ones mask it builds the same causal mask once and adds it
    in every layer: one pass over the scores per layer, as the harness's ``where``.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.hf = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.hf(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits


def _neusight_gpt(name: str, label: str) -> ZooModel:
    from transformers import GPT2Config

    raw = _neusight_config(name)
    cfg = GPT2Config(**{k: v for k, v in raw.items() if k != "architectures"},
                     use_cache=False, attn_implementation="eager")
    d, layers, heads = cfg.n_embd, cfg.n_layer, cfg.n_head
    with torch.device("meta"):  # ~11 GB of fp32 weights: backed by files in export_one
        spec = _hf(name, f"{label} as NeuSight timed it: HF GPT2LMHeadModel from its config "
                   f"({layers} layers, n_embd {d}, {heads} heads, FFN {4 * d} gelu_new, "
                   f"{cfg.n_positions} positions, vocab {cfg.vocab_size}, LM head tied to the "
                   "token embedding), input_ids only as the harness fed it", "GPT2LMHeadModel", cfg,
                   _text_inputs(cfg.vocab_size, mask=False),
                   (OutputSpec("logits", ("batch", "sequence", cfg.vocab_size)),), ("logits",))
    spec.source["neusight_config"] = f"{NEUSIGHT_MODELS_DIR}/configs/{name}.json"
    spec.module = _CausalLMHarness(spec.module.hf)
    spec.on_disk = True
    return spec


@zoo_model("gpt3_xl")
def _gpt3_xl() -> ZooModel:
    return _neusight_gpt("gpt3_xl", "GPT-3 XL (NeuSight's gpt3_xl config: n_embd 3072)")


@zoo_model("gpt3_27")
def _gpt3_27() -> ZooModel:
    return _neusight_gpt("gpt3_27", "GPT-3 2.7B")


class _PaddedExpertsMLP(nn.Module):
    """Switch sparse MLP as NeuSight's harness ran it (``custom_switchtransmlp_forward``).

    Harness: route (top-1 with the per-sequence capacity mask), then for each expert copy its
    chosen tokens into a ``[batch * expert_capacity, d_model]`` buffer, run the expert on the
    whole buffer, copy the chosen rows back; output ``router_probs * next_states``. Here the same
    work with static shapes: the buffer's rows are the expert's chosen tokens first (``TopK`` of
    ``chosen * (N - position)``, N = batch * sequence tokens; needs sequence >= expert_capacity),
    gathered, run through the expert, and scattered back where chosen (unchosen rows keep their
    input). Same expert GEMM shapes; small index copies instead of boolean-mask copies.
    """

    def __init__(self, sparse: nn.Module, capacity: int) -> None:
        super().__init__()
        self.router = sparse.router
        self.experts = sparse.experts
        self.capacity = capacity

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        batch, _, d_model = hidden.shape
        router_mask, router_probs, _ = self.router(hidden)
        flat = hidden.reshape(-1, d_model)
        tokens = flat.shape[0]
        rank = tokens - torch.arange(tokens, device=hidden.device)
        slots = batch * self.capacity
        out = flat
        for idx, expert in enumerate(self.experts.values()):
            chosen = router_mask[:, :, idx].reshape(-1)
            rows = torch.topk(chosen * rank, slots).indices
            keep = chosen.index_select(0, rows).unsqueeze(-1).bool()
            taken = flat.index_select(0, rows)
            result = torch.where(keep, expert(taken), out.index_select(0, rows))
            out = out.index_put((rows,), result)
        return router_probs * out.reshape(hidden.shape)


class _SwitchHarness(nn.Module):
    """``model(input_ids, attention_mask, decoder_input_ids)`` -> logits, as the harness called
    it."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.hf = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                decoder_input_ids: torch.Tensor) -> torch.Tensor:
        return self.hf(input_ids=input_ids, attention_mask=attention_mask,
                       decoder_input_ids=decoder_input_ids).logits


@zoo_model("switchxl4")
def _switchxl4() -> ZooModel:
    import transformers

    raw = _neusight_config("switchxl4")
    cfg = transformers.SwitchTransformersConfig(
        **{k: v for k, v in raw.items() if k not in ("architectures", "torch_dtype",
                                                     "transformers_version", "use_cache")},
        use_cache=False, attn_implementation="eager")
    with torch.device("meta"):  # 5.3 G parameters: 21 GB in fp32, more than this machine
        model = transformers.SwitchTransformersForConditionalGeneration(cfg)
    sparse_cls = transformers.models.switch_transformers.modeling_switch_transformers \
        .SwitchTransformersSparseMLP
    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, sparse_cls):
                setattr(module, child_name, _PaddedExpertsMLP(child, cfg.expert_capacity))
    config_diff = {k: v for k, v in cfg.to_diff_dict().items() if k != "transformers_version"}
    ids = InputSpec("input_ids", torch.int64, ("batch", "sequence"), "randint", cfg.vocab_size)
    return ZooModel(
        name="switchxl4",
        description=(
            f"Switch Transformer (Fedus et al. 2022) as NeuSight timed it ('switchxl4'): HF "
            f"SwitchTransformersForConditionalGeneration, d_model {cfg.d_model}, "
            f"{cfg.num_layers} encoder + {cfg.num_decoder_layers} decoder layers, {cfg.num_heads} "
            f"heads of {cfg.d_kv}, FFN {cfg.d_ff} ReLU, every 2nd layer a sparse MLP of "
            f"{cfg.num_experts} experts with capacity {cfg.expert_capacity} per sequence, each "
            "expert run on a padded batch*capacity buffer (the harness's MoE forward), LM head "
            f"tied, vocab {cfg.vocab_size}; encoder and decoder inputs both [batch, sequence]"),
        source={"library": "transformers",
                "class": "transformers.SwitchTransformersForConditionalGeneration",
                "config_class": "transformers.SwitchTransformersConfig",
                "config_non_default": config_diff,
                "neusight_config": f"{NEUSIGHT_MODELS_DIR}/configs/switchxl4.json",
                "moe_forward": "_PaddedExpertsMLP (export_zoo.py), after NeuSight's "
                               "custom_switchtransmlp_forward"},
        module=_SwitchHarness(model),
        inputs=(ids, InputSpec("attention_mask", torch.int64, ("batch", "sequence"), "ones"),
                dataclasses.replace(ids, name="decoder_input_ids")),
        outputs=(OutputSpec("logits", ("batch", "sequence", cfg.vocab_size)),),
        export_dims=TEXT_EXPORT_DIMS,
        flop_dims=TEXT_FLOP_DIMS,
        notes={"min_sequence": f"sequence >= expert_capacity ({cfg.expert_capacity}): the "
                               "padded expert buffer takes batch*capacity of the tokens",
               "weights_on_disk": "built on the meta device, every tensor then backed by a "
                                  "file-mapped (shared mmap) scratch file so the kernel can page "
                                  "the 21 GB of fp32 weights out; same values, same export"},
        on_disk=True,
    )


# --------------------------------------------------------------------------- export steps


def _concrete(dims: tuple[int | str, ...], values: dict[str, int]) -> list[int]:
    return [d if isinstance(d, int) else values[d] for d in dims]


def make_inputs(spec: ZooModel, values: dict[str, int]) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for inp in spec.inputs:
        shape = _concrete(inp.dims, values)
        fills: dict[str, Callable[[], torch.Tensor]] = {
            "randn": lambda s=shape, i=inp: torch.randn(s, generator=gen, dtype=i.dtype),
            "randint": lambda s=shape, i=inp: torch.randint(0, i.high, s, generator=gen,
                                                            dtype=i.dtype),
            "ones": lambda s=shape, i=inp: torch.ones(s, dtype=i.dtype),
        }
        out.append(fills[inp.fill]())
    return tuple(out)


@torch.no_grad()
def randomize_tensors(module: nn.Module) -> None:
    """Re-draw every float parameter and buffer so no two tensors are byte-identical.

    BatchNorm running variances are drawn in [0.5, 1.5] to stay positive; everything else is
    N(0, 0.02^2). Integer buffers (position ids, counters) and non-persistent buffers computed
    from the config (e.g. RoPE inverse frequencies) are left alone.
    """
    gen = torch.Generator().manual_seed(1234)
    persistent = module.state_dict(keep_vars=True).keys()
    for name, t in [*module.named_parameters(), *module.named_buffers()]:
        if not t.is_floating_point() or name not in persistent:
            continue
        if name.endswith("running_var"):
            t.copy_(torch.rand(t.shape, generator=gen) + 0.5)
        else:
            t.copy_(torch.randn(t.shape, generator=gen) * 0.02)


def back_by_files(module: nn.Module, folder: pathlib.Path) -> int:
    """Give every meta-device parameter and buffer of ``module`` real storage: a shared memory
    map of its own file under ``folder`` (zeros until ``randomize_tensors`` draws them). Pages
    of a shared file mapping can be written back and evicted, so a model larger than the free
    RAM can be traced and exported. Tied parameters stay tied. Returns the bytes mapped."""
    new: dict[int, torch.Tensor] = {}
    for owner in module.modules():
        for table in (owner._parameters, owner._buffers):
            for key, t in list(table.items()):
                if t is None or not t.is_meta:
                    continue
                if id(t) not in new:
                    path = folder / f"t{len(new)}.bin"
                    data = torch.from_file(str(path), shared=True, size=max(t.numel(), 1),
                                           dtype=t.dtype)[: t.numel()].view(t.shape)
                    new[id(t)] = (nn.Parameter(data, requires_grad=t.requires_grad)
                                  if isinstance(t, nn.Parameter) else data)
                table[key] = new[id(t)]
    persistent = module.state_dict(keep_vars=True).keys()
    computed = [n for n, _ in module.named_buffers() if n not in persistent]
    if computed:  # their values come from the config at construction: meta lost them
        raise SystemExit(f"cannot back non-persistent buffers by files: {computed[:5]}")
    return sum(t.numel() * t.element_size() for t in new.values())


def count_flops(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[int, dict[str, int]]:
    """Forward FLOPs by FlopCounterMode (2 per multiply-add, matmul/conv-class ops only).

    Grad mode is on (so nn.MultiheadAttention takes its decomposed path, not the fused CPU fast
    path the counter cannot see), SDPA is forced to the math backend (decomposes to bmm) and
    oneDNN is off (its fused CPU LSTM kernel is invisible to the counter; the native one runs
    the gate matmuls as addmm).
    """
    counter = FlopCounterMode(display=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with (torch.enable_grad(), sdpa_kernel([SDPBackend.MATH]),
              torch.backends.mkldnn.flags(enabled=False), counter):
            module(*inputs)
    by_op = {str(k): int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
    return int(counter.get_total_flops()), dict(sorted(by_op.items()))


def _dynamic_axes(spec: ZooModel) -> dict[str, dict[int, str]]:
    axes = {}
    for io in (*spec.inputs, *spec.outputs):
        named = {i: d for i, d in enumerate(io.dims) if isinstance(d, str)}
        if named:
            axes[io.name] = named
    return axes


def export_torchscript(spec: ZooModel, inputs: tuple[torch.Tensor, ...], path: pathlib.Path) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            spec.module, inputs, str(path), dynamo=False, opset_version=TORCHSCRIPT_OPSET,
            input_names=[i.name for i in spec.inputs], output_names=[o.name for o in spec.outputs],
            dynamic_axes=_dynamic_axes(spec), do_constant_folding=True,
        )
    return TORCHSCRIPT_OPSET


def export_dynamo(spec: ZooModel, inputs: tuple[torch.Tensor, ...], path: pathlib.Path) -> int:
    dims = {n: torch.export.Dim(n) for i in spec.inputs for n in i.dims if isinstance(n, str)}
    dynamic_shapes: tuple[Any, ...] = tuple(
        {ax: dims[d] for ax, d in enumerate(i.dims) if isinstance(d, str)} for i in spec.inputs)
    params = inspect.signature(spec.module.forward).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        dynamic_shapes = (dynamic_shapes,)  # torch.export sees forward(*args) as one argument
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            spec.module, inputs, dynamo=True, opset_version=DYNAMO_OPSET,
            input_names=[i.name for i in spec.inputs], output_names=[o.name for o in spec.outputs],
            dynamic_shapes=dynamic_shapes, optimize=True, verbose=False,
        )
    program.save(str(path), external_data=True)
    return DYNAMO_OPSET


EXPORTERS: dict[str, Callable[[ZooModel, tuple[torch.Tensor, ...], pathlib.Path], int]] = {
    "torchscript": export_torchscript,
    "dynamo": export_dynamo,
}


def _float_tensor_bytes(t: onnx.TensorProto, base_dir: pathlib.Path) -> bytes | None:
    """float32 bytes of a float initializer (its external data read from ``base_dir`` into a
    copy, one tensor at a time, so a multi-GB export never sits in memory twice)."""
    if t.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                           onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE):
        return None
    if onnx.external_data_helper.uses_external_data(t):
        copy = onnx.TensorProto()
        copy.CopyFrom(t)
        onnx.external_data_helper.load_external_data_for_tensor(copy, str(base_dir))
        copy.data_location = onnx.TensorProto.DEFAULT
        del copy.external_data[:]
        t = copy
    arr = onnx.numpy_helper.to_array(t)
    return arr.astype("float32").tobytes()


def inline_small_external(model: onnx.ModelProto, base_dir: pathlib.Path) -> None:
    """Read back the external data of initializers small enough to stay inline in the zoo.

    The exporter writes a > 2 GB model's initializers to files beside it; the model is loaded
    without them (``load_external_data=False``) and only these small ones are read;
    ``make_weightless`` re-declares the large ones."""
    for t in model.graph.initializer:
        if (onnx.external_data_helper.uses_external_data(t)
                and math.prod(t.dims) <= WEIGHTLESS_THRESHOLD_ELEMENTS):
            onnx.external_data_helper.load_external_data_for_tensor(t, str(base_dir))
            t.data_location = onnx.TensorProto.DEFAULT
            del t.external_data[:]


def _digest(b: bytes) -> str:
    return hashlib.blake2b(b, digest_size=16).hexdigest()


def reconcile_params(module: nn.Module, model: onnx.ModelProto,
                     base_dir: pathlib.Path) -> dict[str, Any]:
    """Explain exactly how ONNX float-initializer elements relate to ``sum(p.numel())``.

    Every float initializer is matched by content (hash of its float32 bytes) against the torch
    parameters and float buffers, as stored or transposed (2-D). The identity
    ``onnx_float_initializer_elements = params - params_absent + duplicate_copies
    + float_buffers_in_onnx + derived`` holds by construction; ``derived`` are tensors the exporter
    computed (BatchNorm folded into Conv weights/biases, ...).
    """
    params = dict(module.named_parameters())
    buffers = {k: v for k, v in module.named_buffers() if v.is_floating_point()}
    index: dict[str, tuple[str, str]] = {}
    for kind, tensors in (("param", params), ("buffer", buffers)):
        for name, t in tensors.items():
            data = t.detach().float().contiguous()
            index.setdefault(_digest(data.numpy().tobytes()), (kind, name))
            if data.dim() == 2:
                index.setdefault(_digest(data.t().contiguous().numpy().tobytes()), (kind, name))
    seen: Counter[tuple[str, str]] = Counter()
    derived: list[tuple[str, int]] = []
    total = 0
    for init in model.graph.initializer:
        raw = _float_tensor_bytes(init, base_dir)
        if raw is None:
            continue
        n = math.prod(init.dims)
        total += n
        hit = index.get(_digest(raw))
        if hit is None:
            derived.append((init.name, n))
        else:
            seen[hit] += 1
    p_total = sum(t.numel() for t in params.values())
    absent = {n: t.numel() for n, t in params.items() if seen[("param", n)] == 0}
    dups = {n: (c - 1) * params[n].numel() for (k, n), c in seen.items() if k == "param" and c > 1}
    buf_in = {n: c * buffers[n].numel() for (k, n), c in seen.items() if k == "buffer"}
    derived_n = sum(n for _, n in derived)
    rec = {
        "onnx_float_initializer_elements": total,
        "params": p_total,
        "params_absent_elements": sum(absent.values()),
        "params_absent_count": len(absent),
        "params_absent_examples": sorted(absent)[:6],
        "duplicate_copies_elements": sum(dups.values()),
        "duplicate_copies": dups,
        "float_buffers_in_onnx_elements": sum(buf_in.values()),
        "float_buffers_in_onnx_examples": sorted(buf_in)[:6],
        "derived_elements": derived_n,
        "derived_count": len(derived),
        "derived_examples": [n for n, _ in derived[:6]],
    }
    lhs = p_total - rec["params_absent_elements"] + rec["duplicate_copies_elements"]
    assert lhs + rec["float_buffers_in_onnx_elements"] + derived_n == total
    return rec


def batchnorm_note(module: nn.Module, model: onnx.ModelProto) -> dict[str, Any] | None:
    """If the torch model has BatchNorm but the ONNX graph has no BatchNormalization node."""
    bns = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return None
    folded = not any(n.op_type == "BatchNormalization" for n in model.graph.node)
    channels = sum(m.num_features for m in bns)
    return {
        "folded": folded,
        "layers": len(bns),
        "channels": channels,
        "affine_param_elements": 2 * channels,
        "running_stat_elements": 2 * channels,
        "explanation": (
            "The exporter folded every BatchNorm into the preceding bias-free Conv: each BN's "
            "weight and bias (2C params) disappear and the Conv gains a bias (C), so the ONNX "
            "float-initializer count is params - channels; running statistics (buffers) vanish."
            if folded else
            "BatchNormalization kept as an op: its scale/bias are params, mean/var are buffers "
            "stored as initializers (onnx count = params + running_stat_elements)."),
    }


def tied_note(module: nn.Module) -> dict[str, Any] | None:
    by_id: dict[int, list[str]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(p), []).append(name)
    groups = [names for names in by_id.values() if len(names) > 1]
    if not groups:
        return None
    return {"groups": groups,
            "elements_counted_once": sum(dict(module.named_parameters())[g[0]].numel()
                                         for g in groups),
            "explanation": "torch counts a tied parameter once; the ONNX graph may hold a second "
                           "(e.g. transposed) copy for the LM head: see "
                           "param_reconciliation.duplicate_copies"}


def make_weightless(model: onnx.ModelProto, location: str) -> dict[str, int]:
    """Point every initializer with > WEIGHTLESS_THRESHOLD_ELEMENTS elements at external data
    in ``location`` (never written) and drop its bytes; offsets lay tensors out back to back.
    Per-node ``metadata_props`` (debug stack traces, no effect on semantics) are dropped too."""
    offset = moved = moved_elements = 0
    for init in model.graph.initializer:
        n = math.prod(init.dims)
        if n <= WEIGHTLESS_THRESHOLD_ELEMENTS:
            continue
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(init.data_type).itemsize
        length = n * itemsize
        for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data",
                      "uint64_data", "string_data"):
            init.ClearField(field)
        init.data_location = onnx.TensorProto.EXTERNAL
        del init.external_data[:]
        for key, value in (("location", location), ("offset", str(offset)),
                           ("length", str(length))):
            entry = init.external_data.add()
            entry.key, entry.value = key, value
        offset += length
        moved += 1
        moved_elements += n
    stripped = 0
    for node in model.graph.node:  # the dynamo exporter's per-node stack traces: ~1 MB of text
        stripped += len(node.metadata_props)
        del node.metadata_props[:]
    big_constants = [n.name for n in model.graph.node if n.op_type == "Constant"
                     and any(a.t and math.prod(a.t.dims) > WEIGHTLESS_THRESHOLD_ELEMENTS
                             for a in n.attribute)]
    assert not big_constants, f"large Constant nodes would bloat the file: {big_constants[:5]}"
    return {"external_initializers": moved, "external_elements": moved_elements,
            "external_bytes": offset, "node_metadata_props_stripped": stripped}


def check_weightless(model: onnx.ModelProto, location: str) -> None:
    """onnx.checker + strict shape inference on the weightless model.

    The checker insists that an external-data location is a regular file, so the check runs in a
    scratch folder holding an EMPTY placeholder of that name (never shipped); shape inference
    needs only the initializer dims.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "model.onnx"
        path.write_bytes(model.SerializeToString())
        (pathlib.Path(tmp) / location).write_bytes(b"")
        onnx.checker.check_model(str(path))
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)


def _versions() -> dict[str, str]:
    names = ("torch", "torchvision", "transformers", "onnx", "onnxscript")
    out = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def _strip_names(io: list[onnx.ValueInfoProto]) -> list[dict[str, Any]]:
    return [{"name": v.name,
             "dtype": onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name,
             "dims": [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]}
            for v in io]


def export_one(name: str, exporter: str, out_dir: pathlib.Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"zoo-{name}-") as scratch:
        spec = BUILDERS[name]()
        if spec.on_disk:
            mapped = back_by_files(spec.module, pathlib.Path(scratch))
            print(f"{name}: {mapped / 1e9:.1f} GB of tensors mapped from files", flush=True)
        return _export_built(spec, exporter, out_dir)


def _export_built(spec: ZooModel, exporter: str, out_dir: pathlib.Path) -> dict[str, Any]:
    t0 = time.time()
    name = spec.name
    module = spec.module.eval()
    randomize_tensors(module)
    flops_by_shape = []
    for dims in spec.flop_dims:
        total, by_op = count_flops(module, make_inputs(spec, dims))
        flops_by_shape.append({"dims": dims, "flops": total, "by_op": by_op})
    export_inputs = make_inputs(spec, spec.export_dims)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = pathlib.Path(tmp) / f"{name}.onnx"
        opset = EXPORTERS[exporter](spec, export_inputs, tmp_path)
        model = onnx.load(str(tmp_path), load_external_data=False)
        inline_small_external(model, tmp_path.parent)
        reconciliation = reconcile_params(module, model, tmp_path.parent)
    notes = dict(spec.notes)
    for key, note in (("bn_folded", batchnorm_note(module, model)),
                      ("tied_parameters", tied_note(module))):
        if note is not None:
            notes[key] = note
    weightless = make_weightless(model, f"{name}.weights.bin")
    check_weightless(model, f"{name}.weights.bin")
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx_path = out_dir / f"{name}.onnx"
    onnx_path.write_bytes(model.SerializeToString())
    ops = Counter(n.op_type for n in model.graph.node)
    first = flops_by_shape[0]
    meta = {
        "name": name,
        "description": spec.description,
        "source": spec.source,
        "exporter": exporter,
        "opset": opset,
        "versions": _versions(),
        "inputs": [{"name": i.name, "dtype": str(i.dtype).removeprefix("torch."),
                    "dims": list(i.dims), "export_shape": _concrete(i.dims, spec.export_dims)}
                   for i in spec.inputs],
        "outputs": [{"name": o.name, "dims": list(o.dims)} for o in spec.outputs],
        "onnx_inputs": _strip_names(list(model.graph.input)),
        "onnx_outputs": _strip_names(list(model.graph.output)),
        "max_sequence": spec.max_sequence,
        "symbolic_dims": sorted({d for i in spec.inputs for d in i.dims if isinstance(d, str)}),
        "export_dims": spec.export_dims,
        "params": sum(p.numel() for p in module.parameters()),
        "buffers": sum(b.numel() for b in module.buffers()),
        "float_buffers": sum(b.numel() for b in module.buffers() if b.is_floating_point()),
        "forward_flops": first["flops"],
        "forward_flops_at": first["dims"],
        "forward_flops_by_op": first["by_op"],
        "forward_flops_by_shape": flops_by_shape,
        "flop_counter": FLOP_COUNTER_NOTE,
        "param_reconciliation": reconciliation,
        "notes": notes,
        "weightless": {"threshold_elements": WEIGHTLESS_THRESHOLD_ELEMENTS,
                       "external_data_location": f"{name}.weights.bin (not shipped)", **weightless},
        "onnx_nodes": len(model.graph.node),
        "onnx_op_counts": dict(sorted(ops.items())),
        "file_bytes": onnx_path.stat().st_size,
    }
    (out_dir / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{name:22s} {exporter:11s} params={meta['params']:>13,} "
          f"flops={meta['forward_flops']:>17,} file={meta['file_bytes'] / 1e3:8.1f} kB  "
          f"{time.time() - t0:6.1f} s", flush=True)
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(BUILDERS), help="repeatable")
    parser.add_argument("--exporter", choices=sorted(EXPORTERS), default=None,
                        help=f"default: {ZOO_EXPORTER} into the zoo, {ALT_EXPORTER} with --alt")
    parser.add_argument("--alt", action="store_true",
                        help=f"export {', '.join(ALT_MODELS)} with the other exporter into "
                        "alt_exporter/")
    parser.add_argument("--out", type=pathlib.Path, default=None, help="output folder")
    args = parser.parse_args(argv)
    names = args.only or (list(ALT_MODELS) if args.alt else sorted(BUILDERS))
    exporter = args.exporter or (ALT_EXPORTER if args.alt else ZOO_EXPORTER)
    out_dir = args.out or (ALT_DIR if args.alt else ZOO_DIR)
    torch.manual_seed(0)
    for name in names:
        export_one(name, exporter, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
