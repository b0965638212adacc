"""eyefold's core layer: what the passes, the rules, the report and the file checks share.

- :mod:`eyefold.core.domains`: the default domain's spellings, the opset in force, labels;
- :mod:`eyefold.core.scopes`: every graph, subgraph and function an EyeLike can live in;
- :mod:`eyefold.core.analysis`: what eyefold knows about one EyeLike and what it will do;
- :mod:`eyefold.core.shapes`: merging declared and learned shapes;
- :mod:`eyefold.core.constants`: reading constant tensors, recognizing identity matrices;
- :mod:`eyefold.core.dead_code`: removing what a rewrite left without users;
- :mod:`eyefold.core.rule_spec`: what a rewrite rule declares about itself;
- :mod:`eyefold.core.gc_pause`: the cyclic garbage collector paused around big walks.
"""
