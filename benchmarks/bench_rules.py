"""What the rewrite rules add to ``eyefold.optimize`` on a large model (target: <= ~20%).

Builds a deterministic model of about ``--nodes`` nodes (residual blocks MatMul -> Add ->
Relu -> Mul -> Add on float[4, 16], each block with its own 16x16 weight, so the rule
pass also has thousands of square constants to look at) plus a few EyeLike patterns that
the rules rewrite (Cast into dtype, the bfloat16 Cast chain, a transpose, integer and
floating MatMul identities). It then times ``eyefold.optimize`` on the ModelProto with the
default rules, with no rules and with ``relaxed=True``, interleaved, and prints medians,
ratios, and the time spent in the rule steps themselves (from the report: robust to noise
from other processes, which the end-to-end ratio is not). Optionally (``--onnxscript``)
it also times onnxscript's own driver (``RewriteRuleSet.apply_to_model``) with the same
rules, once.

Usage::

    python benchmarks/bench_rules.py [--nodes 100000] [--runs 5] [--onnxscript]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper

import eyefold
from eyefold.rule_registry import load_rules

SEED = 20261201
WIDTH = 16


def _eyelike_patterns(h: str) -> tuple[list[onnx.NodeProto], list[str]]:
    """A few EyeLike patterns hanging off ``h`` (float[4, 16]); returns nodes, outputs."""
    nodes = [
        helper.make_node("MatMul", [h, "sq_w"], ["sq"]),  # float[4, 4] square input
        helper.make_node("EyeLike", ["sq"], ["e1"], k=1),
        helper.make_node("Cast", ["e1"], ["r_cast"], to=TensorProto.INT32),
        helper.make_node("Cast", ["sq"], ["sq_f"], to=TensorProto.FLOAT),
        helper.make_node("EyeLike", ["sq_f"], ["e2"]),
        helper.make_node("Cast", ["e2"], ["r_bf16"], to=TensorProto.BFLOAT16),
        helper.make_node("EyeLike", ["sq"], ["e3"], k=2),
        helper.make_node("Transpose", ["e3"], ["r_t"], perm=[1, 0]),
        helper.make_node("EyeLike", ["sq"], ["e4"], dtype=TensorProto.INT64),
        helper.make_node("MatMul", ["ints", "e4"], ["r_int"]),
        helper.make_node("EyeLike", ["sq"], ["e5"]),
        helper.make_node("MatMul", ["sq", "e5"], ["r_float"]),
    ]
    return nodes, ["r_cast", "r_bf16", "r_t", "r_int", "r_float"]


def build_model(target_nodes: int) -> onnx.ModelProto:
    """The benchmark model, the same bytes for the same ``target_nodes``."""
    rng = np.random.default_rng(SEED)
    nodes: list[onnx.NodeProto] = []
    initializers = [
        numpy_helper.from_array(rng.standard_normal((WIDTH, 4)).astype(np.float32), "sq_w"),
        numpy_helper.from_array(np.float32(0.5), "half"),
    ]
    h = "x"
    for block in range(max(1, (target_nodes - 12) // 5)):
        w, b = f"w{block}", f"b{block}"
        initializers.append(
            numpy_helper.from_array(
                (rng.standard_normal((WIDTH, WIDTH)) * 0.1).astype(np.float32), w
            )
        )
        initializers.append(numpy_helper.from_array(np.zeros(WIDTH, np.float32), b))
        m, a, r, s, o = (f"{t}{block}" for t in "marso")
        nodes += [
            helper.make_node("MatMul", [h, w], [m]),
            helper.make_node("Add", [m, b], [a]),
            helper.make_node("Relu", [a], [r]),
            helper.make_node("Mul", [r, "half"], [s]),
            helper.make_node("Add", [s, h], [o]),
        ]
        h = o
    extra, extra_outputs = _eyelike_patterns(h)
    nodes += extra
    outputs = [helper.make_tensor_value_info(h, TensorProto.FLOAT, [4, WIDTH])]
    types = {
        "r_cast": TensorProto.INT32,
        "r_bf16": TensorProto.BFLOAT16,
        "r_t": TensorProto.FLOAT,
        "r_int": TensorProto.INT64,
        "r_float": TensorProto.FLOAT,
    }
    outputs += [helper.make_tensor_value_info(n, types[n], [4, 4]) for n in extra_outputs]
    graph = helper.make_graph(
        nodes,
        "bench_rules",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, WIDTH]),
            helper.make_tensor_value_info("ints", TensorProto.INT64, [3, 4]),
        ],
        outputs,
        initializer=initializers,
        value_info=[helper.make_tensor_value_info("sq", TensorProto.FLOAT, [4, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    return model


def _time(function) -> tuple[float, object]:
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000, help="model size (nodes)")
    parser.add_argument("--runs", type=int, default=5, help="interleaved runs per variant")
    parser.add_argument(
        "--onnxscript", action="store_true", help="also time onnxscript's driver once"
    )
    args = parser.parse_args()
    model = build_model(args.nodes)
    print(f"model: {len(model.graph.node)} nodes, {len(model.graph.initializer)} initializers")

    variants = {
        "rules off": {"rules": []},
        "default rules": {},
        "relaxed rules": {"relaxed": True},
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    rule_steps: dict[str, list[float]] = {name: [] for name in variants}
    hits: dict[str, dict] = {}
    for _ in range(args.runs):
        for name, options in variants.items():  # interleaved: drift hits all alike
            seconds, result = _time(lambda o=options: eyefold.optimize_with_report(model, **o))
            times[name].append(seconds)
            rule_steps[name].append(
                sum(s.seconds for s in result.report.steps if s.name.startswith("rules-"))
            )
            hits[name] = result.report.extra.get("rules", {})
    base = statistics.median(times["rules off"])
    for name in variants:
        median = statistics.median(times[name])
        steps = statistics.median(rule_steps[name])
        print(
            f"{name:<14} median {median:7.3f} s over {args.runs} runs"
            f"  ratio {median / base:5.3f}  rule steps {steps:6.3f} s"
            f" ({steps / median:6.1%} of the run)  hits {hits[name]}"
        )
    if args.onnxscript:
        working = ir.serde.deserialize_model(model)
        rule_set = load_rules()
        assert rule_set is not None
        seconds, count = _time(lambda: rule_set.apply_to_model(working))
        print(f"onnxscript RewriteRuleSet.apply_to_model (one pass): {seconds:.3f} s,"
              f" {count} rewrites")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
