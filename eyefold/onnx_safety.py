"""Hand onnx's C++ shape inference only models it cannot crash on.

onnx 1.23's EyeLike type-and-shape inference segfaults (it kills the whole process, no
exception) when a node has a ``dtype`` attribute and its input has no known type, e.g. when
the input comes from a custom-domain op. onnx-ir's ShapeInferencePass and
``onnx.checker.check_model(full_check=True)`` inherit the crash. Whether the input type is
known at that point depends on what onnx itself infers upstream, so every EyeLike with a
``dtype`` is rewritten, in a throwaway copy only, as ``Cast(EyeLike(x), to=dtype)``: the
same output type and shape, and no code path that reads a missing input type.
"""

from __future__ import annotations

import onnx

from eyefold.core.domains import DEFAULT_DOMAINS

__all__ = ["defuse_eyelike_dtype"]



def _rewrite_nodes(nodes: list[onnx.NodeProto], counter: list[int]) -> list[onnx.NodeProto]:
    rewritten: list[onnx.NodeProto] = []
    for node in nodes:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                _rewrite_graph(attribute.g, counter)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for graph in attribute.graphs:
                    _rewrite_graph(graph, counter)
        dtype = next((a for a in node.attribute if a.name == "dtype"), None)
        if node.op_type != "EyeLike" or node.domain not in DEFAULT_DOMAINS or dtype is None:
            rewritten.append(node)
            continue
        counter[0] += 1
        final_name = node.output[0] if node.output else ""
        untyped = f"{final_name}__eyefold_untyped_{counter[0]}"
        kept = [a for a in node.attribute if a.name != "dtype"]
        del node.attribute[:]
        node.attribute.extend(kept)
        if node.output:
            node.output[0] = untyped
        cast = onnx.helper.make_node("Cast", [untyped], [final_name])
        if dtype.ref_attr_name:  # in a function body, dtype may name a function attribute
            cast.attribute.add(name="to", ref_attr_name=dtype.ref_attr_name, type=dtype.type)
        else:
            cast.attribute.add(name="to", i=dtype.i, type=onnx.AttributeProto.INT)
        rewritten.extend([node, cast])
    return rewritten


def _rewrite_graph(graph: onnx.GraphProto, counter: list[int]) -> None:
    nodes = _rewrite_nodes(list(graph.node), counter)
    del graph.node[:]
    graph.node.extend(nodes)


def defuse_eyelike_dtype(model: onnx.ModelProto) -> int:
    """Rewrites, in place, every EyeLike with ``dtype`` into ``Cast(EyeLike(x))``.

    Only call this on a copy made for onnx's checker or shape inference.

    Returns:
        The number of EyeLike nodes rewritten.
    """
    counter = [0]
    _rewrite_graph(model.graph, counter)
    for function in model.functions:
        nodes = _rewrite_nodes(list(function.node), counter)
        del function.node[:]
        function.node.extend(nodes)
    return counter[0]
