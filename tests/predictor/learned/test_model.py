"""predictor/learned/model.py: the ridge design of a FamilyModel."""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.predictor.learned.metadata_schema import MIN_RIDGE_SCALE
from roofcast.predictor.learned.model import FamilyModel


def _fit_ridge_with_noisy_constant() -> tuple[FamilyModel, pd.DataFrame]:
    rng = np.random.default_rng(0)
    n = 200
    size = rng.uniform(-6.0, -3.0, n)
    F = pd.DataFrame({"lg_size": size, "ratio": 1.0 + rng.normal(0.0, 1e-9, n)})
    bound = 10.0 ** size
    meas = bound * 10.0 ** (0.3 + 0.05 * rng.normal(size=n))
    fm = FamilyModel.fit("cpu/softmax", "ridge", F, meas, bound, np.zeros(n),
                         features=("lg_size", "ratio"))
    return fm, F


def test_a_feature_constant_up_to_float_noise_does_not_blow_up_a_ridge_prediction():
    """Standardising 1 ± 1e-9 by its 1e-9 spread made a new row with ratio 0.5 predict ~10^9."""
    fm, F = _fit_ridge_with_noisy_constant()
    seen = fm.predict_log(F)
    new = fm.predict_log(pd.DataFrame({"lg_size": [-4.0], "ratio": [0.5]}))
    assert np.isfinite(new).all()
    assert seen.min() - 0.1 <= new[0] <= seen.max() + 0.1


def test_the_noisy_constant_carries_no_weight_in_sample():
    fm, F = _fit_ridge_with_noisy_constant()
    shifted = F.assign(ratio=2.0)
    np.testing.assert_allclose(fm.predict_log(shifted), fm.predict_log(F), atol=0.05)



def test_a_constant_column_is_saved_with_a_scale_the_schema_accepts(tmp_path):
    """The saved scale is the one used (1 for a constant), so the model reloads."""
    fm, F = _fit_ridge_with_noisy_constant()
    constant = FamilyModel.fit("cpu/softmax", "ridge", F.assign(ratio=1.0), 10.0 ** F["lg_size"],
                               10.0 ** F["lg_size"] / 2, np.zeros(len(F)),
                               features=("lg_size", "ratio"))
    for model in (fm, constant):
        desc = model.save(tmp_path)
        assert min(desc["linear"]["scale"]) >= MIN_RIDGE_SCALE
        back = FamilyModel.load(tmp_path, desc, ("lg_size", "ratio"))
        np.testing.assert_allclose(back.predict_log(F), model.predict_log(F))

