"""eyefold side by side with its peers and the I/O floor: one command, one table.

Usage (from the repository root, in the benchmark environment of benchmarks/README.md)::

    python benchmarks/run.py --quick --out benchmarks/out/quick.json   # smoke run, < 3 minutes
    python benchmarks/run.py --out benchmarks/out/full.json            # the README table

Every tool runs in a fresh process of its own (benchmarks/tools.py), once as a warm-up and
then ``--reps`` times (quick 3, full 5), the tools interleaved within each repetition
(A B C, A B C, ...), with a timeout. Times are medians; peak RSS is each run's process
high-water mark (median). The floors are onnx load + save and onnx-ir load + save of the
same model, measured in the same run. A tool that is missing, fails or times out is noted
and skipped, never fatal. A tool whose warm-up alone takes more than a quarter of
``--budget`` seconds gets fewer runs (the table gives n), and its warm-up then counts as a
run (cache effects are noise at that scale).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import onnx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402 - the generator sits next to this script

WORKER = HERE / "tools.py"
KERNEL = HERE / "kernel_bench.py"
OUT_DIR = HERE / "out"
BIG_FOLD_LIMIT = 1 << 31  # chain_S folds S*S*4 bytes, over the 1 MiB default

PEERS = (
    "onnxscript_optimizer",
    "onnxsim",
    "onnxslim",
    "onnxoptimizer",
    "graphsurgeon",
    "onnxruntime",
)
EYEFOLD = ("eyefold_api", "eyefold_inmem", "eyefold_cli")
# On the chain: also the file path (what the command line runs, in process) and the
# library given a ModelProto, and onnxruntime's basic level (constant folding) too.
CHAIN_EYEFOLD = ("eyefold_file", "eyefold_proto")
CHAIN_PEERS = ("onnxruntime_basic",)
FLOORS = ("floor_onnx", "floor_ir")
LABELS = {
    "floor_onnx": "floor: onnx load+save",
    "floor_ir": "floor: onnx-ir load+save",
    "floor_onnx_out": "floor: onnx load+save of the folded model",
    "floor_ir_out": "floor: onnx-ir load+save of the folded model",
    "eyefold_api": "eyefold.optimize (load+optimize+save)",
    "eyefold_inmem": "eyefold.optimize on in-memory onnx_ir.Model",
    "eyefold_cli": "`eyefold optimize` CLI (process)",
    "eyefold_file": "eyefold file path (optimize_file: load+optimize+save, in process)",
    "eyefold_proto": "eyefold on a ModelProto (onnx.load+optimize_proto+onnx.save)",
    "python_startup": "`eyefold --version` (process start + imports)",
    "onnxscript_optimizer": "onnxscript.optimizer.optimize",
    "onnxsim": "onnxsim.simplify",
    "onnxslim": "onnxslim.slim",
    "onnxoptimizer": "onnxoptimizer.optimize",
    "graphsurgeon": "onnx-graphsurgeon fold_constants+cleanup",
    "onnxruntime": "onnxruntime offline (ORT_ENABLE_EXTENDED)",
    "onnxruntime_basic": "onnxruntime offline (ORT_ENABLE_BASIC)",
    "onnx_version_converter": "onnx.version_converter.convert_version",
    "onnxscript_version_converter": "onnxscript.version_converter (fallback=True)",
}

QUICK_MODELS = ("many_1000", "chain_2048", "big_5000", "opset9_5000")
FULL_MODELS = (
    "many_100",
    "many_1000",
    "many_10000",
    "chain_64",
    "chain_512",
    "chain_2048",
    "chain_4096",
    "big_20000",
    "big_100000",
    "opset9_20000",
    "ext_2g",
)


@dataclasses.dataclass
class Spec:
    """One row of a model's table: a tool run on an input with options."""

    key: str
    tool: str
    input: Path
    size_limit: int = 1 << 20
    runs: list[dict] = dataclasses.field(default_factory=list)
    note: str = ""
    stopped: bool = False
    max_runs: int = 0
    eyelike_left: int | None = None
    opset_out: int | None = None


