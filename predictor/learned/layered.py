"""A user's learned model layered on the shipped base: retraining adds, never drops.

``layer(base, user, name)`` is one ``LayeredModel``: the base's per-family models plus the user's,
the user's keyed ``<road>/<family>@<name>`` (roads renamed to the base's for the same kind and
runtime). A row uses the user's model when it has the row's family on its road and the row's
device lies within ``ood.DEVICE_DISTANCE`` of the user's training devices of that kind (or the
base lacks the family); else the base's; else the analytical fallback, as any learned model.
``fallback_notes`` says, per (device kind, family), which rows did not take the user's layer.
``coverage(meta)``: the (kind, runtime, family, rows) a model's metadata covers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from roofcast.predictor.learned.features import learned_features
from roofcast.predictor.learned.ood import DEVICE_DISTANCE, DeviceSet
from roofcast.predictor.learned.predictor import LearnedModel
from roofcast.predictor.learned.roads import ROAD_SEP, model_runtimes, road_kind, road_of

#: between a model key and the name of the user layer that holds it (``gpu/conv@mine``).
LAYER_SEP = "@"


@dataclass
class LayeredModel(LearnedModel):
    """A base model with a user's layer on top (module docstring)."""

    layer: str = ""
    layer_devices: dict[str, DeviceSet] = field(default_factory=dict)

    def row_keys(self, X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        keys, borrowed, notes = super().row_keys(X)
        own = np.array([f"{k}{LAYER_SEP}{self.layer}" if k else "" for k in keys], dtype=object)
        has = np.array([k in self.models for k in own], dtype=bool)
        use = has & (self._near(X, has) | ~np.array([k in self.models for k in keys], bool))
        return np.where(use, own, keys).astype(object), borrowed, notes

    def _near(self, X: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
        """Whether each row's device is within ``DEVICE_DISTANCE`` of the layer's training
        devices of its kind (only rows flagged in ``rows`` are computed)."""
        near = np.zeros(len(X), dtype=bool)
        kinds = X["device_kind"].astype(str).to_numpy()
        for kind in np.unique(kinds[rows]):
            idx = np.flatnonzero(rows & (kinds == kind))
            ds = self.layer_devices.get(str(kind))
            if ds is not None:
                dist, _ = ds.distance(learned_features(X.iloc[idx]))
                near[idx] = dist <= DEVICE_DISTANCE
        return near


def _renamed_roads(base_rt: dict[str, str], user_rt: dict[str, str]
                   ) -> tuple[dict[str, str], dict[str, str]]:
    """(merged road -> runtime, user road -> its merged name): a user road takes the base's
    name for the same (kind, runtime), else ``<kind>`` when free, else ``<kind>.<runtime>``."""
    merged = dict(base_rt)
    rename = {}
    for road, rt in user_rt.items():
        kind = road_kind(road)
        name = road_of(kind, rt, merged)
        if name is None:
            name = kind if kind not in merged else f"{kind}{ROAD_SEP}{rt}"
            merged[name] = rt
        rename[road] = name
    return merged, rename


def layer(base: LearnedModel, user: LearnedModel, name: str) -> LayeredModel:
    """``user`` (installed as ``name``) on top of ``base`` (module docstring)."""
    runtimes, rename = _renamed_roads(base.runtimes(), user.runtimes())

    def key(k: str) -> str:
        road, family = k.split("/", 1)
        return f"{rename.get(road, road)}/{family}{LAYER_SEP}{name}"

    devices = dict(base.devices)
    for kind, ds in user.devices.items():
        own = devices.get(kind)
        devices[kind] = ds if own is None else DeviceSet(own.vectors + ds.vectors,
                                                         own.ids + ds.ids)
    meta = {**base.meta, "runtimes": runtimes, "layer": name, "layer_meta": user.meta}
    return LayeredModel(
        models={**base.models, **{key(k): m for k, m in user.models.items()}},
        intervals={**base.intervals, **{key(k): v for k, v in user.intervals.items()}},
        ranges={**base.ranges, **{key(k): v for k, v in user.ranges.items()}},
        devices=devices, e2e={**base.e2e, **user.e2e}, meta=meta,
        layer=name, layer_devices=dict(user.devices))


def fallback_notes(explained: pd.DataFrame, layer_name: str = "") -> tuple[str, ...]:
    """Per (device kind, family) whose working rows did not all take the user's layer
    ``layer_name`` (or, without one, a learned model): which road they took instead."""
    if "predictor" not in explained or "family" not in explained:
        return ()
    work = explained[explained["bound_s"] > 0] if "bound_s" in explained else explained
    label = work["predictor"].astype(str)
    ana = label.str.startswith("analytical")
    base = ~ana & ~label.str.contains(f"{LAYER_SEP}{layer_name}:", regex=False) & bool(layer_name)
    kinds = work["device_kind"].astype(str) if "device_kind" in work else pd.Series("", work.index)
    notes = []
    for (kind, family), g in work.groupby([kinds, work["family"].astype(str)], sort=True):
        n_ana, n_base = int(ana[g.index].sum()), int(base[g.index].sum())
        if n_base:
            notes.append(f"{kind} {family}: {n_base} of {len(g)} kernels outside learned model "
                         f"{layer_name!r} (family or device not covered): the shipped base model")
        if n_ana:
            road = label[g.index][ana[g.index]].iloc[0].split(":", 1)[-1]
            notes.append(f"{kind} {family}: {n_ana} of {len(g)} kernels have no learned model: "
                         f"analytical {road}")
    return tuple(notes)


def coverage(meta: dict[str, Any]) -> pd.DataFrame:
    """One row per model key of a model's metadata: device kind, runtime, family and the
    training rows of that family (its validation table), from the metadata alone."""
    runtimes = model_runtimes(meta)
    rows = {r.get("key"): r.get("rows") for r in meta.get("validation", {}).get("per_family", [])}
    out = []
    for key in sorted(meta.get("models", {})):
        road, family = key.split("/", 1)
        out.append({"kind": road_kind(road), "runtime": runtimes.get(road, ""),
                    "family": family, "rows": rows.get(key)})
    return pd.DataFrame(out, columns=["kind", "runtime", "family", "rows"])
