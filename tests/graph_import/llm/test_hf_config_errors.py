"""Every bad config.json a user can give ends in one ``LLMConfigError`` that names the field or
the problem; no other exception escapes."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofcast.graph_import.errors import LLMConfigError, ModelImportError
from roofcast.graph_import.llm.families import READERS
from roofcast.graph_import.llm.hf_config import MAX_CONFIG_BYTES, arch_from_config, parse_config
from roofcast.graph_import.llm.load import load_llm

LLAMA = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "hidden_act": "silu",
}

#: every field some reader reads
FIELDS = (
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "vocab_size", "max_position_embeddings", "hidden_act", "head_dim",
    "tie_word_embeddings", "attention_bias", "mlp_bias", "sliding_window", "num_local_experts",
    "num_experts_per_tok", "use_sliding_window", "max_window_layers", "n_embd", "n_head",
    "n_layer", "n_inner", "n_positions", "activation_function", "rotary_dim", "rotary_pct",
    "use_parallel_residual", "ffn_dim", "word_embed_proj_dim", "enable_bias",
    "new_decoder_architecture", "multi_query", "num_kv_heads", "parallel_attn", "alibi", "bias",
    "ffn_hidden_size", "seq_length", "partial_rotary_factor", "kv_channels",
    "num_key_value_heads_per_layer", "hidden_activation", "activation",
)  # fmt: skip


def refused(ref) -> str:
    """The message of the ``LLMConfigError`` that loading ``ref`` raises."""
    with pytest.raises(LLMConfigError) as info:
        load_llm(ref)
    return str(info.value)


def config_bytes(**changes) -> bytes:
    config = {**LLAMA, **changes}
    return json.dumps({k: v for k, v in config.items() if v is not ...}).encode()


def test_the_error_is_a_model_import_error():
    assert issubclass(LLMConfigError, ModelImportError)


@pytest.mark.parametrize(
    "field",
    ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
     "max_position_embeddings"],
)  # fmt: skip
def test_a_missing_field_is_named_with_the_family(field):
    message = refused(config_bytes(**{field: ...}))
    assert f"config.json lacks '{field}' (needed for llama models)" in message


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (-4096, "from 1 to"),
        (0, "from 1 to"),
        (10**30, "from 1 to"),
        (True, "got true"),
        ("4096", "got '4096'"),
        (4096.5, "whole number"),
        ([4096], "whole number"),
        (None, "lacks 'hidden_size'"),
    ],
)
def test_a_bad_size_names_the_field(value, words):
    message = refused(config_bytes(hidden_size=value))
    assert "hidden_size" in message
    assert words in message


def test_a_whole_float_is_taken():
    assert load_llm(config_bytes(hidden_size=4096.0)).d_model == 4096


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"[1, 2, 3]", "JSON list, not an object"),
        (b'{"model_type": "llama", "hidden_size": NaN}', "NaN"),
        (b'{"model_type": "llama", "hidden_size": Infinity}', "Infinity"),
        (b'{"model_type": "llama", "hidden_size": 1e999}', "hidden_size"),
        (b'{"model_type": "llama",', "not valid JSON"),
        (b"{" + b'"a":' * 1 + b"[" * 200_000 + b"}", "not valid JSON"),
        (b'{"a": ' + b"9" * 5000 + b"}", "not valid JSON"),
        (b"{\xff\xfe}", "not UTF-8"),
    ],
)
def test_bad_json_is_refused(data, words):
    assert words in refused(data)


def test_a_json_string_is_not_a_config():
    with pytest.raises(LLMConfigError, match="JSON str, not an object"):
        parse_config(b'"llama"')


def test_an_oversized_config_is_refused():
    data = b'{"pad": "' + b"x" * MAX_CONFIG_BYTES + b'"}'
    assert "over the" in refused(data)
    with pytest.raises(LLMConfigError, match="over the"):
        parse_config(data)


def test_model_type_missing_or_unknown_lists_the_known_ones():
    assert "lacks 'model_type'" in refused(config_bytes(model_type=...))
    message = refused(config_bytes(model_type="rwkv"))
    assert "model_type 'rwkv'" in message
    for family in ("llama", "mixtral", "falcon"):
        assert family in message
    assert "not a decoder family" in refused(config_bytes(model_type=7))


def test_heads_must_divide_the_hidden_size_without_head_dim():
    message = refused(config_bytes(hidden_size=4095))
    assert "'num_attention_heads' (32) does not divide the hidden size (4095)" in message
    assert load_llm(config_bytes(hidden_size=4095, head_dim=128)).head_dim == 128


def test_implausibly_wide_attention_is_refused():
    message = refused(
        config_bytes(num_attention_heads=16384, num_key_value_heads=..., head_dim=1024)
    )
    assert "16384 heads of 1024" in message


def test_kv_heads_must_divide_heads():
    assert "'num_key_value_heads' (5) must divide 'num_attention_heads' (32)" in refused(
        config_bytes(num_key_value_heads=5)
    )


def test_experts_per_token_at_most_the_experts():
    message = refused(
        config_bytes(model_type="mixtral", num_local_experts=8, num_experts_per_tok=9)
    )
    assert "'num_experts_per_tok' (9) exceeds 'num_local_experts' (8)" in message
    assert "lacks 'num_local_experts'" in refused(
        config_bytes(model_type="mixtral", num_experts_per_tok=2)
    )


def test_unknown_activation_lists_the_known_ones():
    message = refused(config_bytes(hidden_act="tanh"))
    assert "'hidden_act' is 'tanh'" in message
    for value in ("silu", "gelu_new"):
        assert value in message


def test_bad_flag_is_named():
    assert "'tie_word_embeddings' must be true or false, got 1" in refused(
        config_bytes(tie_word_embeddings=1)
    )


def test_gpt2_family_names_its_own_fields():
    message = refused(
        json.dumps(
            {
                "model_type": "gpt2",
                "n_embd": 768,
                "n_layer": 12,
                "vocab_size": 50257,
                "n_positions": 1024,
            }
        ).encode()
    )
    assert "'n_head' or 'num_attention_heads'" in message
    assert "gpt2 models" in message


def test_decilm_with_varying_kv_heads_is_read_layer_by_layer():
    varying = load_llm(config_bytes(
        model_type="deci",
        num_key_value_heads=...,
        num_key_value_heads_per_layer=[4] * 16 + [2] * 16,
    ))
    assert [k.attention.n_kv_heads for k in varying.kinds] == [4] * 16 + [2] * 16
    equal = config_bytes(
        model_type="deci", num_key_value_heads=..., num_key_value_heads_per_layer=[4] * 32
    )
    assert load_llm(equal).n_kv_heads == 4
    assert load_llm(equal).uniform
    short = config_bytes(model_type="deci", num_key_value_heads_per_layer=[4, 2])
    assert "one per layer" in refused(short)


def test_qwen2_moe_shapes_it_cannot_state_are_refused_and_dense_layers_read():
    moe = {
        "model_type": "qwen2_moe",
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408,
    }
    assert "not a whole multiple" in refused(
        config_bytes(**moe, shared_expert_intermediate_size=5000)
    )
    dense_first = load_llm(config_bytes(**moe, mlp_only_layers=[0]))
    assert dense_first.kinds[0].moe is None
    assert dense_first.kinds[1].moe is not None
    assert dense_first.kinds[0].mlp.d_ff == 11008  # intermediate_size
    assert "lacks 'moe_intermediate_size'" in refused(
        config_bytes(**{**moe, "moe_intermediate_size": ...})
    )


def test_known_but_unrepresentable_families_say_why():
    message = refused(config_bytes(model_type="minimax_m1"))
    assert "model_type 'minimax_m1' cannot be modelled" in message
    assert "lightning (linear) attention" in message
    assert "\n" not in message


def test_opt_with_projected_embeddings_is_refused():
    opt = {"model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096, "num_hidden_layers": 24,
           "num_attention_heads": 16, "vocab_size": 50272, "max_position_embeddings": 2048,
           "word_embed_proj_dim": 512}  # fmt: skip
    assert "'word_embed_proj_dim' (512) differs" in refused(json.dumps(opt).encode())


def test_qwen2_sliding_window_on_some_layers_only_is_read_layer_by_layer():
    some = load_llm(config_bytes(
        model_type="qwen2", use_sliding_window=True, sliding_window=4096, max_window_layers=16
    ))
    assert [k.attention.window for k in some.kinds] == [0] * 16 + [4096] * 16
    all_layers = config_bytes(
        model_type="qwen2", use_sliding_window=True, sliding_window=4096, max_window_layers=0
    )
    assert load_llm(all_layers).sliding_window == 4096


def test_arch_from_config_refuses_a_non_mapping():
    with pytest.raises(LLMConfigError, match="must be a JSON object"):
        arch_from_config([1, 2])  # type: ignore[arg-type]


# ------------------------------------------------------------------ files and folders


def test_folder_without_config_json(tmp_path):
    assert "holds no config.json" in refused(tmp_path)
    assert "holds no config.json" in refused(str(tmp_path))


def test_missing_file(tmp_path):
    assert "no such file" in refused(tmp_path / "config.json")
    assert "no such file" in refused(str(tmp_path / "nope.json"))


def test_a_symlink_to_a_config_is_followed_but_not_to_a_device(tmp_path):
    real = tmp_path / "blob"
    real.write_bytes(config_bytes())
    link = tmp_path / "config.json"
    os.symlink(real, link)
    assert load_llm(tmp_path).d_model == 4096
    dev = tmp_path / "dev.json"
    os.symlink("/dev/zero", dev)
    assert "not a regular file" in refused(dev)
    dangling = tmp_path / "dangling.json"
    os.symlink(tmp_path / "gone", dangling)
    assert "no such file" in refused(dangling)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    assert "not a regular file" in refused(fifo)


def test_a_big_file_is_refused_before_reading(tmp_path):
    big = tmp_path / "config.json"
    with open(big, "wb") as fh:
        fh.truncate(MAX_CONFIG_BYTES + 1)
    assert "over the" in refused(big)


def test_garbage_file_and_list_file(tmp_path):
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(bytes(range(256)) * 4)
    assert "not UTF-8" in refused(garbage)
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    assert "JSON list" in refused(listed)


def test_odd_references():
    assert "empty model reference" in refused("  ")
    assert "cannot read an LLM from a int" in refused(7)  # type: ignore[arg-type]
    assert "no bundled LLM" in refused("bad\x00name")


# ------------------------------------------------------------------ fuzz

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    model_type=st.sampled_from(sorted(READERS)),
    changes=st.dictionaries(st.sampled_from(sorted(FIELDS)), JSON_VALUES, max_size=4),
)
def test_any_field_values_give_an_arch_or_a_config_error(model_type, changes):
    config = {**LLAMA, "model_type": model_type, **changes}
    message = ""
    try:
        arch = arch_from_config(config)
    except LLMConfigError as exc:
        message = str(exc)
    if message:
        assert message.startswith("config.json")
    else:
        assert arch.params > 0
        assert arch.n_heads % arch.n_kv_heads == 0
