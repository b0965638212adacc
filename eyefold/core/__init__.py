"""eyefold's core layer: what every other layer shares; it imports only ``eyefold.errors``.

The spec and its sizes:

- :mod:`eyefold.core.eyelike_types`: which element types EyeLike accepts, per opset;
- :mod:`eyefold.core.output_size`: the size of an EyeLike output, checked before allocating;
- :mod:`eyefold.core.limits`: size limits shared across layers, each with its unit.

One EyeLike and where it lives:

- :mod:`eyefold.core.scopes`: every graph, subgraph and function an EyeLike can live in;
- :mod:`eyefold.core.proto_subgraphs`: the one walk into a ModelProto's subgraphs;
- :mod:`eyefold.core.analysis`: what eyefold knows about one EyeLike and what it will do;
- :mod:`eyefold.core.declarations`: what a model declares about an EyeLike output, checked;
- :mod:`eyefold.core.eyelike_protos`: what onnx's checker refuses in an EyeLike proto;
- :mod:`eyefold.core.origins`: which input EyeLike a node stands for (census numbers);
- :mod:`eyefold.core.domains`: the default domain's spellings, the opset in force, labels;
- :mod:`eyefold.core.shapes`: merging declared and learned shapes;
- :mod:`eyefold.core.input_shapes`: ``--input-shape`` parsed and applied.

Rewriting and its bookkeeping:

- :mod:`eyefold.core.constants`: reading constant tensors, recognizing identity matrices;
- :mod:`eyefold.core.dead_code`: removing what a rewrite left without users;
- :mod:`eyefold.core.names`: fresh value and node names, the same on every run;
- :mod:`eyefold.core.rule_spec`: what a rewrite rule declares about itself (its reach too);
- :mod:`eyefold.core.onnxscript_internals`: the only place onnxscript's private API is used;
- :mod:`eyefold.core.metadata_keys`: every name eyefold writes into a model;
- :mod:`eyefold.core.run_findings`: what the passes tell the report.

Around onnx's C++ code:

- :mod:`eyefold.core.weightless`: the weightless copies handed to it;
- :mod:`eyefold.core.node_order`: graphs sorted first, as it needs them (one stable sort,
  for protos and onnx-ir models);
- :mod:`eyefold.core.onnx_safety`: only models it cannot crash on.

Running:

- :mod:`eyefold.core.model_stats`: the before/after table's numbers, of an onnx-ir model
  or a ModelProto;
- :mod:`eyefold.core.progress`: progress lines for long steps;
- :mod:`eyefold.core.gc_pause`: the cyclic garbage collector paused around big walks;
- :mod:`eyefold.core.lazy_exports`: package attributes imported on first use.
"""
