"""``roofcast models list|use|remove``: the installed learned models (``roofcast train --install``).

``list``: the shipped model (``default``) and every installed one with when it was created, what
it was trained on (rows per source), its validation medians (per-op APE on CPU and GPU rows,
end-to-end APE; grouped cross-validation) and which one is active; ``coverage``: per model the
(kind, runtime, family) it covers with its rows, and the families an installed model leaves to
the shipped base it layers on. ``use NAME``: make NAME the
model ``predict``/``compare``/``advise --estimator learned|auto``, the app and the Python API use
(``use default``: the shipped one). ``remove NAME``: delete the files its metadata lists.
``$ROOFCAST_LEARNED_MODEL=DIR`` still overrides the active model.
"""

from __future__ import annotations

import argparse

from roofcast.app.output import add_format_arg, emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="installed learned models: list, use, remove",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    models_sub = p.add_subparsers(dest="models_command", required=True)
    p_list = models_sub.add_parser("list", help="the shipped and the installed models")
    add_format_arg(p_list)
    p_list.set_defaults(func=run_list)
    p_use = models_sub.add_parser("use", help="make a model the active one ('default': shipped)")
    p_use.add_argument("name")
    p_use.set_defaults(func=run_use)
    p_rm = models_sub.add_parser("remove", help="delete an installed model")
    p_rm.add_argument("name")
    p_rm.set_defaults(func=run_remove)


def run_list(args: argparse.Namespace) -> int:
    import os

    from roofcast.predictor.learned.estimator import MODEL_ENV
    from roofcast.predictor.learned.installed import list_table, models_dir

    extra = {"model_folder": str(models_dir())}
    if os.environ.get(MODEL_ENV):
        extra["override"] = (
            f"${MODEL_ENV}={os.environ[MODEL_ENV]} is used instead of the active model"
        )
    emit({"models": list_table(), "coverage": coverage_table()}, args.format, extra=extra)
    return 0


def coverage_table():
    """Per model and (kind, runtime, family): the training rows of its own families, and for an
    installed model the shipped families it leaves to the base (``layer``: own | base)."""
    import pandas as pd

    from roofcast.predictor.learned.installed import DEFAULT_NAME, folder_of, installed_names
    from roofcast.predictor.learned.layered import coverage
    from roofcast.predictor.learned.metadata_schema import read_metadata
    from roofcast.predictor.learned.persistence import METADATA

    def cov(name: str) -> pd.DataFrame:
        return coverage(read_metadata(folder_of(name) / METADATA))

    base = cov(DEFAULT_NAME)
    parts = [base.assign(model=DEFAULT_NAME, layer="own")]
    for name in installed_names():
        own = cov(name)
        keys = ["kind", "runtime", "family"]
        left = base.merge(own[keys], on=keys, how="left", indicator=True)
        left = left[left["_merge"] == "left_only"].drop(columns="_merge")
        parts += [own.assign(model=name, layer="own"),
                  left.assign(model=name, layer=f"base ({DEFAULT_NAME})")]
    cols = ["model", "kind", "runtime", "family", "layer", "rows"]
    return pd.concat(parts, ignore_index=True)[cols]


def run_use(args: argparse.Namespace) -> int:
    from roofcast.predictor.learned.installed import use

    folder = use(args.name)
    print(f"roofcast models: {args.name} ({folder}) is now the active learned model")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    from roofcast.predictor.learned.installed import active_name, remove

    files = remove(args.name)
    print(f"roofcast models: removed {args.name} ({len(files)} files); active: {active_name()}")
    return 0
