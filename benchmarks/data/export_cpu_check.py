"""Export the CPU acceptance models of ``benchmarks/cpu_runtime_check.py``: HF / torchvision
architectures that are *not* in the bundled CPU training data (``training_data/bundled``),
as weightless ONNX graphs (the zoo's exporter and format) in ``benchmarks/data/cpu_check/``.

Needs the zoo's export environment (torch, transformers; torchvision for the ``tv_*`` models)::

    /work/venv-zoo/bin/python benchmarks/data/export_cpu_check.py [--only NAME ...]

No weights are downloaded (constructors and configs with random init) and none are written:
initializers above the zoo's threshold are declared external in a file that never exists.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT_DIR = pathlib.Path(__file__).resolve().parent / "cpu_check"
sys.path.insert(0, str(ROOT / "tools" / "zoo"))

import export_zoo as zoo  # noqa: E402  (the zoo exporter, run from its folder)

IMAGE_OUT = (zoo.OutputSpec("logits", ("batch", 1000)),)


def _hf_image(name: str, description: str, cls_name: str, config) -> zoo.ZooModel:
    return zoo._hf(name, description, cls_name, config,
                   (zoo.InputSpec("pixel_values", zoo.torch.float32, ("batch", 3, 224, 224)),),
                   IMAGE_OUT, ("logits",), export_dims={"batch": 2},
                   flop_dims=zoo.IMAGE_FLOP_DIMS)


@zoo.zoo_model("hf_mobilenet_v2")
def _hf_mobilenet_v2() -> zoo.ZooModel:
    from transformers import MobileNetV2Config

    return _hf_image("hf_mobilenet_v2", "HF MobileNetV2 1.0/224 (TF padding: explicit Pad nodes "
                     "before strided and depthwise convs)", "MobileNetV2ForImageClassification",
                     MobileNetV2Config(num_labels=1000))


@zoo.zoo_model("hf_resnet50")
def _hf_resnet50() -> zoo.ZooModel:
    from transformers import ResNetConfig

    return _hf_image("hf_resnet50", "HF ResNet-50 (microsoft/resnet-50 architecture)",
                     "ResNetForImageClassification", ResNetConfig(num_labels=1000))


@zoo.zoo_model("hf_vit_small")
def _hf_vit_small() -> zoo.ZooModel:
    from transformers import ViTConfig

    cfg = ViTConfig(hidden_size=384, num_attention_heads=6, intermediate_size=1536, num_labels=1000,
                    attn_implementation="eager")
    return _hf_image("hf_vit_small", "HF ViT-S/16 (12 layers, hidden 384, 6 heads)",
                     "ViTForImageClassification", cfg)


@zoo.zoo_model("hf_distilbert")
def _hf_distilbert() -> zoo.ZooModel:
    from transformers import DistilBertConfig

    cfg = DistilBertConfig(attn_implementation="eager")
    return zoo._hf("hf_distilbert", "HF DistilBERT-base encoder (6 layers, hidden 768)",
                   "DistilBertModel", cfg, zoo._text_inputs(cfg.vocab_size),
                   (zoo.OutputSpec("last_hidden_state", ("batch", "sequence", 768)),),
                   ("last_hidden_state",))


def _tv_model(name: str, ctor: str, description: str) -> None:
    @zoo.zoo_model(name)
    def build() -> zoo.ZooModel:
        return zoo._image_model(name, description, ctor, zoo._tv(ctor))


_tv_model("tv_shufflenet_v2", "shufflenet_v2_x1_0", "torchvision ShuffleNetV2 x1.0")
_tv_model("tv_squeezenet1_1", "squeezenet1_1", "torchvision SqueezeNet 1.1")
_tv_model("tv_regnet_y_400mf", "regnet_y_400mf", "torchvision RegNetY-400MF")

NAMES = ("hf_mobilenet_v2", "hf_resnet50", "hf_vit_small", "hf_distilbert", "tv_shufflenet_v2",
         "tv_squeezenet1_1", "tv_regnet_y_400mf")


def trim_labels(path: pathlib.Path) -> None:
    """Drop the 1000 generated class names (``id2label``/``label2id``) from a metadata file's
    config: ``num_labels`` says it all."""
    meta = zoo.json.loads(path.read_text())
    config = meta["source"].get("config_non_default", {})
    for key in ("id2label", "label2id"):
        config.pop(key, None)
    path.write_text(zoo.json.dumps(meta, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=NAMES)
    args = parser.parse_args(argv)
    for name in args.only or NAMES:
        zoo.export_one(name, zoo.ZOO_EXPORTER, OUT_DIR)
        trim_labels(OUT_DIR / f"{name}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
