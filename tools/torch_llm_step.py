"""Engine-like LLM step timings on a CUDA device: a Llama-shaped decoder in plain PyTorch.

Standalone (imports only torch and its sibling ``cuda_timing.py``):
``python tools/torch_llm_step.py --out DIR [--budget-s 150]``.
What a serving engine's GPU does per step, without its scheduler: random weights (bf16, or fp8
e4m3 with per-tensor scales through ``torch._scaled_mm`` and the activation quantised in the
step), a static contiguous KV cache (bf16), rotary embedding, RMSNorm, SwiGLU, GQA attention
through ``scaled_dot_product_attention`` (flash/cuDNN backends), LM head on the last token.
Rows (``steps.csv``): ``phase`` decode (``batch`` sequences, one new token each, ``context``
keys) or prefill (``batch`` x ``context`` new tokens, causal); ``graph_ms``: one CUDA-graph
replay (GPU time, as engines run decode), ``eager_ms``: the same step launched op by op.
fp8 GEMMs take rows in multiples of 16: smaller batches are padded inside the GEMM (as
engines pad CUDA-graph batch sizes); attention runs on the real batch.
``<model>.config.json``: the HF-style config of each model built.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from cuda_timing import device_env, events_ms, graph_ms, now, warm

DEV = "cuda"
FP8 = getattr(torch, "float8_e4m3fn", None)
MODELS = {
    "llama-3.1-8b": {"layers": 32, "d": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
                     "ff": 14336, "vocab": 128256},
    "llama-3.1-70b": {"layers": 80, "d": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128,
                      "ff": 28672, "vocab": 128256},
    # 70B's layer shape, fewer layers so weights and KV fit one 80 GB card
    "llama-3.1-70b-20l": {"layers": 20, "d": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128,
                          "ff": 28672, "vocab": 128256},
}


class Linear:
    """y = x W^T in bf16, or in fp8 with per-tensor scales (x quantised in the step)."""

    def __init__(self, n: int, k: int, dtype: str):
        w = torch.randn(n, k, device=DEV, dtype=torch.bfloat16) * (1.0 / math.sqrt(k))
        self.fp8 = dtype == "fp8"
        if self.fp8:
            self.scale_w = torch.tensor(1.0 / 64, device=DEV)
            self.wt = (w * 64).to(FP8).t()
            self.scale_x = torch.tensor(1.0 / 16, device=DEV)
        else:
            self.w = w.contiguous()  # row-major (n, k), as nn.Linear keeps it
        del w

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self.fp8:
            return F.linear(x, self.w)
        rows = x.shape[0]
        pad = -rows % 16  # fp8 GEMMs take rows in multiples of 16: padded as engines do
        xq = (F.pad(x, (0, 0, 0, pad)) if pad else x) * 16
        y = torch._scaled_mm(xq.to(FP8), self.wt, scale_a=self.scale_x, scale_b=self.scale_w,
                             out_dtype=torch.bfloat16)
        return y[:rows] if pad else y


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * w


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Decoder:
    """Weights of a Llama-shaped decoder and one step over a caller-given KV view."""

    def __init__(self, m: dict, dtype: str):
        self.m = m
        d, hd = m["d"], m["head_dim"]
        qkv = (m["heads"] + 2 * m["kv_heads"]) * hd
        self.embed = torch.randn(m["vocab"], d, device=DEV, dtype=torch.bfloat16)
        self.layers = []
        for _ in range(m["layers"]):
            self.layers.append({
                "n1": torch.ones(d, device=DEV, dtype=torch.bfloat16),
                "n2": torch.ones(d, device=DEV, dtype=torch.bfloat16),
                "qkv": Linear(qkv, d, dtype), "o": Linear(d, m["heads"] * hd, dtype),
                "gu": Linear(2 * m["ff"], d, dtype), "down": Linear(d, m["ff"], dtype)})
        self.norm = torch.ones(d, device=DEV, dtype=torch.bfloat16)
        self.head = Linear(m["vocab"], d, dtype)

    def step(self, ids: torch.Tensor, kv: list, ctx: int, new: int, cos, sin) -> torch.Tensor:
        """ids (B, new); kv[layer] = (k, v) of shape (B, kv_heads, ctx, hd), the last ``new``
        positions written this step; attention over all ``ctx`` keys (causal when new > 1)."""
        m = self.m
        b = ids.shape[0]
        hd, h, kvh = m["head_dim"], m["heads"], m["kv_heads"]
        x = self.embed[ids].reshape(b * new, m["d"])
        for layer, (kc, vc) in zip(self.layers, kv, strict=False):
            y = rmsnorm(x, layer["n1"])
            qkv = layer["qkv"](y).view(b, new, h + 2 * kvh, hd).transpose(1, 2)
            q = rope(qkv[:, :h], cos, sin)
            k = rope(qkv[:, h:h + kvh], cos, sin)
            kc[:, :, ctx - new:].copy_(k)
            vc[:, :, ctx - new:].copy_(qkv[:, h + kvh:])
            a = F.scaled_dot_product_attention(q, kc, vc, is_causal=new > 1, enable_gqa=True)
            x = x + layer["o"](a.transpose(1, 2).reshape(b * new, h * hd))
            y = rmsnorm(x, layer["n2"])
            g, u = layer["gu"](y).chunk(2, dim=-1)
            x = x + layer["down"](F.silu(g) * u)
        last = x.view(b, new, m["d"])[:, -1]
        return self.head(rmsnorm(last, self.norm))


def _time(fn, reps: int = 5) -> tuple[float, float]:
    """(eager mean ms, CUDA-graph replay ms)."""
    warm(fn, 2)
    return events_ms(fn, reps), graph_ms(fn, reps)


def cases(m: dict, kv_budget_tokens: int) -> list[tuple[str, int, int]]:
    out = [("prefill", 1, n) for n in (128, 512, 2048, 8192)] + [("prefill", 4, 2048)]
    for b in (1, 4, 16, 64, 128, 256):
        for ctx in (512, 2048, 8192):
            if b * ctx <= kv_budget_tokens:
                out.append(("decode", b, ctx))
    return out


def _case(dec: Decoder, m: dict, flat: torch.Tensor, phase: str, b: int, ctx: int
          ) -> tuple[float, float, str]:
    """(eager ms, graph ms, error) of one step over KV views carved from ``flat``."""
    new = 1 if phase == "decode" else ctx
    shape = (b, m["kv_heads"], ctx, m["head_dim"])
    n = math.prod(shape)
    kv = [(flat[(2 * i) * n:(2 * i + 1) * n].view(shape),
           flat[(2 * i + 1) * n:(2 * i + 2) * n].view(shape)) for i in range(m["layers"])]
    ids = torch.randint(0, 32000, (b, new), device=DEV)
    ang = torch.rand(new, m["head_dim"] // 2, device=DEV, dtype=torch.bfloat16)
    cos, sin = ang.cos(), ang.sin()
    try:
        eager, graph = _time(lambda: dec.step(ids, kv, ctx, new, cos, sin))
    except Exception as exc:  # recorded, the other cases go on
        msg = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return float("nan"), float("nan"), msg
    return eager, graph, ""


def run_model(name: str, dtype: str, w: csv.DictWriter, deadline: float, kv_gb: float) -> None:
    m = MODELS[name]
    dec = Decoder(m, dtype)
    per_token = 2 * m["layers"] * m["kv_heads"] * m["head_dim"] * 2
    budget = int(kv_gb * 1e9 / per_token)
    flat = torch.empty(budget * per_token // 2, device=DEV, dtype=torch.bfloat16)
    with torch.inference_mode():
        for phase, b, ctx in cases(m, budget):
            if time.time() > deadline:
                print(f"[{name} {dtype}] deadline", flush=True)
                break
            eager, graph, err = _case(dec, m, flat, phase, b, ctx)
            w.writerow({"model": name, "layers": m["layers"], "weights": dtype, "kv": "bf16",
                        "phase": phase, "batch": b, "context": ctx,
                        "new_tokens": 1 if phase == "decode" else ctx, "eager_ms": eager,
                        "graph_ms": graph, "error": err})
            print(f"[{name} {dtype}] {phase} b={b} ctx={ctx}: graph {graph:.3f} ms "
                  f"eager {eager:.3f} ms {err}", flush=True)
    del dec, flat
    torch.cuda.empty_cache()


def hf_config(name: str) -> dict:
    m = MODELS[name]
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": m["d"], "intermediate_size": m["ff"],
            "num_hidden_layers": m["layers"], "num_attention_heads": m["heads"],
            "num_key_value_heads": m["kv_heads"], "head_dim": m["head_dim"],
            "vocab_size": m["vocab"], "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": False}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--kv-gb", type=float, default=24.0)
    ap.add_argument("--plan", default="llama-3.1-8b:bf16,llama-3.1-8b:fp8,llama-3.1-70b-20l:fp8",
                    help="MODEL:WEIGHTS,... to time, in order")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("torch_llm_step: no CUDA device", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    plan = [tuple(item.split(":")) for item in args.plan.split(",") if item]
    fields = ["model", "layers", "weights", "kv", "phase", "batch", "context",
              "new_tokens", "eager_ms", "graph_ms", "error"]
    with open(args.out / "steps.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for i, (name, dtype) in enumerate(plan):
            share = (t0 + args.budget_s - time.time()) / (len(plan) - i)
            try:
                run_model(name, dtype, w, time.time() + share, args.kv_gb)
            except Exception as exc:
                print(f"[{name} {dtype}] failed: {exc}", flush=True)
            fh.flush()
            (args.out / f"{name}.config.json").write_text(json.dumps(hf_config(name), indent=1))
    (args.out / "llm_env.json").write_text(json.dumps(
        {**device_env(), "sdp_flash": torch.backends.cuda.flash_sdp_enabled(), "date": now(),
         "wall_s": time.time() - t0}, indent=1))
    print(f"done in {time.time() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
