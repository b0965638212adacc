"""One timed run of one tool on one model, in a process of its own (run.py starts it).

Usage::

    python benchmarks/tools.py TOOL INPUT OUTPUT [--size-limit BYTES] [--target-opset N]

It imports only what TOOL needs, then times the work (load + transform + save, unless the
tool says otherwise) and prints one JSON line: ``{"seconds", "rss_before_kib",
"peak_rss_kib", ...}``. Peak RSS is this process's own high-water mark (for the ``*_cli``
tools: the CLI child's). A tool that cannot run exits non-zero with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

TWO_GIB = 2**31


def _maxrss_kib(who: int = resource.RUSAGE_SELF) -> int:
    """Peak RSS in KiB: this process's own ``VmHWM``, or the children's ``ru_maxrss``.

    A process's own ``ru_maxrss`` starts at the RSS its parent had when it forked it
    (Linux keeps the old memory's high-water mark across ``exec``); ``VmHWM`` does not.
    """
    if who == resource.RUSAGE_SELF:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    return resource.getrusage(who).ru_maxrss


def _external_name(output: str) -> str:
    return os.path.basename(output) + ".data"


def _onnx_load(path: str):
    import onnx

    return onnx.load(path)


def _onnx_save(model, output: str, source: str) -> None:
    import onnx

    if _is_big(source):  # a ModelProto over 2 GiB cannot be serialized in one piece
        onnx.save_model(
            model, output, save_as_external_data=True, location=_external_name(output)
        )
    else:
        onnx.save_model(model, output)


def _is_big(path: str) -> bool:
    return os.path.exists(path + ".data") or os.path.getsize(path) >= TWO_GIB


def _ir_save(model, output: str, source: str) -> None:
    import onnx_ir as ir

    if _is_big(source):
        ir.save(model, output, external_data=_external_name(output))
    else:
        ir.save(model, output)


# Each tool: tool(input, output, args) -> extra fields; its imports (_SETUP) run untimed.


def floor_onnx(inp: str, out: str, args: argparse.Namespace) -> dict:
    _onnx_save(_onnx_load(inp), out, inp)
    return {}


def floor_ir(inp: str, out: str, args: argparse.Namespace) -> dict:
    import onnx_ir as ir

    _ir_save(ir.load(inp), out, inp)
    return {}


def eyefold_api(inp: str, out: str, args: argparse.Namespace) -> dict:
    import eyefold
    from eyefold.model_files import load_model, save_model

    model = load_model(inp)
    eyefold.optimize(model, size_limit=args.size_limit, target_opset=args.target_opset)
    save_model(model, out)
    return {}


def eyefold_proto(inp: str, out: str, args: argparse.Namespace) -> dict:
    """The file path: protobuf load, the neighbourhood path, protobuf save."""
    import onnx

    from eyefold.options import PipelineOptions
    from eyefold.proto_path import optimize_proto

    options = PipelineOptions(size_limit=args.size_limit, target_opset=args.target_opset)
    run = optimize_proto(onnx.load(inp, load_external_data=False), options, source_path=inp)
    _onnx_save(run.model, out, inp)
    return {"path": run.record.steps[0].name}


def eyefold_file(inp: str, out: str, args: argparse.Namespace) -> dict:
    """What ``eyefold optimize IN OUT`` runs, in process: load, optimize, check-free save."""
    from eyefold.core.progress import Progress
    from eyefold.file_run import optimize_file
    from eyefold.options import PipelineOptions
    from eyefold.run_record import RunRecord

    options = PipelineOptions(size_limit=args.size_limit, target_opset=args.target_opset)
    report = optimize_file(inp, out, options, RunRecord(progress=Progress(enabled=False)))
    return {"path": report.steps[1].name}


def eyefold_inmem(inp: str, out: str, args: argparse.Namespace) -> dict:
    """eyefold.optimize on an in-memory onnx_ir.Model vs serializing that model."""
    import onnx_ir as ir

    import eyefold

    model = ir.load(inp)
    twin = ir.load(inp)
    start = time.perf_counter()
    eyefold.optimize(model, size_limit=args.size_limit, target_opset=args.target_opset)
    optimize_s = time.perf_counter() - start
    start = time.perf_counter()
    ir.serde.serialize_model(twin)
    serialize_s = time.perf_counter() - start
    _ir_save(model, out, inp)
    return {"seconds": optimize_s, "serialize_s": serialize_s}


def _run_cli(command: list[str]) -> dict:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    return {"seconds": seconds, "peak_rss_kib": _maxrss_kib(resource.RUSAGE_CHILDREN)}


def _eyefold_command() -> list[str]:
    script = Path(sys.executable).with_name("eyefold")
    return [str(script)] if script.exists() else [sys.executable, "-m", "eyefold"]


def eyefold_cli(inp: str, out: str, args: argparse.Namespace) -> dict:
    return _run_cli(
        [
            *_eyefold_command(),
            "optimize",
            inp,
            out,
            "-q",
            "--size-limit",
            str(args.size_limit),
            "--target-opset",
            str(args.target_opset),
        ]
    )


def python_startup(inp: str, out: str, args: argparse.Namespace) -> dict:
    """The fixed cost of any CLI run: interpreter start and eyefold's imports."""
    return _run_cli([*_eyefold_command(), "--version"])


def onnxscript_optimizer(inp: str, out: str, args: argparse.Namespace) -> dict:
    import onnx_ir as ir
    import onnxscript.optimizer

    model = ir.load(inp)
    onnxscript.optimizer.optimize(model)
    _ir_save(model, out, inp)
    return {}


def onnxsim(inp: str, out: str, args: argparse.Namespace) -> dict:
    import onnxsim as sim

    model, _ = sim.simplify(_onnx_load(inp), check_n=0)
    _onnx_save(model, out, inp)
    return {}


def onnxslim(inp: str, out: str, args: argparse.Namespace) -> dict:
    import onnxslim as slim

    model = slim.slim(_onnx_load(inp))
    _onnx_save(model, out, inp)
    return {}


def onnxoptimizer(inp: str, out: str, args: argparse.Namespace) -> dict:
    import onnxoptimizer as opt

    _onnx_save(opt.optimize(_onnx_load(inp)), out, inp)
    return {}


def graphsurgeon(inp: str, out: str, args: argparse.Namespace) -> dict:
    import onnx_graphsurgeon as gs

    graph = gs.import_onnx(_onnx_load(inp))
    graph.fold_constants().cleanup()
    _onnx_save(gs.export_onnx(graph), out, inp)
    return {}


def onnxruntime(inp: str, out: str, args: argparse.Namespace) -> dict:
    return _onnxruntime_offline(inp, out, "ORT_ENABLE_EXTENDED")


def onnxruntime_basic(inp: str, out: str, args: argparse.Namespace) -> dict:
    return _onnxruntime_offline(inp, out, "ORT_ENABLE_BASIC")


def _onnxruntime_offline(inp: str, out: str, level: str) -> dict:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.optimized_model_filepath = out
    if _is_big(inp):
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", _external_name(out)
        )
    ort.InferenceSession(inp, options, providers=["CPUExecutionProvider"])
    return {}


