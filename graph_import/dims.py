"""Parsing and checking of user dim bindings (``--dim batch=8``, ``--dim input_ids:1=128``).

A binding key is either a symbolic dim name as written in the model (``batch``) or
``input_name:axis`` (axis counted from 0, negative axes count from the end). Values are
positive integers no larger than ``MAX_DIM``.

``import_model`` ignores a name binding that matches no dim of the model (one ``{"batch": 8,
"sequence": 128}`` serves every zoo model). Where the names come from a user, call
``check_dim_names`` on the imported graph: a name that is none of the model's dims (``seq`` for
``sequence``) is then an error that lists them. ``with_default_batch`` adds the batch size 1
that a user who binds no batch gets.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from roofcast.graph_import.errors import ModelImportError

if TYPE_CHECKING:
    from roofcast.graph_import.types import Graph

MAX_DIM = 2**31 - 1  # one dim beyond int32 range is surely a typo
BATCH_DIM = "batch"  # the zoo's and the common exporters' name of the batch dim
DEFAULT_BATCH = 1


def parse_dim_specs(specs: Iterable[str]) -> dict[str, int]:
    """``["batch=8", "input_ids:1=128"]`` -> ``{"batch": 8, "input_ids:1": 128}``.

    Raises ModelImportError on a malformed spec or a repeated key with another value.
    """
    dims: dict[str, int] = {}
    for spec in specs:
        key, sep, raw = str(spec).rpartition("=")
        key = key.strip()
        if not sep or not key:
            raise ModelImportError(
                f"bad --dim {spec!r}: expected NAME=VALUE or INPUT:AXIS=VALUE, e.g. --dim batch=8"
            )
        dims_value = _parse_value(key, raw.strip())
        if key in dims and dims[key] != dims_value:
            raise ModelImportError(
                f"--dim {key} given twice ({dims[key]} and {dims_value}); give it once"
            )
        dims[key] = dims_value
    return check_dims(dims)


def check_dims(dims: Mapping[str, int]) -> dict[str, int]:
    """Validate a dims mapping (as passed to ``import_model``); returns a plain dict copy."""
    out: dict[str, int] = {}
    for key, value in dims.items():
        if not isinstance(key, str) or not key.strip():
            raise ModelImportError(f"bad dim name {key!r}: use the model's dim name, e.g. batch")
        if isinstance(value, bool) or not isinstance(value, int):
            value = _parse_value(key, str(value))
        if not 1 <= value <= MAX_DIM:
            raise ModelImportError(
                f"dim {key}={value} is out of range: give a positive integer <= {MAX_DIM}"
            )
        out[key.strip()] = value
    return out


def with_default_batch(dims: Mapping[str, int]) -> dict[str, int]:
    """``dims`` plus ``batch=DEFAULT_BATCH`` when they bind neither ``batch`` nor an axis 0 by
    position (``INPUT:0``, where exporters put the batch: a default there could contradict it;
    ``input_ids:1=128`` binds a sequence axis and keeps the default). A model without a dim
    named ``batch`` ignores the default."""
    out = dict(dims)
    axes = [split_input_axis(k) for k in out]
    if BATCH_DIM not in out and not any(a is not None and a[1] == 0 for a in axes):
        out[BATCH_DIM] = DEFAULT_BATCH
    return out


def model_dim_names(graph: Graph) -> tuple[str, ...]:
    """The symbolic dim names of an imported model's inputs: those bound at import
    (``graph.dims``) and those left unbound (``graph.unbound_dims``), ``INPUT:AXIS`` labels of
    unnamed axes left out."""
    names = [*graph.dims, *graph.unbound_dims]
    return tuple(dict.fromkeys(n for n in names if split_input_axis(n) is None
                               and not n.endswith(":*")))


def check_dim_names(dims: Mapping[str, int] | Iterable[str], graph: Graph) -> None:
    """ModelImportError when a dim name given by the user (``INPUT:AXIS`` keys aside: the import
    checks those) is none of ``graph``'s symbolic dims; the message lists the model's dims."""
    known = model_dim_names(graph)
    values = dims if isinstance(dims, Mapping) else dict.fromkeys(dims)
    unknown = [k for k in values if split_input_axis(k) is None and k not in known]
    if not unknown:
        return
    given = ", ".join(k if values[k] is None else f"{k}={values[k]}" for k in unknown)
    if known:
        what = f"its symbolic dims are: {', '.join(known)}"
        hint = f"; bind those, e.g. --dim {known[-1]}=N"
    else:
        what = "it has no symbolic dims (every input shape is fixed)"
        hint = ""
    raise ModelImportError(
        f"model {graph.name!r} has no dim named {', '.join(map(repr, unknown))} (--dim "
        f"{given}); {what}{hint}"
    )


def split_input_axis(key: str) -> tuple[str, int] | None:
    """``"input_ids:1"`` -> ``("input_ids", 1)``; a plain dim name -> None.

    The axis is whatever follows the *last* colon, so input names containing ':' still work.
    """
    name, sep, axis = key.rpartition(":")
    if not sep or not name:
        return None
    try:
        return name, int(axis)
    except ValueError:
        return None


def _parse_value(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ModelImportError(
            f"bad value {raw!r} for dim {key}: give a positive integer, e.g. --dim {key}=8"
        ) from None


_FUNCS = {"Min": min, "Max": max, "min": min, "max": max}


def dim_expr_names(expr: str) -> set[str] | None:
    """The symbolic names in a dim expression such as ``past_sequence + sequence``; None when
    ``expr`` is not a simple arithmetic expression."""
    tree = _parse_expr(expr)
    if tree is None:
        return None
    return {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in _FUNCS
    }


def eval_dim_expr(expr: str, bound: Mapping[str, int]) -> int | None:
    """Value of a dim expression (``+ - * // / %``, parentheses, ``Min``/``Max``, integer
    literals, names) with ``bound`` names; None when a name is unbound or ``expr`` is not such
    an expression. Exporters write these for derived axes (``past_sequence + sequence``,
    ``2*s0``, ``Min(4096, s1)``)."""
    tree = _parse_expr(expr)
    if tree is None:
        return None
    try:
        value = _eval(tree.body, bound)
    except (KeyError, ValueError, ZeroDivisionError, TypeError):
        return None
    return int(value) if value == int(value) and value >= 0 else None


def _parse_expr(expr: str) -> ast.Expression | None:
    if not expr or len(expr) > 200:
        return None
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return None
    allowed = (
        ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Call, ast.Load,
        ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div, ast.Mod, ast.USub, ast.UAdd,
    )
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            return None
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords
        ):
            return None
        if isinstance(node, ast.Constant) and type(node.value) is not int:
            return None
    return tree


_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Div: lambda a, b: a / b,
    ast.Mod: lambda a, b: a % b,
}


def _eval(node: ast.AST, bound: Mapping[str, int]) -> float:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return bound[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, bound)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, bound), _eval(node.right, bound))
    if isinstance(node, ast.Call):
        return _FUNCS[node.func.id](*(_eval(a, bound) for a in node.args))
    raise ValueError(f"unsupported expression node {type(node).__name__}")
