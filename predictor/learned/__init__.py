"""Learned predictors: per-family efficiency regressors over the roofline bound (issue 6).

Modules: ``features`` (learned features from featurize's table), ``model`` (candidates and
the bounded target), ``intervals`` (split-conformal per op and end to end), ``ood``
(out-of-distribution flags), ``predictor`` (``LearnedModel.explain``), ``persistence``
(XGBoost UBJ + JSON metadata, no pickle), ``data`` (training sets), ``training`` (grouped CV,
selection, calibration, validation tables), ``estimator`` (the ``learned``/``auto``
estimators). The shipped model lives in ``default/``.
"""
