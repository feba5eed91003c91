"""ONNX -> Graph: safe loading, concrete shapes, per-op costs."""
