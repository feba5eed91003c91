"""Dump a broad set of predictions to one CSV so two commits can be diffed bit for bit.

Run: ``python benchmarks/golden_outputs.py OUT.csv`` then ``diff`` two outputs (or
``--compare A.csv B.csv``, which prints a table of the rows that differ and exits 1 if any).
Covers one-device graph predictions (zoo models x devices x estimators x modes), memory,
compare, LLM serving (static and continuous batching, several engines and dtypes, systems),
parallel plans (train/infer, LLM and ONNX) and the serving plan search. Each row is
(case, key, value) with the value written by ``repr`` (full precision).
"""

from __future__ import annotations

import argparse
import sys
import warnings

import pandas as pd

import roofcast

ZOO = ("resnet50", "bert_base", "gpt2", "mobilenet_v2", "vit_b_16", "llama", "lstm_lm")
DEVICES = ("h100-sxm", "a100-40gb-pcie", "t4", "rtx-3090")
CPU = ("local",)
ESTIMATORS = ("roofline", "no-overlap", "time-roofline", "roofline+eff", "traffic", "learned")
LLMS = ("llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen1.5-7b")


def _rows(case: str, obj) -> list[tuple[str, str, str]]:
    out = []
    if isinstance(obj, pd.DataFrame):
        for i, rec in enumerate(obj.to_dict("records")):
            for k, v in rec.items():
                out.append((case, f"{i}:{k}", repr(v)))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.append((case, str(k), repr(v)))
    else:
        out.append((case, "value", repr(obj)))
    return out


def _try(rows, case, fn):
    try:
        rows += _rows(case, fn())
    except Exception as exc:  # a failure is an output too
        rows.append((case, "error", f"{type(exc).__name__}: {exc}"))


def graph_cases(rows):
    for model in ZOO:
        dims = {"sequence": 128} if model in ("bert_base", "gpt2", "llama", "lstm_lm") else {}
        for hw in DEVICES:
            for est in ESTIMATORS:
                for mode in ("infer", "train"):
                    case = f"predict|{model}|{hw}|{est}|{mode}"
                    def f(model=model, hw=hw, est=est, mode=mode, dims=dims):
                        p = roofcast.predict(model, hw, batch=8, dims=dims, estimator=est,
                                             mode=mode, precision="fp16")
                        d = {"total_s": p.total_s, "time_s": p.time_s, "lower_s": p.lower_s,
                             "upper_s": p.upper_s}
                        mem = getattr(p, "memory", None)
                        if mem is not None:
                            d["memory"] = mem if not hasattr(mem, "__dict__") else vars(mem)
                        d["per_op_sum"] = float(p.per_op["time_s"].sum())
                        return d
                    _try(rows, case, f)
        _try(rows, f"compare|{model}", lambda model=model, dims=dims: roofcast.compare(
            model, list(DEVICES), batch=4, dims=dims))
        _try(rows, f"predict-cpu|{model}", lambda model=model, dims=dims: {
            "t": roofcast.predict(model, "xeon-8380" if False else DEVICES[0], batch=1,
                                  dims=dims, runtime=None).total_s})


def llm_cases(rows):
    for m in LLMS:
        for hw in ("h100-sxm", "a100-80gb-sxm", "l40s"):
            for kw in ({"batch": 1}, {"batch": 16}, {"concurrency": 32}, {"concurrency": "max"},
                       {"batch": 8, "weights": "fp8", "kv_cache": "fp8"},
                       {"batch": 8, "runtime": "tensorrt-llm"},
                       {"batch": 4, "weights": "int4"}):
                case = f"llm|{m}|{hw}|{sorted(kw.items())}"
                _try(rows, case, lambda m=m, hw=hw, kw=kw: roofcast.api.llm_row(
                    roofcast.llm(m, hw, input_tokens=512, output_tokens=128, **kw)))
        _try(rows, f"llm-system|{m}", lambda m=m: roofcast.api.llm_row(
            roofcast.llm(m, system="hgx-h100", tp=8, batch=8)))
        _try(rows, f"llm-system-ep|{m}", lambda m=m: roofcast.api.llm_row(
            roofcast.llm(m, system="hgx-h100", tp=4, ep=2, batch=8)))


def parallel_cases(rows):
    for m, sysid, kw in (
        ("llama-3.1-8b", "hgx-h100", {"tp": 2, "pp": 2}),
        ("llama-3.1-70b", "hgx-h100", {"tp": 8}),
        ("mixtral-8x7b", "hgx-h100", {"tp": 2, "ep": 4, "sequence_parallel": True}),
        ("bert_base", "hgx-h100", {"tp": 2}),
    ):
        for mode in ("train", "infer"):
            case = f"parallel|{m}|{sysid}|{sorted(kw.items())}|{mode}"
            def f(m=m, sysid=sysid, kw=kw, mode=mode):
                extra = {"dims": {"sequence": 128}} if m == "bert_base" else {}
                p = roofcast.predict(m, system=sysid, global_batch=64, mode=mode, **kw, **extra)
                return p.as_dict()
            _try(rows, case, f)
    for m in ("llama-3.1-8b", "mixtral-8x7b"):
        _try(rows, f"plan-train|{m}", lambda m=m: roofcast.plan(
            m, "hgx-h100", global_batch=64, mode="train").table)
        _try(rows, f"plan-serve|{m}", lambda m=m: roofcast.plan(m, "hgx-h100", mode="serve"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", nargs="?")
    ap.add_argument("--compare", nargs=2)
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (pd.read_csv(p, dtype=str, keep_default_na=False) for p in args.compare)
        m = a.merge(b, on=["case", "key"], how="outer", suffixes=("_a", "_b"), indicator=True)
        diff = m[(m["_merge"] != "both") | (m["value_a"] != m["value_b"])]
        print(f"{len(m)} rows, {len(diff)} differ")
        if len(diff):
            print(diff.head(200).to_string())
        return 1 if len(diff) else 0
    warnings.simplefilter("ignore")
    rows: list = []
    graph_cases(rows)
    llm_cases(rows)
    parallel_cases(rows)
    pd.DataFrame(rows, columns=["case", "key", "value"]).to_csv(args.out or sys.stdout,
                                                                index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
