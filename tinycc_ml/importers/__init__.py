"""Readers of other tools' models: each module turns one source format into a model family of
``tinycc_ml.models`` (importers import the families; the families never import an importer).

- ``sklearn``: fitted scikit-learn objects (estimators, pipelines, searches; XGBoost's and LightGBM's
  scikit-learn estimators through their own formats);
- ``xgboost``: XGBoost's JSON model files and live boosters; ``lightgbm``: LightGBM's text model files
  and live boosters; ``tree_tables``: what the tree importers share;
- ``onnx``: ONNX dense networks;
- ``edgeml``: EdgeML's saved ProtoNN and Bonsai folders.

tinycc-ml's own ``.npz`` model file is read by ``tinycc_ml.models.saved``.
"""
