"""PyTorch-eager GPU collector: kernel and whole-model timings on a CUDA device.

Standalone on purpose (imports only torch, its sibling ``cuda_timing.py``, and
torchvision/transformers for whole models), so it runs on a GPU machine where roofcast itself is
not installed:
``python tools/torch_eager.py --out DIR [--only gemm,attention,...]``.
Writes CSVs (``gemm.csv``, ``attention.csv``, ``vector.csv``, ``models.csv``, ``llm.csv``,
``kernels.csv``, ``env.json``). Times are CUDA-event milliseconds: ``graph_ms`` is one replay of a
CUDA graph of the op divided by its repeats (GPU time, launch gaps removed), ``eager_ms`` the mean
of an eager loop (includes PyTorch's dispatch). Operands stay resident (L2-warm for small ones).
Each section has a time budget; a section that fails writes its error and the others go on.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import platform
import sys
import time
import traceback
from pathlib import Path

import torch
from cuda_timing import device_env, events_ms, graph_ms, now, warm

DEV = "cuda"


def time_op(fn, *, warmup: int = 2, iters: int = 20, graph_reps: int = 10,
            target_s: float = 0.05) -> dict:
    """Eager mean and CUDA-graph per-op time (ms) of ``fn``; repeats shrink for slow ops so
    each op costs about ``target_s`` of timing."""
    warm(fn, warmup)
    one_ms = events_ms(fn, 1)
    iters = max(2, min(iters, int(target_s * 1e3 / max(one_ms, 1e-3))))
    graph_reps = max(1, min(graph_reps, int(0.4 * target_s * 1e3 / max(one_ms, 1e-3))))
    eager = events_ms(fn, iters)
    graph = float("nan")
    try:
        graph = graph_ms(fn, 3, calls=graph_reps)
    except Exception:  # not capturable: eager only
        torch.cuda.synchronize()
    return {"eager_ms": eager, "graph_ms": graph}


class Writer:
    def __init__(self, path: Path):
        self.path, self.f, self.w = path, None, None

    def row(self, rec: dict) -> None:
        if self.w is None:
            self.f = open(self.path, "w", newline="")  # noqa: SIM115
            self.w = csv.DictWriter(self.f, fieldnames=list(rec))
            self.w.writeheader()
        self.w.writerow(rec)
        self.f.flush()


def section(name: str, budget_s: float):
    def deco(fn):
        def run(out: Path, errors: dict):
            t0 = time.time()
            deadline = t0 + budget_s
            try:
                fn(out, deadline)
            except Exception:
                errors[name] = traceback.format_exc()[-2000:]
            print(f"[{name}] {time.time() - t0:.1f} s", flush=True)
            torch.cuda.empty_cache()
        run.section = name
        return run
    return deco


GEMM_M = (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
GEMM_NK = ((4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096), (8192, 8192),
           (28672, 8192), (8192, 28672), (1024, 1024), (2048, 512), (128256, 4096))


@section("gemm", 120)
def gemm(out: Path, deadline: float) -> None:
    w = Writer(out / "gemm.csv")
    fp8 = getattr(torch, "float8_e4m3fn", None)
    for m in GEMM_M:
        for n, k in GEMM_NK:
            for dtype in ("bf16", "fp16", "fp8", "tf32", "fp32"):
                if time.time() > deadline:
                    return
                torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
                tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)
                if dtype == "fp8":
                    if fp8 is None:
                        continue
                    a = torch.randn(m, k, device=DEV).to(fp8)
                    b = torch.randn(n, k, device=DEV).to(fp8)
                    one = torch.tensor(1.0, device=DEV)
                    bt = b.t()

                    def fn(a=a, bt=bt, one=one):
                        return torch._scaled_mm(a, bt, scale_a=one, scale_b=one,
                                                out_dtype=torch.bfloat16)
                else:
                    a = torch.randn(m, k, device=DEV, dtype=tdt)
                    bt = torch.randn(n, k, device=DEV, dtype=tdt).t()

                    def fn(a=a, bt=bt):
                        return a @ bt
                try:
                    t = time_op(fn)
                except Exception as exc:
                    w.row({"m": m, "n": n, "k": k, "dtype": dtype, "eager_ms": "",
                           "graph_ms": "", "tflops_graph": "", "error": str(exc)[:200]})
                    continue
                flops = 2.0 * m * n * k
                w.row({"m": m, "n": n, "k": k, "dtype": dtype, **t,
                       "tflops_graph": flops / (t["graph_ms"] * 1e-3) / 1e12, "error": ""})
                del a, bt
    torch.backends.cuda.matmul.allow_tf32 = False


@section("attention", 45)
def attention(out: Path, deadline: float) -> None:
    import torch.nn.functional as F  # noqa: N812

    w = Writer(out / "attention.csv")
    heads, kv_heads, d = 32, 8, 128
    cases = [("prefill", b, s, s) for b in (1, 4, 16) for s in (128, 512, 2048, 8192)]
    cases += [("decode", b, 1, s) for b in (1, 8, 32, 128) for s in (512, 2048, 8192, 32768)]
    for phase, b, sq, skv in cases:
        if time.time() > deadline:
            return
        if b * skv * kv_heads * d * 2 * 2 > 40e9:
            continue
        q = torch.randn(b, heads, sq, d, device=DEV, dtype=torch.bfloat16)
        k = torch.randn(b, kv_heads, skv, d, device=DEV, dtype=torch.bfloat16)
        v = torch.randn_like(k)

        def fn(q=q, k=k, v=v, causal=phase == "prefill"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        try:
            t = time_op(fn)
            err = ""
        except Exception as exc:
            t, err = {"eager_ms": "", "graph_ms": ""}, str(exc)[:200]
        w.row({"phase": phase, "batch": b, "q_len": sq, "kv_len": skv, "heads": heads,
               "kv_heads": kv_heads, "head_dim": d, "dtype": "bf16", **t, "error": err})
        del q, k, v


@section("vector", 30)
def vector(out: Path, deadline: float) -> None:
    import torch.nn.functional as F  # noqa: N812

    w = Writer(out / "vector.csv")
    ops = {
        "add": lambda x: x + x,
        "gelu": F.gelu,
        "silu": F.silu,
        "softmax": lambda x: torch.softmax(x, -1),
        "layernorm": lambda x: F.layer_norm(x, x.shape[-1:]),
        "rmsnorm": lambda x: F.rms_norm(x, x.shape[-1:]),
        "copy": lambda x: x.clone(),
    }
    for rows in (64, 1024, 16384, 131072):
        for cols in (1024, 4096, 16384):
            for dtype in ("bf16", "fp32"):
                tdt = torch.bfloat16 if dtype == "bf16" else torch.float32
                x = torch.randn(rows, cols, device=DEV, dtype=tdt)
                for name, op in ops.items():
                    if time.time() > deadline:
                        return
                    t = time_op(lambda op=op, x=x: op(x))
                    w.row({"op": name, "rows": rows, "cols": cols, "dtype": dtype,
                           "bytes": 2 * x.numel() * x.element_size(), **t})
                del x


def _call(model, kind: str, batch: int, seq, tdt):
    """A no-argument forward of ``model`` on random inputs (images or token ids)."""
    if kind == "vision":
        x = torch.randn(batch, 3, 224, 224, device=DEV, dtype=tdt)
        return lambda: model(x)
    ids = torch.randint(0, 1000, (batch, seq), device=DEV)
    return lambda: model(input_ids=ids)


def _model_zoo():
    import torchvision.models as tvm

    vision = {name: (lambda name=name: getattr(tvm, name)(weights=None))
              for name in VISION_MODELS}
    return vision


def _hf(name: str):
    import transformers as tf

    cfgs = {
        "bert_base": lambda: tf.BertModel(tf.BertConfig()),
        "bert_large": lambda: tf.BertModel(tf.BertConfig(hidden_size=1024, num_hidden_layers=24,
                                                         num_attention_heads=16,
                                                         intermediate_size=4096)),
        "gpt2": lambda: tf.GPT2LMHeadModel(tf.GPT2Config()),
        "gpt2_large": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(n_embd=1280, n_layer=36,
                                                               n_head=20)),
        "opt_1.3b": lambda: tf.OPTForCausalLM(tf.OPTConfig(hidden_size=2048, num_hidden_layers=24,
                                                           ffn_dim=8192, num_attention_heads=32,
                                                           word_embed_proj_dim=2048)),
        "t5_encoder": lambda: tf.T5EncoderModel(tf.T5Config()),
        "distilbert": lambda: tf.DistilBertModel(tf.DistilBertConfig()),
    }
    return cfgs[name]()


VISION_MODELS = ("resnet50", "vit_b_16", "mobilenet_v2", "efficientnet_b0", "convnext_tiny",
                 "resnet18", "vgg16", "regnet_y_400mf", "densenet121", "swin_t")
HF_MODELS = ("bert_base", "gpt2", "bert_large", "gpt2_large", "opt_1.3b", "distilbert",
             "t5_encoder")
#: the order models are timed in (most wanted first: the budget may cut the tail)
MODEL_ORDER = ("resnet50", "bert_base", "gpt2", "vit_b_16", "bert_large", "gpt2_large",
               "opt_1.3b", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "distilbert",
               "t5_encoder", "resnet18", "vgg16", "regnet_y_400mf", "densenet121", "swin_t")


def _model_rows(w: Writer, column: str, timer, deadline: float) -> None:
    """Rows of ``column`` (ms, from ``timer(fn)``) for each model, precision and batch."""
    vision = _model_zoo()
    for name in MODEL_ORDER:
        kind = "vision" if name in vision else "hf"
        try:
            with torch.device(DEV):
                model = (vision[name]() if kind == "vision" else _hf(name)).eval()
        except Exception as exc:
            w.row({"model": name, "precision": "", "batch": "", "seq": "", column: "",
                   "error": str(exc)[:200]})
            continue
        for precision in ("fp32", "tf32", "bf16", "fp16"):
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            torch.backends.cudnn.allow_tf32 = precision == "tf32"
            tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
            model = model.to(DEV, tdt)
            for batch in (1, 8, 32):
                if time.time() > deadline:
                    return
                seq = "" if kind == "vision" else 128
                fn = _call(model, kind, batch, seq, tdt)
                try:
                    with torch.inference_mode():
                        ms = timer(fn)
                    err = ""
                except Exception as exc:
                    ms, err = "", str(exc)[:200]
                w.row({"model": name, "precision": precision, "batch": batch, "seq": seq,
                       column: ms, "error": err})
        del model
        torch.cuda.empty_cache()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _eager_ms(fn) -> float:
    warm(fn, 3)
    return events_ms(fn, 10)


def _graph_ms(fn) -> float:
    try:
        return graph_ms(fn, 10, side_warmup=2)
    except Exception:
        torch.cuda.synchronize()  # the failed capture's work done before the next case
        raise


@section("models", 140)
def models(out: Path, deadline: float) -> None:
    """Whole-model forwards launched op by op (PyTorch's dispatch included)."""
    _model_rows(Writer(out / "models.csv"), "eager_ms", _eager_ms, deadline)


@section("models_graph", 150)
def models_graph(out: Path, deadline: float) -> None:
    """The same forwards replayed from a CUDA graph: the kernels' GPU time without dispatch."""
    _model_rows(Writer(out / "models_graph.csv"), "graph_ms", _graph_ms, deadline)


@section("train", 80)
def train(out: Path, deadline: float) -> None:
    """One eager training step (forward, backward, SGD update) in fp32 and bf16 autocast."""
    w = Writer(out / "train.csv")
    vision = _model_zoo()
    for name in ("resnet50", "bert_base", "gpt2", "vit_b_16", "bert_large", "mobilenet_v2"):
        kind = "vision" if name in vision else "hf"
        with torch.device(DEV):
            model = (vision[name]() if kind == "vision" else _hf(name)).train()
        opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
        for precision in ("fp32", "amp_bf16"):
            for batch in (8, 32):
                if time.time() > deadline:
                    return
                seq = "" if kind == "vision" else 128
                fwd = _call(model, kind, batch, seq, torch.float32)

                def step(fwd=fwd, opt=opt, precision=precision):
                    with torch.autocast("cuda", dtype=torch.bfloat16,
                                        enabled=precision == "amp_bf16"):
                        y = fwd()
                    y = y if torch.is_tensor(y) else y[0]
                    y.float().mean().backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                try:
                    warm(step, 3)
                    t, err = events_ms(step, 5), ""
                except Exception as exc:
                    t, err = "", str(exc)[:200]
                w.row({"model": name, "precision": precision, "batch": batch, "seq": seq,
                       "optimizer": "sgd-momentum", "step_ms": t, "error": err})
        del model, opt
        torch.cuda.empty_cache()


@section("kernels", 25)
def kernels(out: Path, deadline: float) -> None:
    from torch.profiler import ProfilerActivity, profile

    w = Writer(out / "kernels.csv")
    vision = _model_zoo()
    for name, make in (
        ("resnet50", vision["resnet50"]), ("bert_base", lambda: _hf("bert_base"))):
        if time.time() > deadline:
            return
        with torch.device(DEV):
            net = make().eval().to(DEV, torch.float16)
        kind = "vision" if name == "resnet50" else "hf"
        call = _call(net, kind, 8, 128, torch.float16)
        with torch.inference_mode():
            warm(call, 3)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                call()
                torch.cuda.synchronize()
        for ev in prof.key_averages():
            if ev.device_type.name == "CUDA" or getattr(ev, "self_device_time_total", 0):
                w.row({"model": name, "precision": "fp16", "batch": 8, "kernel": ev.key[:160],
                       "count": ev.count,
                       "device_us": getattr(ev, "self_device_time_total",
                                            getattr(ev, "self_cuda_time_total", 0))})
        del net


@section("llm", 70)
def llm(out: Path, deadline: float) -> None:
    import transformers as tf

    w = Writer(out / "llm.csv")
    cfg = tf.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                         max_position_embeddings=131072, rope_theta=500000.0)
    with contextlib.suppress(Exception):  # transformers versions differ; sdpa is the default
        cfg._attn_implementation = "sdpa"
    with torch.device(DEV):
        torch.set_default_dtype(torch.bfloat16)
        model = tf.LlamaForCausalLM(cfg).eval()
        torch.set_default_dtype(torch.float32)
    with torch.inference_mode():
        for batch, seq in ((1, 128), (1, 512), (1, 2048), (8, 512), (32, 128)):
            if time.time() > deadline:
                return
            ids = torch.randint(0, 32000, (batch, seq), device=DEV)

            def prefill(ids=ids):
                return model(input_ids=ids, use_cache=True)
            cache = {"past": prefill().past_key_values}
            warm(prefill, 1)
            prefill_ms = events_ms(prefill, 3)
            nxt = torch.randint(0, 32000, (batch, 1), device=DEV)

            def decode(cache=cache, nxt=nxt):
                cache["past"] = model(input_ids=nxt, past_key_values=cache["past"],
                                      use_cache=True).past_key_values
            t0 = time.time()
            torch.cuda.synchronize()
            decode_ms = events_ms(decode, 16)
            w.row({"model": "llama-3.1-8b", "dtype": "bf16", "batch": batch, "input_tokens": seq,
                   "prefill_ms": prefill_ms, "decode_step_ms": decode_ms,
                   "wall_decode_s": time.time() - t0, "engine": "hf-transformers-eager",
                   "transformers": tf.__version__})


def env() -> dict:
    p = torch.cuda.get_device_properties(0)
    info = {**device_env(), "l2_bytes": getattr(p, "L2_cache_size", None),
            "python": platform.python_version(), "cudnn": torch.backends.cudnn.version(),
            "date": now()}
    for mod in ("torchvision", "transformers"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception as exc:
            info[mod] = f"unavailable: {exc}"
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default="", help="comma-separated sections")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("torch_eager: no CUDA device", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    info = env()
    errors: dict = {}
    chosen = set(filter(None, args.only.split(",")))
    for sec in (gemm, attention, vector, kernels, models, llm, models_graph, train):
        if not chosen or sec.section in chosen:
            sec(args.out, errors)
            info["errors"] = errors
            (args.out / "env.json").write_text(json.dumps(info, indent=1))
    print(json.dumps({k: v for k, v in info.items() if k != "errors"}), flush=True)
    print("errors:", {k: v[-300:] for k, v in errors.items()}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
