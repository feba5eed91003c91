"""A tiny ``ParallelSource`` for the engine tests: every block is x[T, d] @ w1[d, 4d] -> Relu
-> @ w2[4d, d] (T = micro_batch x seq tokens), built with ``workload_table`` in bf16 on the test
profile ``AS_WRITTEN``; tensor parallelism divides every row's flops and bytes by ``tp`` and adds
Megatron's 2 all-reduces of [T, d] per block in the forward and 2 in the backward; ``ep > 1``
adds 2 all-to-alls of [T, d] per block each way (dispatch, combine). Slot 0 holds
an embedding-like MatMul, slot L+1 a head MatMul; sizes per slot are round made-up numbers so
the memory tests can check exact values."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from roofcast.graph_import.types import Engine
from roofcast.predictor.config import RunConfig
from roofcast.predictor.parallel.types import CommOp, ModelFacts, ShardedWorkload
from roofcast.predictor.workload import workload_table
from tests.predictor.graph_helpers import AS_WRITTEN, graph, op, t

SCALED = ("flops", "bytes_read", "bytes_written", "weight_bytes")
ACT_PER_SAMPLE = 1000.0  # activation bytes per sample per block
CKPT_PER_SAMPLE = 100.0
BOUNDARY_PER_SAMPLE = 50.0


def block_graph(tokens: int, d: int):
    x, w1, h, r = t("x", tokens, d), t("w1", d, 4 * d), t("h", tokens, 4 * d), t("r", tokens, 4 * d)
    w2, y = t("w2", 4 * d, d), t("y", tokens, d)
    nodes = [op("mm1", "MatMul", [x, w1], [h], flops=2 * tokens * d * 4 * d,
                engine=Engine.MATRIX, weights=["w1"]),
             op("relu", "Relu", [h], [r], flops=tokens * 4 * d),
             op("mm2", "MatMul", [r, w2], [y], flops=2 * tokens * 4 * d * d,
                engine=Engine.MATRIX, weights=["w2"])]
    return graph(nodes, [x], [y], name="block")


@dataclass
class FakeSource:
    layers: int = 4
    heads: int = 8
    d: int = 256
    seq: int = 128
    experts: int | None = None
    param_scale: float = 1.0
    head_scale: float = 1.0  # param_elems of slot L+1 (the head) x this
    builds: list = field(default_factory=list)

    @property
    def facts(self) -> ModelFacts:
        return ModelFacts(name="fake", layers=self.layers, heads=self.heads, kv_heads=self.heads,
                          experts=self.experts, hidden=self.d, seq_tokens=self.seq)

    def build(self, *, tp: int, ep: int, micro_batch: int, sequence_parallel: bool,
              mode: str) -> ShardedWorkload:
        self.builds.append((tp, ep, micro_batch, sequence_parallel, mode))
        tokens = micro_batch * self.seq
        config = RunConfig(precision="bf16", mode="train" if mode == "train" else "infer",
                           runtime=AS_WRITTEN)
        block = workload_table(block_graph(tokens, self.d), config, AS_WRITTEN)
        block[list(SCALED)] = block[list(SCALED)] / tp
        parts = []
        for slot in range(self.layers + 2):
            rows = block.copy()
            rows["layer"] = slot
            rows["count"] = 1.0
            rows["key"] = rows["key"] + f"@{slot}"
            parts.append(rows)
        rows = pd.concat(parts, ignore_index=True)
        act_bytes = tokens * self.d * 2.0
        comms = tuple(CommOp("all_reduce", act_bytes, "tp", ph, slot, 2.0)
                      for slot in range(1, self.layers + 1) for ph in ("forward", "backward")
                      if tp > 1)
        comms += tuple(CommOp("all_to_all", act_bytes, "ep", ph, slot, 2.0)
                       for slot in range(1, self.layers + 1) for ph in ("forward", "backward")
                       if ep > 1)
        block_params = 8.0 * self.d * self.d / tp * self.param_scale
        n = self.layers + 2
        return ShardedWorkload(
            rows=rows, comms=comms,
            param_elems=np.array([block_params] * (n - 1) + [block_params * self.head_scale]),
            activation_bytes=np.full(n, ACT_PER_SAMPLE * micro_batch / tp),
            checkpoint_bytes=np.full(n, CKPT_PER_SAMPLE * micro_batch),
            boundary_bytes=BOUNDARY_PER_SAMPLE * micro_batch, config=config,
            runtime=AS_WRITTEN.name, notes=("fake source",))