def onnx_version_converter(inp: str, out: str, args: argparse.Namespace) -> dict:
    import onnx.version_converter

    model = onnx.version_converter.convert_version(_onnx_load(inp), args.target_opset)
    _onnx_save(model, out, inp)
    return {}


def onnxscript_version_converter(inp: str, out: str, args: argparse.Namespace) -> dict:
    import onnx_ir as ir
    import onnxscript.version_converter

    model = ir.load(inp)
    onnxscript.version_converter.convert_version(model, args.target_opset, fallback=True)
    _ir_save(model, out, inp)
    return {}


_SETUP: dict[str, tuple[str, ...]] = {
    "floor_onnx": ("onnx",),
    "floor_ir": ("onnx_ir",),
    "eyefold_api": ("eyefold", "eyefold.model_files"),
    "eyefold_inmem": ("eyefold", "onnx_ir"),
    "eyefold_proto": ("eyefold", "eyefold.proto_path", "onnx"),
    "eyefold_file": ("eyefold.file_run", "eyefold.proto_path", "eyefold.cli.summary"),
    "eyefold_cli": (),
    "python_startup": (),
    "onnxscript_optimizer": ("onnx_ir", "onnxscript.optimizer"),
    "onnxsim": ("onnxsim",),
    "onnxslim": ("onnxslim",),
    "onnxoptimizer": ("onnxoptimizer", "onnx"),
    "graphsurgeon": ("onnx_graphsurgeon", "onnx"),
    "onnxruntime": ("onnxruntime",),
    "onnxruntime_basic": ("onnxruntime",),
    "onnx_version_converter": ("onnx.version_converter",),
    "onnxscript_version_converter": ("onnx_ir", "onnxscript.version_converter"),
}

TOOLS: dict[str, Callable[[str, str, argparse.Namespace], dict]] = {
    name: globals()[name] for name in _SETUP
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tool", choices=sorted(TOOLS))
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--size-limit", type=int, default=1 << 20)
    parser.add_argument("--target-opset", type=int, default=22)
    args = parser.parse_args(argv)
    try:
        for module in _SETUP[args.tool]:
            __import__(module)
    except ImportError as error:
        print(f"not installed: {error}", file=sys.stderr)
        return 3
    rss_before = _maxrss_kib()
    start = time.perf_counter()
    try:
        extra = TOOLS[args.tool](args.input, args.output, args)
    except Exception as error:
        message = " ".join(f"{type(error).__name__}: {error}".split())
        print(message[:300], file=sys.stderr)
        return 4
    seconds = time.perf_counter() - start
    result = {"seconds": seconds, "rss_before_kib": rss_before, "peak_rss_kib": _maxrss_kib()}
    result.update(extra)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
