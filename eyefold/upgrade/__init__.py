"""The opset upgrade: converting bodies, checking the result, writing it back.

- :mod:`.conversion`: the conversion core, run on a weightless copy of one graph body;
- :mod:`.onnxscript_conversion` and :mod:`.legacy_fixes`: onnxscript's converter (opset 18
  and up) and the fixes around onnx's for older opsets;
- :mod:`.validation`: onnx's full checker on the converted model, before it is used;
- :mod:`.writeback`: what the write-back changes (which original each converted node
  stands for, where the nodes go, each changed node's patch), decided once;
- :mod:`.writeback_ir` and :mod:`.writeback_proto`: those decisions applied to the onnx-ir
  graph the converted body came from, or to the ModelProto body;
- :mod:`.on_proto`: the whole upgrade of a ModelProto, in place (the file path);
- :mod:`.proto_graphs`: walking a GraphProto and its bodies as the converters see them.

The pass that runs the upgrade on an onnx-ir model is
:class:`eyefold.passes.UpgradeOpsetPass`.
"""
