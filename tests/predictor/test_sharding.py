"""predictor.sharding: factorised divisors, the one divisibility check (one EP convention for
both roads), rank placement over nodes and the widths one rank runs."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.decoder import layer_kind
from roofcast.predictor.parallel.types import ParallelPlanError
from roofcast.predictor.sharding import (
    Sharding,
    check_ep,
    check_pp,
    check_sharding,
    check_tp,
    choices,
    divisors,
    group_layout,
    llm_shard,
    local_arch,
    local_kind,
    rank_of,
    split_length,
    stage_boundary_crosses,
)

MOE = LLMArch("moe", "mixtral", n_layers=4, d_model=256, n_heads=8, n_kv_heads=2, head_dim=32,
              d_ff=512, vocab=1000, max_context=1024, n_experts=8, experts_per_token=2)


def test_divisors_by_factorisation():
    assert divisors(1) == [1]
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert divisors(97) == [1, 97]
    assert divisors(2 * 3 * 3 * 5) == [d for d in range(1, 91) if 90 % d == 0]
    with pytest.raises(ValueError, match="positive integer"):
        divisors(0)


def test_huge_degrees_answer_at_once():
    start = time.perf_counter()
    assert divisors(2**31) == [2**k for k in range(32)]
    assert divisors(2**31 - 1) == [1, 2**31 - 1]  # a Mersenne prime: the sqrt bound
    with pytest.raises(ParallelPlanError, match=r"tp=3 does not divide the 2147483648 attention"):
        check_tp("huge", 3, 2**31)
    assert time.perf_counter() - start < 1.0


def test_choices_reads_as_a_list():
    assert choices([1]) == "1"
    assert choices([1, 2, 4]) == "1, 2 or 4"


def test_tp_rules_heads_kv_heads_and_width():
    check_tp("m", 16, 64, 8, 28672)  # 8 KV heads replicated over 16 ranks
    with pytest.raises(
        ParallelPlanError,
        match=r"tp=3 does not divide the 32 attention heads of m; use 1, 2, 4, 8, 16 or 32",
    ):
        check_tp("m", 3, 32, 8)
    with pytest.raises(ParallelPlanError, match="tp=2 does not divide the 3 KV heads"):
        check_tp("m", 2, 12, 3)
    with pytest.raises(ParallelPlanError, match="tp=6 is not a multiple of the 4 KV heads"):
        check_tp("m", 6, 12, 4)
    with pytest.raises(ParallelPlanError, match=r"tp=4 does not divide the 1002 MLP channels"):
        check_tp("m", 4, 8, 8, 1002)
    check_tp("m", 5, None)  # unknown heads: nothing to check


def test_pp_even_for_training_uneven_for_serving():
    check_pp("m", 3, 32, even=False)  # ceil(32 / 3) layers on the fullest stage
    with pytest.raises(ParallelPlanError, match="pp=3 does not divide the 32 layers"):
        check_pp("m", 3, 32, even=True)
    with pytest.raises(ParallelPlanError, match="pp=33 exceeds the 32 layers"):
        check_pp("m", 33, 32, even=False)


def test_one_ep_convention_for_both_roads():
    # training: whole experts (etp = 1), ep carved out of dp x tp
    check_ep("moe", 4, 8, group=2 * 2, group_text="dp x tp = 4")
    with pytest.raises(ParallelPlanError, match=r"ep=8 does not divide dp x tp = 4 .*use ep in "
                                                r"1, 2 or 4"):
        check_ep("moe", 8, 8, group=4, group_text="dp x tp = 4")
    # serving: etp = tp / ep, so ep * etp = tp: ep must divide tp
    check_sharding(MOE, Sharding(tp=4, ep=2))
    assert Sharding(tp=4, ep=2).moe_tp == 2
    with pytest.raises(ParallelPlanError, match=r"ep=4 does not divide tp = 2"):
        check_sharding(MOE, Sharding(tp=2, ep=4))
    odd = replace(MOE, d_ff=510)  # 2 x 3 x 5 x 17: an expert splits 2 ways, not 4
    with pytest.raises(ParallelPlanError, match=r"tp / ep = 4 devices per expert do not divide "
                                                r"the 510 channels .* use ep in 4 or 8"):
        check_sharding(odd, Sharding(tp=8, ep=2))
    # both: ep divides the experts, and only a mixture of experts takes ep > 1
    with pytest.raises(ParallelPlanError, match="ep=3 does not divide the 8 experts of moe"):
        llm_shard(MOE, tp=1, ep=3, sequence_parallel=False)
    dense = replace(MOE, name="dense", n_experts=1, experts_per_token=1)
    for refuse in (lambda: check_sharding(dense, Sharding(ep=2)),
                   lambda: llm_shard(dense, tp=1, ep=2, sequence_parallel=False)):
        with pytest.raises(ParallelPlanError, match="ep=2 needs a mixture-of-experts model; dense"):
            refuse()


def test_expert_width_per_road():
    serving = local_arch(MOE, Sharding(tp=4, ep=2))  # experts split moe_tp = 2 ways
    assert (serving.n_heads, serving.n_kv_heads, serving.d_ff) == (2, 1, 256)
    training = llm_shard(MOE, tp=4, ep=2, sequence_parallel=True)  # whole experts
    assert (training.experts, training.expert_d_ff, training.etp) == (4, 512, 1)
    assert llm_shard(MOE, tp=4, ep=1, sequence_parallel=False).expert_d_ff == 128


def test_local_kind_matches_both_roads_widths():
    kind = layer_kind(MOE)
    rank = local_kind(kind, tp=4, etp=2)
    assert (rank.attention.n_heads, rank.attention.n_kv_heads, rank.mlp.d_ff) == (2, 1, 256)
    assert rank.moe is not None
    assert rank.moe.n_experts == 8  # the router sees every expert


def test_split_length_pads_uneven_splits():
    assert split_length(32000, 3) == 10667
    assert split_length(50257, 8, pad=128) == 6400  # Megatron-LM: a multiple of 128 x tp


def test_rank_placement_over_nodes():
    assert rank_of(1, 2, 3, tp=4, dp=3) == (1 * 3 + 2) * 4 + 3
    assert group_layout(4, 8, 8) == (4, 1)  # dp over tp=8: one rank per node
    assert group_layout(8, 4, 8) == (4, 2)  # dp over tp=4: two per node
    assert group_layout(8, 1, 8) == (1, 8)  # tp adjacent
    # serving replica (dp = 1): the stage boundary at rank 8 leaves the first node
    assert [stage_boundary_crosses(s, tp=4, dp=1, devices_per_node=8) for s in (1, 2, 3)] \
        == [False, True, False]
    assert stage_boundary_crosses(1, tp=8, dp=1, devices_per_node=8)
