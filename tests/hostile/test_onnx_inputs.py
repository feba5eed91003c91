"""The hostile ONNX corpus (``tests/hostile/onnx_builders.py``): every case is refused with a
ModelImportError naming what is wrong, in-process and fast; the cases that used to cost
gigabytes or minutes also run through the CLI under a 2 GiB address-space limit and a timeout,
and must end as one line on stderr with exit 2."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roofcast.graph_import import import_model
from roofcast.graph_import.dims import parse_dim_specs
from roofcast.graph_import.errors import ModelImportError
from tests.hostile.onnx_builders import (
    HOSTILE,
    nested_functions,
)

#: case -> what the refusal must say
EXPECTED = {
    "nested_functions_30": r"nests functions/subgraphs .* ROOFCAST_MAX_NESTING",
    "nested_subgraphs_24": r"nests functions/subgraphs .* ROOFCAST_MAX_NESTING",
    "inferred_2_120_elements":
        rf"tensor 'c' .* has {2**120} elements .* ROOFCAST_MAX_TENSOR_ELEMS",
    "graph_bytes_over_budget":
        r"tensors add up to \d+ bytes, over the limit .* ROOFCAST_MAX_GRAPH_BYTES",
    "empty_cast_input": r"node '#0' \(Cast\) has no tensor for its required input 0",
    "empty_identity_input": r"node '#0' \(Identity\) has no tensor for its required input 0",
    "shape_without_input": r"node '#0' \(Shape\) has no tensor for its required input 0",
    "initializer_float_data_mismatch": r"data of tensor 'w' does not match its dims \[2, 3\]",
    "initializer_int64_data_mismatch": r"data of tensor 'shape' does not match its dims \[2\]",
    "dim_expression_out_of_range":
        r"dim 's\*s\*s\*s\*s\*s' of tensor 'z' is 10{30} .* ROOFCAST_MAX_TENSOR_ELEMS",
    "string_shape_operand": r"reads initializer 'shape' of type tensor\(string\) as its input 1",
    "conv_group_zero": r"node 'conv0' \(Conv\) has group=0: a convolution needs group >= 1",
}
#: cases that are valid, only large: they must import (shapes only) without materialising
VALID_BUT_LARGE = {
    "huge_range", "huge_range_constant", "huge_constant_of_shape", "huge_expand", "huge_tile",
    "long_vector_input",
}
#: cases that are odd but valid: they import
VALID = VALID_BUT_LARGE | {"string_initializer"}


def test_every_case_has_an_expectation():
    assert set(HOSTILE) == set(EXPECTED) | VALID


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_refused_with_a_clear_message(case):
    build, dims = HOSTILE[case]
    with pytest.raises(ModelImportError, match=EXPECTED[case]):
        import_model(build(), dims=parse_dim_specs(dims))


#: the valid-but-large cases and the output shape each must import with
LARGE_SHAPES = {
    "huge_range": [2**34],
    "huge_range_constant": [2**34],
    "huge_constant_of_shape": [2**33],
    "huge_expand": [2**33],
    "huge_tile": [2**33],
    "long_vector_input": [2**30],
}


def test_large_generated_vectors_are_shapes_only():
    """Range/ConstantOfShape/Expand/Tile of billions of elements, and a 1-D input as long, read
    by Add (which ONNX data propagation follows; these took 12 GB and more): the shapes are
    inferred and nothing is built. One subprocess under the memory limit runs them all."""
    assert set(LARGE_SHAPES) == VALID_BUT_LARGE
    code = (
        "import json\n"
        "from roofcast.graph_import import import_model\n"
        "from tests.hostile.onnx_builders import HOSTILE\n"
        f"cases = {sorted(LARGE_SHAPES)!r}\n"
        "print(json.dumps({c: list(import_model(HOSTILE[c][0]()).outputs[0].shape)"
        " for c in cases}))"
    )
    start = time.monotonic()
    done = _python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - start < 30
    assert json.loads(done.stdout) == LARGE_SHAPES


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
    with pytest.raises(ModelImportError,
                       match=r"at least \d+ nodes .* over the limit of 1000 .* ROOFCAST_MAX_NODES"):
        import_model(nested_functions(depth=12))


def test_bad_budget_setting_is_refused(monkeypatch):
    monkeypatch.setenv("ROOFCAST_MAX_TENSOR_ELEMS", "lots")
    with pytest.raises(ModelImportError,
                       match="ROOFCAST_MAX_TENSOR_ELEMS='lots' is not a positive"):
        import_model(HOSTILE["conv_group_zero"][0]())


def test_user_dim_cap():
    build = HOSTILE["dim_expression_out_of_range"][0]
    with pytest.raises(ModelImportError,
                       match=r"--dim s=100000000 is too large.* ROOFCAST_MAX_DIM"):
        import_model(build(), dims={"s": 100_000_000})


# --- through the CLI, in a subprocess under a memory limit --------------------------------------

REPO_ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT_BYTES = 2 * 2**30
TIMEOUT_S = 60
#: the cases that cost >2 GB or >90 s before the budgets
HEAVY = ("huge_range_constant", "nested_functions_30")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    """``python -c code args`` from the repository root under the memory limit and timeout."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True,
        timeout=TIMEOUT_S, preexec_fn=_limit_memory, cwd=REPO_ROOT,
    )


def _roofcast(*args: str) -> subprocess.CompletedProcess:
    return _python("import sys; from roofcast.app.cli import main; sys.exit(main())", *args)


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
