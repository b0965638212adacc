"""What is statically known of the shapes that feed EyeLike nodes, and where it stops.

- :mod:`.values`: the values of the small tensors exporters compute shapes with;
- :mod:`.evaluate`: any other default-domain op whose small inputs are all known, run
  by onnx's reference evaluator;
- :mod:`.rounds`: onnx's inference, with those values computed between its rounds;
- :mod:`.inference_slices`: the weightless slice it is handed, and what it finds there;
- :mod:`.lost`: for a shape still not static, where it was lost (node, op, why).

Both inference steps (``infer-input-shapes`` on onnx-ir models, and the file path's
inference on the proto) walk, build and read their slices through
:mod:`.inference_slices`, the one implementation, each handing it its own graph.
"""