def _specs(name: str, path: Path) -> list[Spec]:
    kind = name.partition("_")[0]
    if kind == "chain":
        folded = generate.MODELS_DIR / f"{name}.folded.onnx"
        subprocess.run(
            [
                sys.executable,
                str(WORKER),
                "eyefold_api",
                str(path),
                str(folded),
                "--size-limit",
                str(BIG_FOLD_LIMIT),
            ],
            check=True,
            capture_output=True,
        )
        specs = [Spec(t, t, path) for t in FLOORS]
        specs += [Spec(t + "_out", t, folded) for t in FLOORS]
        specs += [
            Spec(t, t, path, size_limit=BIG_FOLD_LIMIT) for t in (*EYEFOLD, *CHAIN_EYEFOLD)
        ]
        if name == "chain_4096":
            specs.append(Spec("python_startup", "python_startup", path))
        return specs + [Spec(t, t, path) for t in (*PEERS, *CHAIN_PEERS)]
    if kind == "opset9":
        tools = (
            *FLOORS,
            *EYEFOLD,
            "onnx_version_converter",
            "onnxscript_version_converter",
        )
        return [Spec(t, t, path) for t in tools]
    if kind == "ext":
        tools = (*FLOORS, "eyefold_api", "eyefold_cli", "onnxruntime", "onnxscript_optimizer")
        return [Spec(t, t, path) for t in tools]
    extra = ("python_startup",) if kind == "big" else ()
    return [Spec(t, t, path) for t in (*FLOORS, *EYEFOLD, *extra, *PEERS)]


def _output_path(model: str, spec: Spec) -> Path:
    return OUT_DIR / "tmp" / f"{model}.{spec.key}.onnx"


def _remove_output(path: Path) -> None:
    for candidate in (path, Path(str(path) + ".data")):
        candidate.unlink(missing_ok=True)


