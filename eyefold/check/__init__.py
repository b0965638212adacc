"""``--check``: run the original and the optimized model on the same inputs and compare.

- :mod:`.equivalence`: the comparison and its outcome;
- :mod:`.inputs`: the inputs both models are fed, at which sizes;
- :mod:`.backends`: running a model (onnxruntime, else onnx's reference evaluator; the
  optimized one on the target runtime);
- :mod:`.settings`: what the user asked of the check (shapes, tolerances, where to save);
- :mod:`.saved`: ``--check-save``'s npz files.
"""
