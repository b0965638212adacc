#!/usr/bin/env python3
"""EyeLike runtime reach: which of the 182 type combinations run bit-exactly on each
installed runtime, before and after eyefold, with every option set.

    python benchmarks/runtime_reach.py [--out benchmarks/out/reach] [--jobs 2]
        [--runtimes onnxruntime,openvino,tract,tvm,ortweb] [--options before,default,...]
        [--node-dir DIR] [--cache FILE] [--tables]

What it does:
- builds the 182 EyeLike(k=1) models of opset 22 (13 input types x 13 dtypes or none),
  once with a static input ``x: T[4,5]`` and once with a dynamic one ``x: T[n,m]`` (fed a
  [4,5] array);
- runs ``eyefold optimize`` (batch mode, the installed eyefold) on them with each option
  set: default, ``--target-runtime R`` for each target, ``--lower-eyelike``;
- runs every model on every runtime that is installed, each runtime in worker processes
  (a crash or a hang costs one model), one thread each;
- counts a run when the output has the expected type and shape and the bytes of
  ``np.eye(4, 5, k=1)`` in that type (bfloat16: ml_dtypes). Where an API cannot feed or
  fetch bfloat16 (tract, onnxruntime-web) a Cast from or to float wraps the model.

onnxruntime-web runs in node: ``npm install onnxruntime-web`` in ``--node-dir`` (default
``benchmarks/node``; ``ONNXRUNTIME_NODE_INSTALL=skip`` when installing onnxruntime-node
there too); without it, or without node, that column is skipped and the report says so.

``--tables`` measures instead what eyefold's built-in tables hold
(``eyefold/runtime/measured.py``): EyeLike at opsets 22 and 21, Cast between every pair of
types, and eyefold's lowered form per output type, and prints them in that module's format.

Outputs in ``--out``: ``report.md`` (the tables, every combination that ran before and
fails after, the distinct errors), ``results.json`` and the models measured.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import contextlib
import datetime
import hashlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
from onnx import helper

from eyefold.runtime import runners

HERE = Path(__file__).resolve().parent
TYPES = ["bool", "double", "float", "float16", "bfloat16", "int8", "int16", "int32",
         "int64", "uint8", "uint16", "uint32", "uint64"]  # fmt: skip
ONNX_TYPE = {name: getattr(onnx.TensorProto, name.upper()) for name in TYPES}
NUMPY_TYPE = {name: np.dtype(ml_dtypes.bfloat16 if name == "bfloat16" else
                             {"float": np.float32, "double": np.float64}.get(name, name))
              for name in TYPES}  # fmt: skip
SHAPE = (4, 5)
SHAPES = ("static", "dynamic")
OPTION_SETS = {
    "before": None,
    "default": [],
    "onnxruntime": ["--target-runtime", "onnxruntime"],
    "openvino": ["--target-runtime", "openvino"],
    "tract": ["--target-runtime", "tract"],
    "tvm": ["--target-runtime", "tvm"],
    "tensorrt": ["--target-runtime", "tensorrt"],
    "lower": ["--lower-eyelike"],
}
LABELS = {"before": "before", "default": "after default", "lower": "--lower-eyelike"}
LABELS |= {name: f"--target-runtime {name}" for name in OPTION_SETS if name not in LABELS}
RUNTIMES = ("onnxruntime", "openvino", "tract", "tvm", "ortweb")
RUNTIME_LABELS = {
    "reference": "onnx.reference",
    "onnxruntime": "onnxruntime (CPU)",
    "openvino": "OpenVINO (CPU)",
    "tract": "tract",
    "tvm": "TVM (Relax, llvm)",
    "ortweb": "onnxruntime-web (wasm, node)",
}
# The target whose promise a runtime's column checks (onnxruntime-web: onnxruntime's).
OWN_TARGET = {"ortweb": "onnxruntime"}
FEEDS_BFLOAT16 = runners.FEEDS_BFLOAT16 | {"ortweb": False}
TIMEOUT_SECONDS = {"tvm": 300, "openvino": 120}
VERSION_PACKAGES = ("onnx", "onnxruntime", "openvino", "tract", "apache-tvm", "numpy",
                    "ml_dtypes", "eyefold")  # fmt: skip


def combinations():
    return [(t, d) for t in TYPES for d in [*TYPES, None]]


def combo_name(source, dtype):
    return f"{source}__{dtype or 'none'}"


def expected(output_type):
    return np.eye(*SHAPE, k=1).astype(NUMPY_TYPE[output_type])


def input_array(source, eye=False):
    if eye:
        return expected(source)
    pattern = np.random.default_rng(0).integers(0, 2, size=SHAPE)
    return pattern.astype(NUMPY_TYPE[source])


def single_node_model(nodes, source, output_type, dynamic, opset=22):
    dims = ["n", "m"] if dynamic else list(SHAPE)
    graph = helper.make_graph(
        nodes,
        "reach",
        [helper.make_tensor_value_info("x", ONNX_TYPE[source], dims)],
        [helper.make_tensor_value_info("y", ONNX_TYPE[output_type], dims)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10 if opset >= 21 else 9
    return model


def eyelike_model(source, dtype, dynamic, opset=22):
    attributes = {"k": 1} | ({} if dtype is None else {"dtype": ONNX_TYPE[dtype]})
    node = helper.make_node("EyeLike", ["x"], ["y"], name="eye", **attributes)
    return single_node_model([node], source, dtype or source, dynamic, opset)


# --- workers: `runtime_reach.py --worker RUNTIME`, one JSON task per line ---------------


def worker_main(runtime):
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # a library's prints cannot corrupt the protocol
    run = runners.runner_for(runtime)
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        protocol.write(json.dumps({"id": task["id"], "result": _run_task(run, task)}) + "\n")


def _run_task(run, task):
    feed = input_array(task["t_in"], task.get("eye", False))
    want = expected(task["t_out"])
    if task["wrapped"]:
        feed = feed.astype(np.float32) if task["t_in"] == "bfloat16" else feed
        want = want.astype(np.float32) if task["t_out"] == "bfloat16" else want
    try:
        (got, *_) = run(task["path"], {task["input_name"]: feed})
    except runners.RunError as error:
        return str(error)
    except Exception as error:  # a runner's own bug, reported rather than fatal
        return f"worker: {type(error).__name__}: {error}"
    return compare(np.asarray(got), want)


def compare(got, want):
    if got.dtype != want.dtype:
        return f"compare: dtype {got.dtype} != {want.dtype}"
    if got.shape != want.shape:
        return f"compare: shape {got.shape} != {want.shape}"
    if got.tobytes() != want.tobytes():
        return f"compare: values differ: {got.tolist()}"
    return "ok"


# onnxruntime-web's tensor type names (no bfloat16: such models are wrapped).
ORTWEB_TYPES = {name: name for name in TYPES if name != "bfloat16"}
ORTWEB_TYPES |= {"double": "float64", "float": "float32"}


def ortweb_encode(task):
    array = input_array(task["t_in"], task.get("eye", False))
    kind = ORTWEB_TYPES.get(task["t_in"], "float32")
    if task["t_in"] == "bfloat16":
        array = array.astype(np.float32)
    raw = array.view(np.uint16).tobytes() if kind == "float16" else array.tobytes()
    spec = {"name": task["input_name"], "type": kind, "dims": list(SHAPE)}
    spec["b64"] = base64.b64encode(raw).decode()
    return {"id": task["id"], "path": task["path"], "inputs": [spec]}


def ortweb_decode(task, message):
    if not message.get("ok"):
        return f"{message.get('stage', 'run')}: {message.get('error', '')}"
    output = message["outputs"][0]
    want = expected(task["t_out"])
    if task["t_out"] == "bfloat16":
        want = want.astype(np.float32)
    names = {v: k for k, v in ORTWEB_TYPES.items()}
    if output["type"] not in names:
        return f"compare: output type {output['type']}"
    raw = np.frombuffer(base64.b64decode(output["b64"]), np.uint8)
    got = raw.view(NUMPY_TYPE[names[output["type"]]]).reshape(output["dims"])
    return compare(got, want)


class Worker:
    """One worker process, restarted after a crash or a timeout."""

    def __init__(self, runtime, log, node_dir):
        self.runtime, self.log, self.node_dir = runtime, log, node_dir
        self.process = None
        self.buffer = ""

    def start(self):
        threads = dict.fromkeys(("OMP_NUM_THREADS", "TVM_NUM_THREADS"), "1")
        if self.runtime == "ortweb":
            command = ["node", str(HERE / "ortweb_worker.js")]
            env = dict(os.environ, NODE_PATH=str(self.node_dir / "node_modules"), **threads)
        else:
            command = [sys.executable, str(Path(__file__).resolve()), "--worker", self.runtime]
            env = dict(os.environ, **threads)
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env=env, start_new_session=True, text=True, bufsize=1,
        )  # fmt: skip
        self.buffer = ""

    def kill(self):
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, 9)
            self.process.wait()
            self.process = None

    def _line(self, deadline):
        stream = self.process.stdout.fileno()
        while "\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stream], [], [], left)[0]:
                return None
            chunk = os.read(stream, 1 << 20).decode()
            if not chunk:
                return ""
            self.buffer += chunk
        line, self.buffer = self.buffer.split("\n", 1)
        return line

    def do(self, task):
        if self.process is None or self.process.poll() is not None:
            self.start()
        payload = ortweb_encode(task) if self.runtime == "ortweb" else task
        try:
            self.process.stdin.write(json.dumps(payload) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            self.kill()
            return "crash: worker pipe closed"
        timeout = TIMEOUT_SECONDS.get(self.runtime, 60)
        deadline = time.monotonic() + timeout
        while True:
            line = self._line(deadline)
            if line is None:
                self.kill()
                return f"timeout: no answer in {timeout} s"
            if line == "":
                code = self.process.wait()
                self.process = None
                return f"crash: worker exited with {code}"
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if message.get("id") == task["id"]:
                if self.runtime == "ortweb":
                    return ortweb_decode(task, message)
                return message["result"]


def run_tasks(tasks, jobs, out, node_dir, cache, log):
    """Runs every task of every runtime; identical models (by hash) run once per runtime."""
    results, lock, seconds = {}, threading.Lock(), {}
    shards = []
    for runtime, items in tasks.items():
        count = max(1, min(jobs, len(items)))
        shards.extend((runtime, index, items[index::count]) for index in range(count))

    def run_shard(runtime, index, items):
        start = time.monotonic()
        with open(out / f"worker_{runtime}_{index}.log", "w") as log_file:
            worker = Worker(runtime, log_file, node_dir)
            try:
                for number, task in enumerate(items):
                    key = "|".join(
                        str(task[k]) for k in ("version", "hash", "t_in", "t_out", "eye")
                    )
                    with lock:
                        hit = cache.get(key)
                    if hit is None:
                        hit = worker.do(
                            {k: v for k, v in task.items() if k != "key"} | {"id": number}
                        )
                        with lock:
                            cache[key] = hit
                    with lock:
                        results[task["key"]] = hit
            finally:
                worker.kill()
        return runtime, time.monotonic() - start

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_shard, *shard) for shard in shards]
        for future in concurrent.futures.as_completed(futures):
            runtime, spent = future.result()
            seconds[runtime] = seconds.get(runtime, 0.0) + spent
            log(f"{runtime}: a shard done in {spent:.1f} s")
    return results, seconds


def make_task(runtime, key, path, t_in, t_out, versions, folder, eye=False):
    model = onnx.load(path)
    wrapped = not FEEDS_BFLOAT16[runtime] and "bfloat16" in (t_in, t_out)
    if wrapped and any(
        v.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
        for v in [*model.graph.input, *model.graph.output]
    ):
        path = folder / "wrapped" / Path(path).relative_to(folder / "models")
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(runners.wrap_bfloat16(model), path)
        model = onnx.load(path)
    else:
        wrapped = False
    return {
        "key": key, "path": str(path), "t_in": t_in, "t_out": t_out, "eye": eye,
        "wrapped": wrapped, "input_name": model.graph.input[0].name,
        "hash": hashlib.sha256(Path(path).read_bytes()).hexdigest(),
        "version": versions.get(runtime),
    }  # fmt: skip


# --- the reach table ----------------------------------------------------------------------


def build_models(out, option_sets, log):
    """Writes the models before eyefold and runs eyefold once per option set and shape."""
    reports, failures = {}, {}
    for shape in SHAPES:
        folder = out / "models" / "before" / shape
        folder.mkdir(parents=True, exist_ok=True)
        for source, dtype in combinations():
            model = eyelike_model(source, dtype, shape == "dynamic")
            onnx.save(model, folder / f"{combo_name(source, dtype)}.onnx")
    for option in option_sets:
        if OPTION_SETS[option] is None:
            continue
        for shape in SHAPES:
            target = out / "models" / option / shape
            shutil.rmtree(target, ignore_errors=True)
            report = out / f"eyefold_{option}_{shape}.json"
            source = out / "models" / "before" / shape
            command = [sys.executable, "-m", "eyefold", "optimize", str(source),
                       "--output-dir", str(target), "-j", "2", "-q", "--report", str(report),
                       *OPTION_SETS[option]]  # fmt: skip
            start = time.monotonic()
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            log(f"eyefold {' '.join(OPTION_SETS[option]) or '(default)'} {shape}:"
                f" exit {done.returncode} in {time.monotonic() - start:.1f} s")  # fmt: skip
            if done.returncode not in (0, 1):
                raise SystemExit(f"eyefold failed: {done.stderr}")
            for entry in json.loads(report.read_text())["models"]:
                name = Path(entry["path"]).stem
                reports[(option, shape, name)] = entry
                if entry["status"] != "ok":
                    failures[(option, shape, name)] = f"eyefold: {entry.get('error')}"
    return reports, failures


def reach_tasks(out, runtimes, option_sets, failures, versions):
    tasks, preset = {runtime: [] for runtime in runtimes}, {}
    for option in option_sets:
        for shape in SHAPES:
            for source, dtype in combinations():
                name = combo_name(source, dtype)
                path = out / "models" / option / shape / f"{name}.onnx"
                for runtime in runtimes:
                    key = (runtime, option, shape, source, dtype)
                    if (option, shape, name) in failures:
                        preset[key] = failures[(option, shape, name)]
                        continue
                    task = make_task(
                        runtime, key, path, source, dtype or source, versions, out
                    )
                    tasks[runtime].append(task)
    return tasks, preset


def tract_bfloat16_warnings(reports, shape):
    """bfloat16 combinations whose --target-runtime tract run warns, naming tract, per node."""
    warned = 0
    for source, dtype in combinations():
        if "bfloat16" not in (source, dtype):
            continue
        entry = reports.get(("tract", shape, combo_name(source, dtype)))
        warnings = (entry or {}).get("warnings", [])
        warned += any("tract" in w and "BFLOAT16" in w for w in warnings)
    return warned


def summarize(results, runtimes, option_sets, versions, reports, seconds, total):
    count = {}
    for (runtime, option, shape, _, _), result in results.items():
        key = (runtime, option, shape)
        count[key] = count.get(key, 0) + (result == "ok")

    def cell(runtime, option, shape):
        return str(count.get((runtime, option, shape), "-"))

    worse = worse_lists(results, runtimes, option_sets)
    title = "# EyeLike runtime reach: 182 type combinations (k=1, opset 22), before and after"
    lines = [title + " eyefold", ""]
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v) + ".")
    spent = ", ".join(f"{k} {v:.0f}" for k, v in seconds.items())
    lines.append(f"Measured {datetime.date.today().isoformat()} in {total:.0f} s"
                 f" (worker seconds: {spent}).")  # fmt: skip
    lines += ["", "## Summary", "", "Combinations that run bit-exactly, static / dynamic"
              " input; the last column counts those that ran before and fail or differ after,"
              " over every option set and both shapes.", ""]  # fmt: skip
    heads = [f"`{LABELS[o]}`" if o not in ("before", "default") else LABELS[o]
             for o in option_sets]  # fmt: skip
    lines.append("| runtime | " + " | ".join(heads) + " | worse |")
    lines.append("| --- |" + " ---: |" * (len(option_sets) + 1))
    for runtime in runtimes:
        cells = [f"{cell(runtime, o, 'static')} / {cell(runtime, o, 'dynamic')}"
                 for o in option_sets]  # fmt: skip
        bad = sum(len(v) for k, v in worse.items() if k.startswith(f"{runtime} "))
        lines.append(f"| {RUNTIME_LABELS[runtime]} | {' | '.join(cells)} | {bad} |")
    lines += ["", "## Each runtime after its own target", ""]
    lines += own_target_lines(runtimes, option_sets, cell, reports)
    lines += ["", "## Worse: ran before, fails or differs after (same runtime, shape)", ""]
    lines += ["none"] if not worse else []
    for title, items in worse.items():
        lines.append(f"- {title}: {len(items)}: " + "; ".join(items))
    lines += ["", "## Errors (distinct messages, with counts)", ""]
    lines += error_lines(results, runtimes, option_sets)
    return "\n".join(lines) + "\n", worse


def own_target_lines(runtimes, option_sets, cell, reports):
    heads = ["static before", "static after", "dynamic before", "dynamic after"]
    lines = [f"| runtime | target | {' | '.join(heads)} |"]
    lines.append("| --- | --- | ---: | ---: | ---: | ---: |")
    for runtime in runtimes:
        own = OWN_TARGET.get(runtime, runtime)
        if own not in option_sets:
            continue
        row = [RUNTIME_LABELS[runtime], f"`--target-runtime {own}`"]
        for shape in SHAPES:
            row += [cell(runtime, "before", shape), cell(runtime, own, shape)]
        lines.append("| " + " | ".join(row) + " |")
    if "tract" in option_sets:
        warned = [f"{tract_bfloat16_warnings(reports, s)} of 26 ({s})" for s in SHAPES]
        lines += ["", "bfloat16 combinations whose `--target-runtime tract` run warns, per"
                  f" node, that tract cannot run them: {', '.join(warned)}."]  # fmt: skip
    return lines


def worse_lists(results, runtimes, option_sets):
    worse = {}
    for runtime in runtimes:
        for option in option_sets:
            for shape in SHAPES:
                items = [
                    f"{s} -> {d or '(none)'}: {results[(runtime, option, shape, s, d)]}"
                    for s, d in combinations()
                    if results.get((runtime, "before", shape, s, d)) == "ok"
                    and results.get((runtime, option, shape, s, d), "ok") != "ok"
                ]
                if items:
                    worse[f"{runtime} {LABELS[option]} ({shape})"] = items
    return worse


def _message(result):
    """An error without the parts that name one combination (TVM's type codes)."""
    return re.sub(r"input \(\w+\) and attribute \(\d+\)", "input and attribute", result)[:240]


def error_lines(results, runtimes, option_sets):
    lines = []
    for runtime in runtimes:
        for option in option_sets:
            for shape in SHAPES:
                errors = {}
                for s, d in combinations():
                    result = results.get((runtime, option, shape, s, d), "ok")
                    if result != "ok":
                        errors.setdefault(_message(result), []).append(f"{s}->{d or 'none'}")
                if errors:
                    lines.append(f"**{runtime}, {LABELS[option]}, {shape}**")
                    for message, who in sorted(errors.items(), key=lambda item: -len(item[1])):
                        names = f": {', '.join(who)}" if len(who) <= 30 else ""
                        lines.append(f"- {len(who)} x `{message}`{names}")
                    lines.append("")
    return lines


# --- the built-in tables (--tables) -----------------------------------------------------


def table_models(out):
    """(kind, a, b, path): EyeLike at opsets 22 and 21, Cast a -> b, lowered a -> b."""
    import onnx_ir as ir

    from eyefold.passes.lower_eye_like import LowerEyeLikePass

    items = []
    folder = out / "models" / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    for opset in (22, 21):
        for source, dtype in combinations():
            if opset < 22 and "bfloat16" in (source, dtype):
                continue
            path = folder / f"eyelike{opset}_{combo_name(source, dtype)}.onnx"
            onnx.save(eyelike_model(source, dtype, True, opset), path)
            items.append((f"eyelike{opset}", source, dtype, path))
    for source in TYPES:
        for target in TYPES:
            node = helper.make_node("Cast", ["x"], ["y"], to=ONNX_TYPE[target])
            path = folder / f"cast_{source}__{target}.onnx"
            onnx.save(single_node_model([node], source, target, True), path)
            items.append(("cast", source, target, path))
    for target in TYPES:
        model = ir.from_proto(eyelike_model("float", target, True))
        LowerEyeLikePass()(model)
        path = folder / f"lowered_float__{target}.onnx"
        onnx.save(ir.to_proto(model), path)
        items.append(("lowered", "float", target, path))
    return items


GRID_ORDER = sorted(TYPES, key=str.upper)  # the order of eyefold's all_combinations


def print_tables(results, runtimes, versions):
    today = datetime.date.today().isoformat()
    for runtime in runtimes:

        def ok(kind, a, b, runtime=runtime):
            return results.get((runtime, kind, a, b)) == "ok"

        print(f"\n# {runtime} {versions.get(runtime)}, measured {today}")
        for kind in ("eyelike22", "eyelike21"):
            print(f"{kind}: (columns: none, " + ", ".join(GRID_ORDER) + ")")
            for source in GRID_ORDER:
                if kind == "eyelike21" and source == "bfloat16":
                    continue
                marks = ["#" if ok(kind, source, d) else "." for d in [None, *GRID_ORDER]]
                print(f'    "{source.upper():<8} {"".join(marks)}",')
        print("cast: (columns: " + ", ".join(GRID_ORDER) + ")")
        for source in GRID_ORDER:
            marks = "".join("#" if ok("cast", source, t) else "." for t in GRID_ORDER)
            print(f'    "{source.upper():<8} {marks}",')
        print(
            "lowered: "
            + "".join("#" if ok("lowered", "float", t) else "." for t in GRID_ORDER)
        )
        failures = {}
        for (rt, kind, a, b), result in results.items():
            if rt == runtime and result != "ok":
                failures.setdefault(f"{kind}: {_message(result)[:160]}", []).append(
                    f"{a}->{b or 'none'}"
                )
        for message, who in sorted(failures.items()):
            print(f"  {len(who)} x {message}")


def measure_tables(out, runtimes, jobs, node_dir, cache, versions, log):
    tasks = {runtime: [] for runtime in runtimes}
    for kind, a, b, path in table_models(out):
        for runtime in runtimes:
            key = (runtime, kind, a, b)
            tasks[runtime].append(
                make_task(runtime, key, path, a, b or a, versions, out, eye=kind == "cast")
            )
    results, _ = run_tasks(tasks, jobs, out, node_dir, cache, log)
    print_tables(results, runtimes, versions)


# --- main ---------------------------------------------------------------------------------


def runtime_versions(node_dir):
    import importlib.metadata

    versions = dict.fromkeys(VERSION_PACKAGES)
    for package in VERSION_PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[package] = importlib.metadata.version(package)
    versions["tvm"] = versions.pop("apache-tvm")
    versions["eyefold"] = f"{versions['eyefold']} ({eyefold_commit()})"
    try:
        manifest = node_dir / "node_modules" / "onnxruntime-web" / "package.json"
        versions["ortweb"] = json.loads(manifest.read_text())["version"]
        node = subprocess.run(
            ["node", "--version"], capture_output=True, text=True, check=False
        )
        versions["node"] = node.stdout.strip()
    except (OSError, ValueError):
        versions["ortweb"] = None
    return versions


def eyefold_commit():
    """The commit of the source tree this script sits in, and whether eyefold differs."""
    root = str(HERE.parent)
    git = ["git", "-C", root]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip()  # fmt: skip
    if not head:
        return "not a git checkout"
    status = [*git, "status", "--porcelain", "--", "eyefold", "rules"]
    changed = subprocess.run(status, capture_output=True, text=True, check=False).stdout
    return f"commit {head}" + (", with uncommitted changes" if changed.strip() else "")


def available(runtimes, node_dir, log):
    found = []
    for runtime in runtimes:
        if runtime == "ortweb":
            ready = (node_dir / "node_modules" / "onnxruntime-web").is_dir() and shutil.which(
                "node"
            )
            reason = (
                None if ready else f"onnxruntime-web not installed in {node_dir}, or no node"
            )
        else:
            reason = runners.missing_reason(runtime)
        if reason:
            log(f"skipping {runtime}: {reason}")
        else:
            found.append(runtime)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "reach")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--options", default=",".join(OPTION_SETS))
    parser.add_argument("--node-dir", type=Path, default=HERE / "node")
    parser.add_argument("--cache", type=Path, help="JSON file of results kept between runs")
    parser.add_argument("--report", type=Path, help="where the markdown goes (OUT/report.md)")
    parser.add_argument("--tables", action="store_true", help="measure the built-in tables")
    args = parser.parse_args()
    if args.worker:
        return worker_main(args.worker)
    start = time.monotonic()

    def log(message):
        print(f"[{time.monotonic() - start:7.1f} s] {message}", file=sys.stderr, flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    versions = runtime_versions(args.node_dir)
    runtimes = available([r for r in args.runtimes.split(",") if r], args.node_dir, log)
    cache = json.loads(args.cache.read_text()) if args.cache and args.cache.exists() else {}
    if args.tables:
        measure_tables(args.out, runtimes, args.jobs, args.node_dir, cache, versions, log)
    else:
        options = ["before", *(o for o in args.options.split(",") if o and o != "before")]
        reports, failures = build_models(args.out, options, log)
        tasks, preset = reach_tasks(args.out, runtimes, options, failures, versions)
        log("tasks: " + ", ".join(f"{r} {len(t)}" for r, t in tasks.items()))
        results, seconds = run_tasks(tasks, args.jobs, args.out, args.node_dir, cache, log)
        results.update(preset)
        text, worse = summarize(
            results, runtimes, options, versions, reports, seconds, time.monotonic() - start
        )
        (args.report or args.out / "report.md").write_text(text)
        flat = {"|".join(str(p) for p in key): value for key, value in sorted(
            results.items(), key=lambda item: [str(p) for p in item[0]])}  # fmt: skip
        record = {
            "versions": versions,
            "key": "runtime|option|shape|input|dtype",
            "results": flat,
        }
        (args.out / "results.json").write_text(json.dumps(record, indent=1) + "\n")
        print(text.split("## Errors")[0])
        log(f"done; {len(worse)} worse cells; see {args.report or args.out / 'report.md'}")
    if args.cache:
        args.cache.write_text(json.dumps(cache, indent=0, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