def _run_once(model: str, spec: Spec, timeout: float) -> dict | str:
    """Runs one worker process; returns its result or a one-line reason it failed."""
    out = _output_path(model, spec)
    _remove_output(out)
    command = [
        sys.executable,
        str(WORKER),
        spec.tool,
        str(spec.input),
        str(out),
        "--size-limit",
        str(spec.size_limit),
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the worker's own process group
        process.communicate()
        return f"timeout (> {timeout:.0f} s)"
    if process.returncode == 3:
        return "not installed: " + stderr.strip().splitlines()[-1].split(": ", 1)[-1]
    if process.returncode != 0:
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        return f"failed: {lines[-1] if lines else 'exit ' + str(process.returncode)}"[:240]
    return json.loads(stdout.strip().splitlines()[-1])


def _count_eyelike(path: Path) -> tuple[int | None, int | None]:
    """EyeLike nodes left in a saved model (all graphs and functions) and its opset."""
    if not path.exists():
        return None, None
    model = onnx.load(str(path), load_external_data=False)

    def count(graph: onnx.GraphProto) -> int:
        total = 0
        for node in graph.node:
            total += node.op_type == "EyeLike"
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    total += count(attr.g)
                total += sum(count(g) for g in attr.graphs)
        return total

    left = count(model.graph) + sum(
        sum(n.op_type == "EyeLike" for n in f.node) for f in model.functions
    )
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    return left, opset


def _skip_if_predicted_slow(
    spec: Spec, family: str, size: str, args: argparse.Namespace
) -> None:
    """Skips a tool whose time on a smaller model of the family predicts a timeout here.

    Run time grows at least linearly with model size, so ``t_small * size / size_small``
    is a lower bound; a tool that timed out on a smaller model cannot finish here either.
    """
    seen = args.history.get((family, spec.key))
    if not seen or not size.isdigit() or int(size) <= seen[0]:
        return
    predicted = seen[1] * int(size) / seen[0]
    if predicted > args.timeout:
        spec.stopped = True
        spec.note = (
            f"skipped: {seen[1]:.0f}{'+' if seen[1] >= args.timeout else ''} s on {seen[2]}"
            f" predicts >= {predicted:.0f} s (timeout {args.timeout:.0f} s)"
        )


def bench_model(name: str, args: argparse.Namespace) -> dict:
    """Generates ``name`` and runs every tool on it, interleaved; returns the summary."""
    start = time.perf_counter()
    path = generate.generate(name)
    model_bytes = path.stat().st_size + sum(
        p.stat().st_size for p in path.parent.glob(f"{name}.onnx.data")
    )
    eyelike_in = _count_eyelike(path)[0]
    specs = _specs(name, path)
    print(f"## {name} ({model_bytes / 2**20:.1f} MiB)", file=sys.stderr, flush=True)
    family, _, size = name.partition("_")
    for spec in specs:
        _skip_if_predicted_slow(spec, family, size, args)
    for rep in range(args.reps + 1):
        for spec in specs:
            if spec.stopped or (spec.max_runs and len(spec.runs) >= spec.max_runs):
                continue
            result = _run_once(name, spec, args.timeout)
            if isinstance(result, str) and not result.startswith("timeout"):
                result = _run_once(name, spec, args.timeout)  # once more: a transient fault
            if isinstance(result, str):
                spec.note, spec.stopped = result, True
                if result.startswith("timeout") and size.isdigit():
                    args.history[family, spec.key] = (int(size), args.timeout, name)
                print(f"  {spec.key}: {result}", file=sys.stderr, flush=True)
                continue
            if rep == 0:
                first = result["seconds"]
                if first > args.budget / 4:
                    spec.max_runs = max(1, min(args.reps, int(args.budget // first)))
                    spec.runs.append(result)  # a slow tool's warm-up counts as a run
                    spec.note = f"slow: {spec.max_runs} run(s) incl. warm-up"
                continue
            spec.runs.append(result)
    for spec in specs:
        if spec.runs:
            spec.eyelike_left, spec.opset_out = _count_eyelike(_output_path(name, spec))
            if size.isdigit():
                seconds = statistics.median(r["seconds"] for r in spec.runs)
                args.history[family, spec.key] = (int(size), seconds, name)
        _remove_output(_output_path(name, spec))
    folded = generate.MODELS_DIR / f"{name}.folded.onnx"
    folded_bytes = folded.stat().st_size if folded.exists() else 0
    folded.unlink(missing_ok=True)
    rows = {}
    for spec in specs:
        row: dict = {"label": LABELS[spec.key], "note": spec.note, "n": len(spec.runs)}
        if spec.runs:
            row["median_s"] = statistics.median(r["seconds"] for r in spec.runs)
            row["peak_rss_mib"] = (
                statistics.median(r["peak_rss_kib"] for r in spec.runs) / 1024
            )
            row["rss_before_mib"] = (
                statistics.median(r["rss_before_kib"] for r in spec.runs) / 1024
            )
            row["runs_s"] = [r["seconds"] for r in spec.runs]
            row["eyelike_left"] = spec.eyelike_left
            row["opset_out"] = spec.opset_out
            if "serialize_s" in spec.runs[0]:
                row["serialize_median_s"] = statistics.median(
                    r["serialize_s"] for r in spec.runs
                )
                row["optimize_over_serialize"] = statistics.median(
                    r["seconds"] / r["serialize_s"] for r in spec.runs
                )
        rows[spec.key] = row
    for key in ("floor_onnx", "floor_ir", "floor_onnx_out", "floor_ir_out"):
        floor = rows.get(key, {}).get("median_s")
        for row in rows.values():
            if floor and "median_s" in row:
                row[f"x_{key}"] = row["median_s"] / floor
    elapsed = time.perf_counter() - start
    print(f"   done in {elapsed:.0f} s", file=sys.stderr, flush=True)
    if name == "ext_2g" and not args.keep_models:
        generate.remove(name)
    return {
        "model": name,
        "model_bytes": model_bytes,
        "folded_model_bytes": folded_bytes,
        "eyelike_in": eyelike_in,
        "seconds": elapsed,
        "tools": rows,
    }


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _ratio(row: dict, key: str) -> str:
    return _fmt(row.get(f"x_{key}"), ".2f")


def model_table(result: dict) -> str:
    """A markdown table for one model."""
    chain = result["model"].startswith("chain")
    floors = ("floor_onnx_out", "floor_ir_out") if chain else ("floor_onnx", "floor_ir")
    head = "x onnx floor (folded)" if chain else "x onnx floor"
    head_ir = "x onnx-ir floor (folded)" if chain else "x onnx-ir floor"
    lines = [
        f"**{result['model']}** ({result['model_bytes'] / 2**20:.1f} MiB,"
        f" {result['eyelike_in']} EyeLike)",
        "",
        f"| tool | median s | {head} | {head_ir} | peak RSS MiB | EyeLike left | opset |"
        " n | note |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in result["tools"].values():
        note = row["note"]
        if "optimize_over_serialize" in row:
            note = (
                f"optimize only; {row['optimize_over_serialize']:.2f}x onnx-ir serialize"
                f" ({row['serialize_median_s']:.3f} s)"
            )
        if row.get("eyelike_left") and result["eyelike_in"] and not note:
            note = "folds nothing" if row["eyelike_left"] >= result["eyelike_in"] else ""
        lines.append(
            f"| {row['label']} | {_fmt(row.get('median_s'))} | {_ratio(row, floors[0])} |"
            f" {_ratio(row, floors[1])} | {_fmt(row.get('peak_rss_mib'), '.0f')} |"
            f" {_fmt(row.get('eyelike_left'), 'd')} | {_fmt(row.get('opset_out'), 'd')} |"
            f" {row['n']} | {note} |"
        )
    return "\n".join(lines)


def _median(result: dict, key: str) -> float | None:
    return result["tools"].get(key, {}).get("median_s")


def targets(models: dict[str, dict], kernel: dict | None) -> list[str]:
    """The issue's targets, each met or missed, with its figures from this run."""
    out = []

    def verdict(ok: bool) -> str:
        return "**met**" if ok else "**missed**"

    big = models.get("big_100000") or models.get("big_20000")
    if big:
        name = big["model"]
        cli, api = _median(big, "eyefold_cli"), _median(big, "eyefold_api")
        fir, fonnx = _median(big, "floor_ir"), _median(big, "floor_onnx")
        start = _median(big, "python_startup") or 0.0
        if cli and fir and fonnx:
            out.append(
                f"- `eyefold optimize` on {name}: {cli:.2f} s = {cli / fir:.2f}x the onnx-ir"
                f" round trip ({fir:.2f} s; target <= 1.5x): {verdict(cli / fir <= 1.5)};"
                f" {cli / fonnx:.1f}x the protobuf floor ({fonnx:.2f} s; stretch <= 3x):"
                f" {verdict(cli / fonnx <= 3)}. In process (eyefold.optimize with load+save,"
                f" no interpreter start): {api / fir:.2f}x onnx-ir, {api / fonnx:.1f}x"
                f" protobuf; process start + imports alone: {start:.2f} s."
            )
        inmem = big["tools"].get("eyefold_inmem", {})
        if "optimize_over_serialize" in inmem:
            ratio = inmem["optimize_over_serialize"]
            out.append(
                f"- eyefold.optimize on an in-memory onnx_ir.Model ({name}):"
                f" {inmem['median_s']:.3f} s = {ratio:.2f}x that model's onnx-ir"
                f" serialization ({inmem['serialize_median_s']:.3f} s; target <= 0.5x):"
                f" {verdict(ratio <= 0.5)}"
            )
    small, large = models.get("many_1000"), models.get("many_10000")
    if small and large:
        per = [_median(m, "eyefold_inmem") / m["eyelike_in"] * 1e6 for m in (small, large)]
        per_cli = [_median(m, "eyefold_api") / m["eyelike_in"] * 1e6 for m in (small, large)]
        out.append(
            f"- many_10000 vs many_1000, time per EyeLike (optimize only): {per[1]:.1f} us vs"
            f" {per[0]:.1f} us ({per[1] / per[0]:.2f}x; target <= 1x, linear):"
            f" {verdict(per[1] <= per[0] * 1.05)} (load+optimize+save: {per_cli[1]:.1f} vs"
            f" {per_cli[0]:.1f} us)"
        )
    chains = sorted(
        (m for m in models.values() if m["model"].startswith("chain")),
        key=lambda m: int(m["model"].split("_")[1]),
    )
    for m in chains:
        ours = {k: _median(m, k) for k in ("eyefold_api", "eyefold_cli")}
        folding = {
            k: _median(m, k)
            for k in (*PEERS, *CHAIN_PEERS)
            if _median(m, k) is not None and m["tools"][k].get("eyelike_left") == 0
        }
        if not folding or not ours["eyefold_api"]:
            continue
        best = min(folding, key=folding.get)
        line = (
            f"- {m['model']}: eyefold.optimize {ours['eyefold_api']:.3f} s vs fastest folding"
            f" peer {best} {folding[best]:.3f} s ({ours['eyefold_api'] / folding[best]:.2f}x;"
            f" target < 1x): {verdict(ours['eyefold_api'] < folding[best])}"
            f" (CLI process, interpreter start included: {ours['eyefold_cli']:.3f} s)"
        )
        if m["model"] == "chain_4096":
            floor = _median(m, "floor_onnx_out")
            size = int(m["model"].split("_")[1])
            folded_mib = size * size * 4 / 2**20
            limit = m["model_bytes"] / 2**20 + folded_mib + 150
            rss = m["tools"]["eyefold_cli"]["peak_rss_mib"]
            rss_api = m["tools"]["eyefold_api"]["peak_rss_mib"]
            line += (
                f"; vs the I/O floor (onnx load+save of the folded model, {floor:.3f} s):"
                f" {ours['eyefold_api'] / floor:.2f}x (target <= 1.3x):"
                f" {verdict(ours['eyefold_api'] / floor <= 1.3)}; peak RSS {rss:.0f} MiB"
                f" (CLI), {rss_api:.0f} MiB (in process) vs model + folded + 150 ="
                f" {limit:.0f} MiB: {verdict(rss <= limit)}"
            )
        out.append(line)
        best = min(folding, key=folding.get)
        for key in CHAIN_EYEFOLD:
            seconds = _median(m, key)
            if seconds is not None:
                ratio = seconds / folding[best]
                out.append(
                    f"- {m['model']}: {LABELS[key]} {seconds:.3f} s vs fastest folding peer"
                    f" {best} {folding[best]:.3f} s ({ratio:.2f}x; target < 1x):"
                    f" {verdict(ratio < 1)}"
                )
    up = next((m for m in models.values() if m["model"].startswith("opset9")), None)
    if up:
        conv = up["tools"].get("onnx_version_converter", {})
        ours = up["tools"].get("eyefold_api", {})
        if conv.get("median_s") and ours.get("median_s"):
            upgraded = ours.get("opset_out") == 22
            ratio = ours["median_s"] / conv["median_s"]
            rss_ratio = ours["peak_rss_mib"] / conv["peak_rss_mib"]
            out.append(
                f"- Upgrade on {up['model']}: eyefold.optimize {ours['median_s']:.2f} s,"
                f" {ours['peak_rss_mib']:.0f} MiB vs onnx.version_converter"
                f" {conv['median_s']:.2f} s, {conv['peak_rss_mib']:.0f} MiB"
                f" (time {ratio:.2f}x, RSS {rss_ratio:.2f}x; target <= 1x both): "
                + (
                    verdict(ratio <= 1 and rss_ratio <= 1)
                    if upgraded
                    else f"**not measurable yet**: eyefold left opset {ours.get('opset_out')}"
                    " (the upgrade step is not in the pipeline)"
                )
            )
    if kernel:
        worst_floor, worst_np = {}, {}
        for row in kernel["rows"]:
            if row["size"] < 1024:
                continue
            worst_floor[row["dtype"]] = max(
                worst_floor.get(row["dtype"], 0), row["eyefold_s"] / row["floor_s"]
            )
            worst_np[row["dtype"]] = max(
                worst_np.get(row["dtype"], 0), row["eyefold_s"] / row["np_eye_s"]
            )
        figures = ", ".join(
            f"{d} {worst_floor[d]:.2f}x floor / {worst_np[d]:.2f}x np.eye" for d in worst_floor
        )
        ok_floor = all(v <= 1.2 for v in worst_floor.values())
        ok_np = all(v <= 1.0 for v in worst_np.values())
        out.append(
            f"- Kernel, S >= 1024, worst case per type: {figures}. Within 1.2x of the memory"
            f" floor: {verdict(ok_floor)}; never slower than np.eye (ratio <= 1.00, medians):"
            f" {verdict(ok_np)}"
        )
    return out


def machine() -> dict:
    """What the run ran on: cores, CPU model, memory, versions."""
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as file:
        cpu = next(
            (line.split(":", 1)[1].strip() for line in file if line.startswith("model name")),
            cpu,
        )
    mem_kib = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as file:
        mem_kib = next(int(line.split()[1]) for line in file if line.startswith("MemTotal"))
    versions = {}
    for package in (
        "eyefold",
        "onnx",
        "onnx-ir",
        "onnxscript",
        "onnxruntime",
        "onnxsim",
        "onnxslim",
        "onnxoptimizer",
        "onnx-graphsurgeon",
        "numpy",
    ):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:  # noqa: PERF203
            versions[package] = None
    source = None
    with contextlib.suppress(importlib.metadata.PackageNotFoundError, TypeError):
        source = json.loads(
            importlib.metadata.distribution("eyefold").read_text("direct_url.json") or "null"
        )
    return {
        "eyefold_source": source,
        "load_avg": os.getloadavg(),
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "mem_gib": round(mem_kib / 2**20, 1),
        "python": platform.python_version(),
        "versions": versions,
    }


def _kernel(args: argparse.Namespace) -> dict | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    command = [sys.executable, str(KERNEL), "--json"] + (["--quick"] if args.quick else [])
    print("## kernel", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=600, check=True
        )
    except (subprocess.SubprocessError, OSError) as error:
        print(f"  kernel benchmark failed: {error}", file=sys.stderr)
        return None
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small models only (< 3 min)")
    parser.add_argument(
        "--models", nargs="+", help="run only these models (e.g. opset9_20000)"
    )
    parser.add_argument("--no-kernel", action="store_true", help="skip the kernel benchmark")
    parser.add_argument("--reps", type=int, help="runs per tool after the warm-up (3 / 5)")
    parser.add_argument("--timeout", type=float, help="seconds per run (quick 10, full 90)")
    parser.add_argument("--budget", type=float, help="seconds per tool and model (8 / 40)")
    parser.add_argument("--out", type=Path, help="write the JSON results here")
    parser.add_argument("--keep-models", action="store_true", help="keep the >2 GiB model")
    args = parser.parse_args(argv)
    args.timeout = args.timeout or (10.0 if args.quick else 90.0)
    args.budget = args.budget or (8.0 if args.quick else 40.0)
    args.reps = args.reps or (3 if args.quick else 5)
    args.history = {}
    names = args.models or (QUICK_MODELS if args.quick else FULL_MODELS)
    (OUT_DIR / "tmp").mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    info = machine()
    models = {}
    try:
        for name in names:
            models[name] = bench_model(name, args)
    finally:
        shutil.rmtree(OUT_DIR / "tmp", ignore_errors=True)
        if not args.keep_models:
            generate.remove("ext_2g")
    kernel = None if args.no_kernel else _kernel(args)
    command = " ".join(
        ["python benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]
    )
    result = {
        "command": command,
        "mode": "quick" if args.quick else "full",
        "reps": args.reps,
        "machine": info,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "seconds": time.perf_counter() - start,
        "load_avg_end": os.getloadavg(),
        "models": models,
        "kernel": kernel,
        "targets": targets(models, kernel),
    }
    text = render(result)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
        args.out.with_suffix(".md").write_text(text)
    return 0


def render(result: dict) -> str:
    """The whole run as markdown: machine, command, tables, kernel, targets."""
    info = result["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
    parts = [
        f"Run {result['date_utc']} UTC, {result['mode']} mode, {result['reps']} runs per tool"
        f" after a warm-up, {result['seconds'] / 60:.1f} min in all. Machine: {info['nproc']}"
        f" cores (`nproc`), {info['cpu']}, {info['mem_gib']} GiB; Python {info['python']};"
        f" {versions}. Load average (1/5/15 min) at start"
        f" {'/'.join(f'{x:.1f}' for x in info['load_avg'])}, at the end"
        f" {'/'.join(f'{x:.1f}' for x in result['load_avg_end'])}.",
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    for model in result["models"].values():
        parts += [model_table(model), ""]
    kernel = result.get("kernel")
    if kernel:
        import kernel_bench

        parts += [kernel_bench.table(kernel), ""]
    parts += ["Targets:", "", *result["targets"]]
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
