"""The tensor-sharding layout inferred from a graph (``predictor.parallel.tp_shard``)."""

from __future__ import annotations

import pytest

from roofcast.predictor.parallel import tp_shard
from roofcast.predictor.parallel.tp_shard import map_axis, shard_layout, split_fraction
from roofcast.predictor.training import requires_grad_tensors
from tests.predictor.parallel.graph_builders import attention_blocks, mlp_pair


def test_mlp_pair_is_column_then_row_parallel():
    g = mlp_pair(4)
    lay = shard_layout(g, requires_grad=frozenset(requires_grad_tensors(g)))
    assert lay.nodes["up"].rule == "column"
    assert lay.nodes["up"].gemm_role == "n"
    assert lay.nodes["act"].rule == "split"
    assert lay.nodes["down"].rule == "row"
    assert lay.nodes["down"].gemm_role == "k"
    assert lay.split_weights == {"w1": 64, "w2": 64}
    # the output is all-reduced once; x is a model input, so no backward collective
    assert [(c.collective, c.phase, c.tensor.name) for c in lay.comms] == [
        ("all_reduce", "forward", "y")]
    assert "y" not in lay.axis
    assert lay.axis["h"] == 1


def test_attention_block_splits_heads_and_pairs_collectives():
    g = attention_blocks(2, blocks=2)
    lay = shard_layout(g, requires_grad=frozenset(requires_grad_tensors(g)))
    assert lay.attention_heads == (12, 12)
    assert lay.nodes["b0_qk"].gemm_role == "b"
    assert lay.nodes["b0_softmax"].rule == "split"
    assert lay.axis["b0_q4"] == 2  # [b, s, heads, head_dim] split on the heads
    fwd = sorted(c.node for c in lay.comms if c.phase == "forward")
    bwd = sorted(c.node for c in lay.comms if c.phase == "backward")
    # Megatron: per block one all-reduce after attention and one after the MLP (forward) ...
    assert fwd == ["b0_down", "b0_o", "b1_down", "b1_o"]
    # ... and one on each column-parallel input's gradient (backward); the input
    # projection is column-parallel whose split meets the residual, so it stays replicated
    assert len(bwd) == 4
    assert all(c.collective == "all_reduce" for c in lay.comms)
    assert lay.nodes["embed"].rule == "replicated"


def test_sequence_parallel_turns_all_reduces_into_reduce_scatter_and_all_gather():
    g = attention_blocks(2, blocks=2)
    lay = shard_layout(g, sequence_parallel=True,
                       requires_grad=frozenset(requires_grad_tensors(g)))
    kinds = sorted((c.collective, c.phase) for c in lay.comms)
    assert kinds.count(("reduce_scatter", "forward")) == 4
    # before each column-parallel GEMM but the first: block 0 reads the replicated input
    assert kinds.count(("all_gather", "forward")) == 3
    assert ("all_reduce", "forward") not in kinds
    assert lay.axis["b0_n1"] == 1  # LayerNorm output split over the tokens


def test_map_axis_follows_heads_and_packed_qkv():
    assert map_axis((2, 4, 96), (2, 4, 12, 8), 2) == (2, 1)
    assert map_axis((2, 12, 4, 8), (2, 12, 32), 1) == (1, 1)
    assert map_axis((2, 4, 288), (2, 4, 3, 96), 2) == (3, 1)  # [q | k | v] interleaved per rank
    assert map_axis((2, 4, 96), (8, 96), 2) == (1, 1)
    assert map_axis((2, 4, 96), (2, 384), 2) == (1, 4)  # [4, 96] merged, split on the 96
    # torch's attention export: [s, b, d] -> [s, b * heads, head_dim] -> [b, heads, s, hd]
    assert map_axis((5, 2, 96), (5, 24, 8), 2) == (1, 2)
    assert map_axis((24, 5, 8), (2, 12, 5, 8), 0, outer=2) == (1, 1)
    assert map_axis((2, 4, 96), (2, 4, 7, 8), 2) is None  # not a reshape of the same tensor


def test_split_fraction_pads_uneven_splits():
    assert split_fraction(768, 4) == 0.25
    assert split_fraction(50257, 2) == pytest.approx(25129 / 50257)


def test_rules_are_a_registry_that_refuses_duplicates():
    assert {"matmul", "conv", "elementwise", "normalization", "softmax", "Reshape"} <= set(
        tp_shard.SHARD_RULES)
    with pytest.raises(RuntimeError, match="twice"):
        tp_shard.shard_rule("matmul")(lambda node, st: None)
