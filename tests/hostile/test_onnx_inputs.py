"""The hostile ONNX corpus (``tests/hostile/onnx_builders.py``): every case is refused with a
ModelImportError naming what is wrong, in-process and fast; the cases that used to cost
gigabytes or minutes also run through the CLI under a 2 GiB address-space limit and a timeout,
and must end as one line on stderr with exit 2."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import pytest

from roofcast.graph_import import import_model
from roofcast.graph_import.dims import parse_dim_specs
from roofcast.graph_import.errors import ModelImportError
from tests.hostile.onnx_builders import (
    HOSTILE,
    huge_range,
    huge_range_constant,
    nested_functions,
)

#: case -> what the refusal must say
EXPECTED = {
    "nested_functions_30": r"nests functions/subgraphs .* ROOFCAST_MAX_NESTING",
    "nested_subgraphs_24": r"nests functions/subgraphs .* ROOFCAST_MAX_NESTING",
    "inferred_2_120_elements": rf"tensor 'c' .* has {2**120} elements .* ROOFCAST_MAX_TENSOR_ELEMS",
    "graph_bytes_over_budget": r"tensors add up to \d+ bytes, over the limit .* ROOFCAST_MAX_GRAPH_BYTES",
    "empty_cast_input": r"node '#0' \(Cast\) has no tensor for its required input 0",
    "empty_identity_input": r"node '#0' \(Identity\) has no tensor for its required input 0",
    "shape_without_input": r"node '#0' \(Shape\) has no tensor for its required input 0",
    "initializer_float_data_mismatch": r"data of tensor 'w' does not match its dims \[2, 3\]",
    "initializer_int64_data_mismatch": r"data of tensor 'shape' does not match its dims \[2\]",
    "dim_expression_out_of_range": r"dim 's\*s\*s\*s\*s\*s' of tensor 'z' is 10{30} .* ROOFCAST_MAX_TENSOR_ELEMS",
    "string_shape_operand": r"reads initializer 'shape' of type tensor\(string\) as its input 1",
    "conv_group_zero": r"node 'conv0' \(Conv\) has group=0: a convolution needs group >= 1",
}
#: cases that are valid, only large: they must import (shapes only) without materialising
VALID_BUT_LARGE = {"huge_range", "huge_range_constant"}
#: cases that are odd but valid: they import
VALID = VALID_BUT_LARGE | {"string_initializer"}


def test_every_case_has_an_expectation():
    assert set(HOSTILE) == set(EXPECTED) | VALID


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_refused_with_a_clear_message(case):
    build, dims = HOSTILE[case]
    with pytest.raises(ModelImportError, match=EXPECTED[case]):
        import_model(build(), dims=parse_dim_specs(dims))


def test_large_range_has_its_shape_and_no_values():
    """Range(0, 2**34) read by Add: the shape is known, the 2**34 values are never built."""
    graph = import_model(huge_range_constant())
    assert graph.outputs[0].shape == (2**34,)
    graph = import_model(huge_range())
    assert graph.outputs[0].shape == (2**34,)


def test_string_initializer_passed_through_imports():
    graph = import_model(HOSTILE["string_initializer"][0]())
    assert graph.outputs[0].dtype == "string"
    assert graph.outputs[0].shape == (2,)


def test_budget_is_raised_by_its_environment_variable(monkeypatch):
    monkeypatch.setenv("ROOFCAST_MAX_NESTING", "40")
    graph = import_model(nested_functions(depth=12))  # 4096 nodes inlined, 12 deep
    assert len(graph.nx_graph) == 2**11
    monkeypatch.setenv("ROOFCAST_MAX_NESTING", "4")
    with pytest.raises(ModelImportError, match="over the limit of 4 levels"):
        import_model(nested_functions(depth=12))


def test_inlined_node_budget(monkeypatch):
    monkeypatch.setenv("ROOFCAST_MAX_NODES", "1000")
    with pytest.raises(ModelImportError, match=r"at least \d+ nodes .* over the limit of 1000 .* ROOFCAST_MAX_NODES"):
        import_model(nested_functions(depth=12))


def test_bad_budget_setting_is_refused(monkeypatch):
    monkeypatch.setenv("ROOFCAST_MAX_TENSOR_ELEMS", "lots")
    with pytest.raises(ModelImportError, match="ROOFCAST_MAX_TENSOR_ELEMS='lots' is not a positive"):
        import_model(HOSTILE["conv_group_zero"][0]())


def test_user_dim_cap():
    build = HOSTILE["dim_expression_out_of_range"][0]
    with pytest.raises(ModelImportError, match=r"--dim s=100000000 is too large.* ROOFCAST_MAX_DIM"):
        import_model(build(), dims={"s": 100_000_000})


# --- through the CLI, in a subprocess under a memory limit --------------------------------------

MEMORY_LIMIT_BYTES = 2 * 2**30
TIMEOUT_S = 60
#: the cases that cost >2 GB or >90 s before the budgets
HEAVY = ("huge_range_constant", "nested_functions_30")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def _roofcast(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from roofcast.app.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True,
        timeout=TIMEOUT_S, preexec_fn=_limit_memory, env={**os.environ, "PYTHONHASHSEED": "0"},
    )


@pytest.mark.parametrize("case", HEAVY)
def test_heavy_case_through_the_cli(case, tmp_path):
    path = tmp_path / f"{case}.onnx"
    path.write_bytes(HOSTILE[case][0]())
    start = time.monotonic()
    done = _roofcast("inspect", str(path), "--format", "json")
    elapsed = time.monotonic() - start
    assert "Traceback" not in done.stderr
    assert elapsed < 30
    if case in VALID_BUT_LARGE:
        assert done.returncode == 0, done.stderr
        assert '"nodes": 2' in done.stdout
    else:
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert "ROOFCAST_MAX_NESTING" in done.stderr


def test_huge_user_dim_on_a_zoo_model_is_refused_through_the_cli():
    """``--dim sequence=100000000`` on gpt2 took over 13 GB; now one line, exit 2."""
    done = _roofcast("inspect", "gpt2", "--dim", "sequence=100000000")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "--dim sequence=100000000 is too large" in done.stderr
    assert "ROOFCAST_MAX_DIM" in done.stderr
