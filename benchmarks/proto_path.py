"""The neighbourhood (proto) path against its three targets, side by side in one run.

Usage (from the repository root)::

    python benchmarks/proto_path.py [--reps 5] [--big big_100000] [--upgrade opset9_20000 ...]

Each tool runs in a fresh process (benchmarks/tools.py), tools interleaved per repetition
after a warm-up; times and peak RSS are medians.

``eyefold_file`` is what ``eyefold optimize IN OUT`` runs (``eyefold.file_run``), in
process; ``eyefold_proto`` the library given a ModelProto; ``eyefold_api`` the onnx-ir
path for files (load_model, optimize, save_model). Targets:

* big model end to end (load, optimize, save) on the file path <= 1.5x the protobuf floor
  (onnx load + save) and <= 0.5x the onnx-ir floor (onnx-ir load + save);
* opset-9 upgrade on the file path <= 2.0x onnx.version_converter's time (load, convert,
  save) and <= 1.2x its peak RSS, for each ``--upgrade`` model;
* the big model with its weights in a data file, measured alongside (no target);
* the in-memory onnx_ir.Model path no slower than before (``eyefold_inmem``: optimize
  time over that model's serialization, as in run.py's target <= 0.5x).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
import run  # noqa: E402

BIG_TOOLS = (
    "floor_onnx",
    "floor_ir",
    "eyefold_file",
    "eyefold_proto",
    "eyefold_api",
    "eyefold_inmem",
)
UPGRADE_TOOLS = ("onnx_version_converter", "eyefold_file", "eyefold_proto", "eyefold_api")
# The big model with its weights in a data file: the file path copies them (no target).
EXTERNAL_TOOLS = ("floor_onnx", "floor_ir", "eyefold_file", "eyefold_api")


def _measure(model: str, tools: tuple[str, ...], reps: int) -> dict[str, dict]:
    # Generated in a child process: building a big model here would raise this process's
    # peak RSS, which the tool processes it starts then report as their own floor.
    subprocess.run([sys.executable, str(HERE / "generate.py"), model], check=True)
    path = generate.generate(model)  # now only finds the up-to-date copy
    (run.OUT_DIR / "tmp").mkdir(parents=True, exist_ok=True)
    specs = [run.Spec(t, t, path) for t in tools]
    for spec in specs:  # warm-up
        run._run_once(model, spec, 600)
    for _ in range(reps):
        for spec in specs:
            outcome = run._run_once(model, spec, 600)
            if isinstance(outcome, str):
                raise SystemExit(f"{spec.tool} on {model}: {outcome}")
            spec.runs.append(outcome)
    return {
        s.tool: {
            "seconds": statistics.median(r["seconds"] for r in s.runs),
            "rss_mib": statistics.median(r["peak_rss_kib"] for r in s.runs) / 1024,
            "path": s.runs[-1].get("path", ""),
            "serialize_s": statistics.median(r.get("serialize_s", 0.0) for r in s.runs),
        }
        for s in specs
    }


def _verdict(ratio: float, limit: float) -> str:
    return f"{ratio:.2f}x (target <= {limit}x): {'met' if ratio <= limit else 'MISSED'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--big", default="big_100000")
    parser.add_argument("--upgrade", nargs="+", default=["opset9_2000", "opset9_20000"])
    parser.add_argument("--external", default="bigext_100000")
    args = parser.parse_args(argv)
    big = _measure(args.big, BIG_TOOLS, args.reps)
    upgrades = {name: _measure(name, UPGRADE_TOOLS, args.reps) for name in args.upgrade}
    external = _measure(args.external, EXTERNAL_TOOLS, args.reps)
    measured = [(args.big, big), *upgrades.items(), (args.external, external)]
    for model, rows in measured:
        print(f"{model}:")
        for tool, row in rows.items():
            seconds, rss = row["seconds"], row["rss_mib"]
            print(f"  {tool:24s} {seconds:8.3f} s {rss:8.0f} MiB  {row['path']}")
    proto = big["eyefold_file"]["seconds"]
    print(
        f"{args.big} file path vs protobuf floor: "
        + _verdict(proto / big["floor_onnx"]["seconds"], 1.5)
    )
    print(
        f"{args.big} file path vs onnx-ir floor: "
        + _verdict(proto / big["floor_ir"]["seconds"], 0.5)
    )
    inmem = big["eyefold_inmem"]
    print(
        f"{args.big} in-memory onnx_ir.Model vs its serialization: "
        + _verdict(inmem["seconds"] / inmem["serialize_s"], 0.5)
    )
    for name, upgrade in upgrades.items():
        converter, ours = upgrade["onnx_version_converter"], upgrade["eyefold_file"]
        print(
            f"{name} upgrade time vs onnx.version_converter: "
            + _verdict(ours["seconds"] / converter["seconds"], 2.0)
        )
        print(
            f"{name} upgrade peak RSS vs onnx.version_converter: "
            + _verdict(ours["rss_mib"] / converter["rss_mib"], 1.2)
        )
    ours = external["eyefold_file"]["seconds"]
    print(
        f"{args.external} file path vs protobuf floor:"
        f" {ours / external['floor_onnx']['seconds']:.2f}x,"
        f" vs onnx-ir floor: {ours / external['floor_ir']['seconds']:.2f}x (no target)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
