"""``roofcast.defaults`` is the one place of the defaults, and stays the only one: the source is
read with ``ast`` for a second default-estimator constant, dtype table or runtime table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from roofcast import defaults
from roofcast.dtypes import DTYPE_NAMES

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("graph_import", "hw_catalog", "predictor", "training_data", "app", "roofcast")
DEFAULTS_FILE = ROOT / "roofcast" / "defaults.py"
DTYPES_FILE = ROOT / "roofcast" / "dtypes.py"
ESTIMATOR_NAME = re.compile(r"^_?[A-Z][A-Z0-9_]*ESTIMATOR$")
#: the names of the dtype table's views: a literal assigned to one elsewhere is a second table
DTYPE_TABLE_NAME = re.compile(r"(^|_)(DTYPE_(BITS|BYTES|NAMES)|ITEMSIZE_BYTES|STORAGE_BYTES|"
                              r"(FLOAT|PEAK|WEIGHT|KV|ACTIVATION)_DTYPES)$")
COLLECTIONS = (ast.Dict, ast.DictComp, ast.Set, ast.SetComp, ast.Tuple, ast.List)


def _sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), filename=str(p))
            for top in PACKAGES for p in sorted((ROOT / top).rglob("*.py"))}


SOURCES = _sources()


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{node.lineno}"


def _assignments(tree: ast.Module):
    """(target name, value) of every assignment to a plain name."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value, node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            yield node.target.id, node.value, node


def _docstrings(tree: ast.Module) -> set[int]:
    return {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}


def _str_keys(node: ast.Dict) -> list[str]:
    return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def test_one_default_estimator_constant():
    values = {defaults.GRAPH_ESTIMATOR, defaults.SERVING_ESTIMATOR, defaults.PARALLEL_ESTIMATOR}
    estimators = ROOT / "predictor" / "estimators"  # where the names are the classes' own
    bad = []
    for path, tree in SOURCES.items():
        if path == DEFAULTS_FILE:
            continue
        bad += [_where(path, n) for name, _, n in _assignments(tree) if ESTIMATOR_NAME.match(name)]
        if estimators not in path.parents:
            bad += [_where(path, n) for n in _estimator_literals(tree) if n.value in values]
    assert bad == [], "import the default estimator from roofcast.defaults instead"


def _estimator_literals(tree: ast.Module):
    """String constants given as an estimator: a parameter default or keyword argument named
    ``estimator``, or the value of an ``"estimator"`` dict key (an ``auto`` elsewhere, e.g. a
    chart's text position or the learned estimator's own name, is not a default road)."""
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, ast.arguments):
            plain = node.posonlyargs + node.args
            pairs += list(zip(plain[len(plain) - len(node.defaults):], node.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True)
                      if d is not None]
            pairs = [(a.arg, d) for a, d in pairs]
        elif isinstance(node, ast.Call):
            pairs = [(k.arg, k.value) for k in node.keywords if k.arg]
        elif isinstance(node, ast.Dict):
            pairs = [(k.value, v) for k, v in zip(node.keys, node.values, strict=True)
                     if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        yield from (v for name, v in pairs if "estimator" in str(name)
                    and isinstance(v, ast.Constant) and isinstance(v.value, str))


def _is_dtype_table(node: ast.AST) -> bool:
    """A dict of >= 3 dtype spellings to sizes or to dtype names (a size or spelling table)."""
    if not isinstance(node, ast.Dict):
        return False
    keys = [k for k in _str_keys(node) if k in DTYPE_NAMES]
    values = [v.value for v in node.values if isinstance(v, ast.Constant)]
    return len(keys) >= 3 and len(values) == len(node.values) and all(
        type(v) is int or (isinstance(v, str) and v in DTYPE_NAMES) for v in values)


def test_one_dtype_table():
    bad = []
    for path, tree in SOURCES.items():
        if path == DTYPES_FILE:
            continue
        bad += [_where(path, n) for name, value, n in _assignments(tree)
                if DTYPE_TABLE_NAME.search(name) and isinstance(value, COLLECTIONS)]
        bad += [_where(path, n) for n in ast.walk(tree) if _is_dtype_table(n)]
    assert bad == [], "derive dtype facts from roofcast.dtypes instead of a second table"


def test_one_default_runtime_table():
    bad = [_where(path, n) for path, tree in SOURCES.items() if path != DEFAULTS_FILE
           for n in ast.walk(tree)
           if isinstance(n, ast.Dict) and {"cpu", "gpu"} <= set(_str_keys(n))]
    assert bad == [], "a runtime per device kind belongs in roofcast.defaults"


def test_the_scans_see_the_source():
    """Guards the scans above against walking nothing: they find what defaults.py holds."""
    assert DEFAULTS_FILE in SOURCES
    assert len(SOURCES) > 100
    names = {name for name, _, _ in _assignments(SOURCES[DEFAULTS_FILE])}
    assert {"GRAPH_ESTIMATOR", "RUNTIME_BY_KIND"} <= names
    assert _is_dtype_table(ast.parse('{"fp16": 2, "bf16": 2, "float": 4}').body[0].value)


def test_every_environment_variable_is_listed():
    found: dict[str, set[str]] = {}
    for path, tree in SOURCES.items():
        module = "roofcast." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = module.replace("roofcast.roofcast.", "roofcast.").removesuffix(".__init__")
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.fullmatch(
                    r"ROOFCAST_[A-Z0-9_]+", n.value):
                found.setdefault(n.value, set()).add(module)
    listed = {**defaults.LIMITS, **defaults.SETTINGS}
    assert set(found) == set(listed)
    assert all(listed[var] in modules for var, modules in found.items())


def test_defaults_are_known_estimators_and_live_in_one_place():
    import inspect

    from roofcast.predictor import estimator_registry, simulate
    from roofcast.predictor.estimator_registry import estimator_names
    from roofcast.predictor.llm import phases
    from roofcast.predictor.parallel import engine
    from roofcast.predictor.sweeps.families import FAMILY_SPECS

    roads = (defaults.GRAPH_ESTIMATOR, defaults.SERVING_ESTIMATOR, defaults.PARALLEL_ESTIMATOR)
    assert set(roads) <= set(estimator_names())
    used = (inspect.signature(simulate.predict_graph).parameters["estimator"].default,
            inspect.signature(phases.time_steps).parameters["estimator"].default,
            inspect.signature(engine.time_workload).parameters["estimator"].default)
    assert used == roads
    assert tuple(FAMILY_SPECS[f].estimator for f in ("graph", "serving", "parallel")) == roads
    for module in (estimator_registry, phases, simulate):  # no second name for a default
        assert not hasattr(module, "DEFAULT_ESTIMATOR")


@pytest.mark.parametrize("kind", sorted(defaults.RUNTIME_BY_KIND))
def test_default_runtimes_run_on_their_kind(kind):
    from roofcast.predictor.runtimes import get_runtime

    assert get_runtime(defaults.runtime_for(kind)).runs_on(kind)
    engine = get_runtime(defaults.engine_for(kind))
    assert engine.runs_on(kind)
    assert engine.serving is not None


def test_an_unknown_kind_gets_the_gpu_defaults():
    assert defaults.runtime_for("fpga") == defaults.RUNTIME_BY_KIND["gpu"]
    assert defaults.engine_for("fpga") == defaults.ENGINE_BY_KIND["gpu"]
