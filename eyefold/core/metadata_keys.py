"""Every name eyefold puts in a model: metadata keys and private domains, all namespaced.

Kept in one module so the rules (``eyefold.rules``), the passes and the file path read the
same names without importing each other, and so no two of them can clash.
"""

from __future__ import annotations

__all__ = [
    "BAKED_IN_KEY",
    "HIDDEN_DOMAIN",
    "LEGALIZED_FOR_KEY",
    "ORIGIN_KEY",
    "REPORT_META_KEY",
    "RULE_FACTS_KEY",
    "RULE_TAG_KEY",
    "SHAPE_LOST_KEY",
    "STAND_IN_DOMAIN",
]

# On the nodes the legalization made or changed: the runtime they were made for. The
# rewrite rules leave such an EyeLike alone, since folding its Casts back would undo it.
LEGALIZED_FOR_KEY = "pkg.eyefold.legalized_for"

# In a node's ``meta`` (memory only): the census number of the input EyeLike it stands
# for, so the report accounts for every EyeLike of the input.
ORIGIN_KEY = "pkg.eyefold.origin"

# In ``model.meta`` (memory only): the report of the last EyefoldPipeline run.
REPORT_META_KEY = "pkg.eyefold.report"

# In an EyeLike input value's ``meta`` (memory only): where its shape was lost
# (an ``eyefold.shape_facts.lost.ShapeLoss``), for the report.
SHAPE_LOST_KEY = "pkg.eyefold.shape_lost"

# In an EyeLike input value's ``meta`` (memory only), when inference made its shape
# static: the graph inputs with a static declared dim that shape was computed from.
BAKED_IN_KEY = "pkg.eyefold.baked_in"

# In the ``meta`` (memory only) of a value a rule reads next to an EyeLike: its element
# type and shape as onnx's inference found them, (ir.DataType | None, ir.Shape | None).
RULE_FACTS_KEY = "pkg.eyefold.rule_facts"

# In ``metadata_props`` of the nodes a rewrite rule made: the rule's name.
RULE_TAG_KEY = "pkg.eyefold.rule"

# Domain of the stand-in nodes of the file path's neighbourhood (its values made
# outside it, and the sink of the values read outside it); never saved.
STAND_IN_DOMAIN = "pkg.eyefold.neighbourhood"

# Domain that hides a node from onnxscript's version converter; never saved.
HIDDEN_DOMAIN = "pkg.eyefold.hidden"
