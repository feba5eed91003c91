"""Regenerate the tiny exported test models of tests/graph_import/data (needs torch).

    pip install torch transformers onnxscript onnxruntime
    python tests/graph_import/data/make_models.py

Each architecture is exported twice with dynamic ``batch`` (and ``sequence``) axes: by the
TorchScript exporter (``*_ts.onnx``) and by the dynamo exporter (``*_dynamo.onnx``). Before the
weights are stripped, onnxruntime runs the full model at batch=3, sequence=11 and every tensor's
*observed* shape is written to ``<name>.shapes.json``: the independent reference the import
tests compare roofcast's inferred shapes against. Float initializers with more than 64
elements are then stripped to weightless external-data stubs, so the files stay small.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper
from torch import nn

HERE = Path(__file__).parent
REF_BATCH, REF_SEQUENCE = 3, 11
FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE)


def observed_shapes(model: onnx.ModelProto, dims: dict[str, int]) -> dict[str, list[int]]:
    """Run the full model in onnxruntime with every node output exposed; return their shapes."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    declared = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for out in node.output:
            if out and out not in declared:
                m.graph.output.append(helper.make_empty_tensor_value_info(out))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {}
    for vi in model.graph.input:
        shape = [
            d.dim_value if d.HasField("dim_value") else dims[d.dim_param]
            for d in vi.type.tensor_type.shape.dim
        ]
        if vi.type.tensor_type.elem_type == TensorProto.INT64:
            feeds[vi.name] = np.ones(shape, dtype=np.int64)
        else:
            feeds[vi.name] = np.random.default_rng(0).random(shape, dtype=np.float32)
    outs = sess.run(None, feeds)
    return {o.name: list(np.shape(v)) for o, v in zip(sess.get_outputs(), outs, strict=True)}


def strip(model: onnx.ModelProto) -> None:
    """Weights -> weightless external-data stubs; drop doc strings and metadata."""
    model.ClearField("metadata_props")
    model.doc_string = ""
    for node in model.graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
    for t in model.graph.initializer:
        if t.data_type in FLOAT_TYPES and int(np.prod(t.dims)) > 64:
            for field in ("raw_data", "float_data", "int32_data", "double_data"):
                t.ClearField(field)
            t.data_location = TensorProto.EXTERNAL
            entry = t.external_data.add()
            entry.key, entry.value = "location", "weights.bin"


def export(name: str, module: nn.Module, args, input_names, axes) -> None:
    module.eval()
    batch = torch.export.Dim("batch", min=1, max=4096)
    sequence = torch.export.Dim("sequence", min=2, max=4096)
    dims_by_name = {"batch": batch, "sequence": sequence}
    arg_names = list(module.forward.__code__.co_varnames[1 : 1 + len(args)])
    dynamic_shapes = {
        arg: {ax: dims_by_name[n] for ax, n in axes[inp].items()}
        for arg, inp in zip(arg_names, input_names, strict=True)
    }
    for exporter in ("ts", "dynamo"):
        path = HERE / f"{name}_{exporter}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if exporter == "ts":
                torch.onnx.export(module, args, path, input_names=input_names, dynamic_axes=axes,
                                  dynamo=False, opset_version=17)
            else:
                torch.onnx.export(module, args, path, input_names=input_names,
                                  dynamic_shapes=dynamic_shapes, dynamo=True, external_data=False)
        save_with_reference(onnx.load(path), path)


def save_with_reference(model: onnx.ModelProto, path: Path) -> None:
    """Record onnxruntime's observed shapes, strip the weights, save model and reference."""
    shapes = observed_shapes(model, {"batch": REF_BATCH, "sequence": REF_SEQUENCE})
    strip(model)
    onnx.save(model, path)
    ref = {"dims": {"batch": REF_BATCH, "sequence": REF_SEQUENCE}, "shapes": shapes}
    path.with_suffix(".shapes.json").write_text(json.dumps(ref, separators=(",", ":")))
    print(f"{path.name}: {path.stat().st_size} bytes, {len(shapes)} tensors")


def ort_optimized(name: str, model_type: str, path: Path) -> None:
    """onnxruntime's transformer optimiser fuses subgraphs into com.microsoft contrib ops
    (Attention, EmbedLayerNormalization, SkipLayerNormalization, BiasGelu, FastGelu): the
    ``*_ortopt.onnx`` files."""
    from onnxruntime.transformers import optimizer

    opt = optimizer.optimize_model(str(path), model_type=model_type, num_heads=4, hidden_size=32,
                                   opt_level=1)
    save_with_reference(opt.model, HERE / f"{name}_ortopt.onnx")


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, groups=8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


class TinyLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.out = nn.Linear(32, 100)

    def forward(self, input_ids):
        h, _ = self.lstm(self.emb(input_ids))
        return self.out(h)


class HFWrapper(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                         return_dict=False)
        return out[0]


def main() -> int:
    import transformers as tf

    torch.manual_seed(0)
    seq_axes = {0: "batch", 1: "sequence"}
    export("cnn", TinyCNN(), (torch.randn(2, 3, 32, 32),), ["x"], {"x": {0: "batch"}})
    export("lstm", TinyLSTM(), (torch.randint(0, 100, (2, 7)),), ["input_ids"],
           {"input_ids": seq_axes})
    small = {"vocab_size": 100, "num_hidden_layers": 1, "num_attention_heads": 4}
    decoders = {
        "bert": tf.BertModel(tf.BertConfig(hidden_size=32, intermediate_size=64,
                                           max_position_embeddings=512, **small)),
        "gpt2": tf.GPT2Model(tf.GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=4,
                                           n_positions=512)),
        "llama": tf.LlamaModel(tf.LlamaConfig(hidden_size=32, intermediate_size=64,
                                              num_key_value_heads=2,
                                              max_position_embeddings=512, **small)),
    }
    for name, model in decoders.items():
        ids = torch.randint(0, 100, (2, 9))
        mask = torch.ones(2, 9, dtype=torch.long)
        export(name, HFWrapper(model), (ids, mask), ["input_ids", "attention_mask"],
               {"input_ids": seq_axes, "attention_mask": seq_axes})
        if name == "gpt2":
            ort_export(name, model, ids, mask)
    # eager attention, so that onnxruntime fuses it into com.microsoft Attention
    eager = tf.BertModel(tf.BertConfig(hidden_size=32, intermediate_size=64,
                                       max_position_embeddings=512, attn_implementation="eager",
                                       **small))
    ort_export("bert", eager, ids, mask)
    return 0


def ort_export(name: str, model: nn.Module, ids, mask) -> None:
    seq_axes = {0: "batch", 1: "sequence"}
    full = HERE / f"{name}_full.tmp.onnx"
    torch.onnx.export(HFWrapper(model), (ids, mask), full, dynamo=False, opset_version=17,
                      input_names=["input_ids", "attention_mask"],
                      dynamic_axes={"input_ids": seq_axes, "attention_mask": seq_axes})
    ort_optimized(name, name, full)
    full.unlink()


if __name__ == "__main__":
    sys.exit(main())
