"""``load_llm(ref)``: bundled names and HF ids in any case, config files and folders, config
bytes, ONNX delegation; unknown names list the close bundled ones."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path

import pytest

from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm.load import bundled_llms, load_llm

CONFIGS = resources.files("roofcast.graph_import.llm.configs")


@pytest.mark.parametrize(
    ("ref", "name"),
    [
        ("llama-3.1-70b", "llama-3.1-70b"),
        ("LLAMA-3.1-70B", "llama-3.1-70b"),
        ("meta-llama/Llama-3.1-70B", "llama-3.1-70b"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b"),
        ("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
        ("  meta-llama/llama-2-7b-hf ", "llama-2-7b"),
        ("Mixtral-8x7B-v0.1", "mixtral-8x7b"),
        ("tiiuae/falcon-180B", "falcon-180b"),
    ],
)
def test_by_name_or_hf_id(ref, name):
    assert load_llm(ref).name == name


def test_every_serving_data_model_maps_to_a_bundled_config():
    models = [
        "meta-llama/Llama-2-7b-hf", "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B",
        "meta-llama/Llama-2-70b-hf", "mistralai/Mistral-7B-v0.1", "mistralai/Mixtral-8x7B-v0.1",
        "Qwen/Qwen2-7B", "Qwen/Qwen2-72B", "EleutherAI/gpt-j-6b", "facebook/opt-6.7b",
        "huggyllama/llama-7b", "BAAI/Aquila-7B", "Qwen/Qwen1.5-7B", "bigscience/bloom-7b1",
        "codellama/CodeLlama-34b-Instruct-hf", "internlm/internlm-20b", "microsoft/phi-2",
        "Qwen/Qwen-72B",
    ]  # fmt: skip
    for hf_id in models:
        assert load_llm(hf_id).source.startswith("bundled:"), hf_id
    with pytest.raises(LLMConfigError, match="no bundled LLM named 'Deci/DeciLM-7B'"):
        load_llm("Deci/DeciLM-7B")  # per-layer KV heads: not representable, not bundled


def test_unknown_name_lists_close_names():
    with pytest.raises(LLMConfigError, match=r"close: llama-3\.1-8b") as info:
        load_llm("llama-3.1-8")
    assert "config.json path or folder" in str(info.value)


def _copy_config(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "My-Model"
    folder.mkdir()
    (folder / "config.json").write_bytes(CONFIGS.joinpath(f"{name}.json").read_bytes())
    return folder


def test_by_config_path_and_folder_equals_bundled(tmp_path):
    folder = _copy_config(tmp_path, "qwen2.5-72b")
    bundled = load_llm("qwen2.5-72b")
    for ref in (folder, str(folder), folder / "config.json", str(folder / "config.json")):
        arch = load_llm(ref)
        assert arch.name == "My-Model"
        assert arch.source == str(folder / "config.json")
        assert arch.params == bundled.params
        assert arch.kv_elements_per_token() == bundled.kv_elements_per_token()


def test_name_from_name_or_path(tmp_path):
    config = json.loads(CONFIGS.joinpath("mistral-7b.json").read_text())
    config["_name_or_path"] = "someone/Mistral-Finetune"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert load_llm(path).name == "someone/Mistral-Finetune"
    config["_name_or_path"] = "/fsx/checkpoints/run 7/../x"
    path.write_text(json.dumps(config))
    assert load_llm(path).name == tmp_path.name


def test_config_bytes():
    arch = load_llm(CONFIGS.joinpath("gpt2.json").read_bytes())
    assert (arch.family, arch.d_model, arch.n_layers) == ("gpt2", 768, 12)


def test_a_user_folder_named_like_a_bundled_model_does_not_shadow_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "llama-2-7b").mkdir()
    assert load_llm("llama-2-7b").source == "bundled:llama-2-7b"


def test_bundled_names_are_lower_case_and_sorted():
    names = bundled_llms()
    assert list(names) == sorted(names)
    assert all(n == n.lower() for n in names)


def test_onnx_path_and_bytes_go_to_the_onnx_reader(tmp_path, monkeypatch):
    from roofcast.graph_import.llm import onnx_decoder

    seen = []
    monkeypatch.setattr(
        onnx_decoder, "arch_from_onnx", lambda src, name=None: seen.append(src) or "arch"
    )
    onnx_path = tmp_path / "decoder.onnx"
    onnx_path.write_bytes(b"\x08\x07")
    assert load_llm(onnx_path) == "arch"
    assert load_llm(str(onnx_path)) == "arch"
    assert load_llm(b"\x08\x07") == "arch"
    assert seen == [onnx_path, onnx_path, b"\x08\x07"]


GPT2_EXPORT = Path(__file__).resolve().parents[3] / "training_data" / "zoo" / "llm" / "gpt2_kv.onnx"


def test_gpt2_from_onnx_and_from_its_config_agree():
    from_onnx, from_config = load_llm(GPT2_EXPORT), load_llm("gpt2")
    same = ("name", "family", "source")
    for field in dataclasses.fields(from_config):
        if field.name not in same:
            assert getattr(from_onnx, field.name) == getattr(from_config, field.name), field.name
    assert from_onnx.params == from_config.params == 124_429_824
