"""``--check``: run the original and the optimized model on the same inputs and compare.

- :mod:`.equivalence`: the comparison and its outcome;
- :mod:`.inputs`: the inputs both models are fed;
- :mod:`.backends`: running a model (onnxruntime, else onnx's reference evaluator).
"""
