"""Shards of one zoo run by separate processes: Slurm arrays, Dask and Ray, as the README
writes them, over onnx's backend test data, where every model is named ``model.onnx``.

Each ``ok`` result must hold its own model's output (byte-equal to that model optimized
alone), no two results may name one file, and a clash between processes fails the later
model alone instead of overwriting the earlier one's output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest

import eyefold

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
README = Path(__file__).resolve().parents[2] / "README.md"
BIN = Path(sys.executable).parent  # the environment's `eyefold` command


def backend_zoo(root: Path, count: int) -> list[Path]:
    """The ``count`` smallest backend models, copied to ``root/<kind>/<test>/model.onnx``."""
    models = sorted(DATA.glob("*/*/model.onnx"), key=lambda p: (p.stat().st_size, str(p)))
    copies = []
    for model in models[:count]:
        copy = root / model.relative_to(DATA)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(model, copy)
        copies.append(copy)
    return copies


def alone(model: Path, folder: Path) -> bytes:
    """``model`` optimized by itself in this process: what its output must hold."""
    (result,) = eyefold.optimize_files([model], folder / model.parent.name)
    assert result.status == "ok", result.error
    return Path(result.output).read_bytes()


def expected_outputs(models: list[Path], folder: Path) -> dict[Path, bytes]:
    expected = {model.resolve(): alone(model, folder) for model in models}
    assert len(set(expected.values())) == len(models)  # every output tells its model
    return expected


def readme_block(language: str, containing: str) -> list[str]:
    """The lines of the README's ``language`` code block that holds ``containing``."""
    blocks = re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if containing in b]
    return block.splitlines()


def assert_own_outputs(results: list[eyefold.FileResult], expected: dict[Path, bytes]) -> None:
    """Every ``ok`` result holds its own model's output; no two name the same file."""
    ok = [r for r in results if r.status == "ok"]
    assert len({r.output for r in ok}) == len(ok)
    for result in ok:
        assert Path(result.output).read_bytes() == expected[Path(result.input).resolve()]


@pytest.mark.slow
def test_input_root_puts_each_file_at_its_path_in_the_zoo(tmp_path: Path) -> None:
    models = backend_zoo(tmp_path / "zoo", 4)
    expected = expected_outputs(models, tmp_path / "alone")
    out = tmp_path / "out"
    done = subprocess.run(
        [BIN / "eyefold", "optimize", *map(str, models), "--input-root",
         str(tmp_path / "zoo"), "--output-dir", str(out), "-q"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for model in models:
        output = out / model.relative_to(tmp_path / "zoo")
        assert output.read_bytes() == expected[model.resolve()]
    # A model outside the root fails alone.
    stray = tmp_path / "stray.onnx"
    shutil.copy(models[0], stray)
    results = eyefold.optimize_files(
        [stray, models[1]], tmp_path / "out2", input_root=tmp_path / "zoo"
    )
    assert [r.status for r in results] == ["failed", "ok"]
    assert f"{stray} is not inside the input root" in (results[0].error or "")
    # A folder of the zoo is placed by the root too, not by the folder given.
    kind = models[0].relative_to(tmp_path / "zoo").parts[0]
    results = eyefold.optimize_files(
        [tmp_path / "zoo" / kind], tmp_path / "out3", input_root=tmp_path / "zoo"
    )
    assert results and all(r.status == "ok" for r in results)
    for result in results:
        relative = Path(result.input).relative_to(tmp_path / "zoo")
        assert relative.parts[0] == kind
        assert (tmp_path / "out3" / relative).read_bytes() == expected[Path(result.input)]


@pytest.mark.slow
def test_a_batch_in_another_process_never_overwrites_another_inputs_output(
    tmp_path: Path,
) -> None:
    first, second = backend_zoo(tmp_path / "zoo", 2)  # both named model.onnx
    expected = expected_outputs([first, second], tmp_path / "alone")
    out = tmp_path / "out"
    runs = [
        subprocess.Popen(
            [BIN / "eyefold", "optimize", str(model), "--output-dir", str(out), "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for model in (first, second)
    ]
    errors = [run.communicate(timeout=120)[1] for run in runs]
    codes = [run.returncode for run in runs]
    assert sorted(codes) == [0, 1], errors
    winner, loser = (first, second) if codes[0] == 0 else (second, first)
    assert (out / "model.onnx").read_bytes() == expected[winner.resolve()]
    assert errors[codes.index(1)] == (
        f"eyefold: error: {loser}: cannot write {out / 'model.onnx'}: it is already the"
        f" output of {winner.resolve()} (recorded in {out / '.model.onnx.eyefold-source'};"
        " remove both files to write it again)\n"
    )
    # A re-run of the same input takes its output again.
    (again,) = eyefold.optimize_files([winner], out)
    assert again.status == "ok"
    assert (out / "model.onnx").read_bytes() == expected[winner.resolve()]


@pytest.mark.slow
def test_the_readme_slurm_recipe_runs_from_an_empty_folder(tmp_path: Path) -> None:
    models = backend_zoo(tmp_path / "zoo", 6)
    expected = expected_outputs(models, tmp_path / "alone")
    script = "\n".join(readme_block("sh", "SLURM_ARRAY_TASK_ID"))
    environment = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    tasks = [
        subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={
                **environment,
                "SLURM_ARRAY_TASK_ID": str(task),
                "SLURM_ARRAY_TASK_COUNT": str(count),
            },
        )
        for task, count in ((0, 2), (1, 2), (9, 10))  # task 9 of 10: an empty shard
    ]
    for task in tasks:
        _, err = task.communicate(timeout=180)
        assert task.returncode == 0 and "error" not in err, err
    out = tmp_path / "out"
    assert (out / "report.0.json").is_file() and (out / "report.1.json").is_file()
    assert not (out / "report.9.json").exists()  # eyefold was not called on no input
    for model in models:
        output = out / model.relative_to(tmp_path / "zoo")
        assert output.read_bytes() == expected[model.resolve()]


@pytest.fixture(scope="module")
def dask_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def run_recipe(
    engine: str, zoo: Path, out: Path, *, root: bool = True, **names: object
) -> dict[str, Any]:
    """The README's Python recipe for ``engine`` ("Dask" or "Ray"), run on ``zoo`` into
    ``out`` (its only change; ``root=False``: also without ``input_root``); its variables.
    """
    lines = []
    for line in readme_block("python", "# Dask"):
        if line.startswith("zoo, out = "):
            line = f"zoo, out = {str(zoo)!r}, {str(out)!r}"
        if line.endswith(("# Dask", "# Ray")) and not line.endswith(f"# {engine}"):
            continue
        if not root:
            line = line.replace(", input_root=zoo", "")
        lines.append(line)
    assert sum("input_root" in line for line in lines) == root
    scope = dict(names)
    exec("\n".join(lines), scope)  # the lambda is pickled by value, as from a script
    return scope


@pytest.mark.slow
def test_the_readme_dask_recipe_on_a_local_cluster(
    dask_client: object, tmp_path: Path
) -> None:
    models = backend_zoo(tmp_path / "zoo", 10)
    expected = expected_outputs(models, tmp_path / "alone")
    out = tmp_path / "out"
    recipe = run_recipe("Dask", tmp_path / "zoo", out, client=dask_client)
    assert sorted(recipe["paths"]) == sorted(map(str, models)) and len(recipe["shards"]) > 2
    flat = [result for shard in recipe["results"] for result in shard]
    assert len(flat) == len(models) and all(r.status == "ok" for r in flat)
    assert_own_outputs(flat, expected)
    for model in models:
        assert (out / model.relative_to(tmp_path / "zoo")).is_file()


def test_dask_shards_without_a_root_fail_their_clashes_instead_of_overwriting(
    dask_client: object, tmp_path: Path
) -> None:
    """The recipe as it stood, without ``input_root``: every model wants out/model.onnx."""
    models = backend_zoo(tmp_path / "zoo", 8)
    expected = expected_outputs(models, tmp_path / "alone")
    recipe = run_recipe(
        "Dask", tmp_path / "zoo", tmp_path / "out", root=False, client=dask_client
    )
    flat = [result for shard in recipe["results"] for result in shard]
    assert len(flat) == len(models)
    assert [r.status for r in flat].count("ok") == 1
    assert_own_outputs(flat, expected)
    for result in flat:
        if result.status == "failed":
            assert "is already the output of" in (result.error or "")


def test_jobs_in_a_dask_worker_run_in_that_worker(dask_client: object, tmp_path: Path) -> None:
    models = backend_zoo(tmp_path / "zoo", 3)
    expected = expected_outputs(models, tmp_path / "alone")
    client = dask_client
    daemonic = "__import__('multiprocessing').current_process().daemon"
    assert client.submit(eval, daemonic).result(timeout=60)  # type: ignore[attr-defined]
    future = client.submit(  # type: ignore[attr-defined]
        eyefold.optimize_files, [str(m) for m in models], str(tmp_path / "out"),
        input_root=str(tmp_path / "zoo"), jobs=2,
    )  # fmt: skip
    results = future.result(timeout=120)
    assert [r.status for r in results] == ["ok"] * 3, [r.error for r in results]
    assert_own_outputs(results, expected)


_IN_A_DAEMON = """
import multiprocessing, sys, eyefold
if __name__ == "__main__":
    daemon = multiprocessing.get_context("spawn").Process(
        target=eyefold.optimize_files, args=(sys.argv[1:3], sys.argv[3]),
        kwargs={"jobs": 2}, daemon=True,
    )
    daemon.start()
    daemon.join()
    sys.exit(daemon.exitcode)
"""


def test_jobs_in_a_daemonic_process_run_there_with_a_warning(tmp_path: Path) -> None:
    models = backend_zoo(tmp_path / "zoo", 2)
    expected = expected_outputs(models[:1], tmp_path / "alone")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", _IN_A_DAEMON, str(models[0]), str(models[0]), str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "daemonic processes may not start workers" in done.stderr
    assert "daemonic processes are not allowed to have children" not in done.stderr
    assert (out / "model.onnx").read_bytes() == expected[models[0].resolve()]


@pytest.mark.slow
def test_the_readme_ray_recipe(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    models = backend_zoo(tmp_path / "zoo", 10)
    expected = expected_outputs(models, tmp_path / "alone")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        recipe = run_recipe("Ray", tmp_path / "zoo", tmp_path / "out", ray=ray)
    finally:
        ray.shutdown()
    flat = [result for shard in recipe["results"] for result in shard]
    assert len(flat) == len(models) and all(r.status == "ok" for r in flat)
    assert_own_outputs(flat, expected)


_CHECK_IN_A_DAEMON = """
import json, multiprocessing, sys, eyefold

def work(model, out, report):
    options = eyefold.PipelineOptions(target_runtime="openvino")
    [result] = eyefold.optimize_files([model], out, options=options, check=True)
    with open(report, "w") as file:
        json.dump({"status": result.status, "error": result.error,
                   "check": result.report.to_dict()["check"] if result.report else None}, file)

if __name__ == "__main__":
    daemon = multiprocessing.get_context("spawn").Process(
        target=work, args=tuple(sys.argv[1:4]), daemon=True
    )
    daemon.start()
    daemon.join()
    sys.exit(daemon.exitcode)
"""


@pytest.mark.slow
def test_check_on_the_target_runtime_runs_in_a_daemonic_worker(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    model = Path(__file__).resolve().parents[2] / "sample_models" / "dynamic_batch.onnx"
    report = tmp_path / "result.json"
    script = tmp_path / "check_in_a_daemon.py"  # spawn re-imports the target from a file
    script.write_text(_CHECK_IN_A_DAEMON)
    done = subprocess.run(
        [sys.executable, str(script), str(model), str(tmp_path / "out"), str(report)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(report.read_text())
    assert result["status"] == "ok", result["error"]
    assert "openvino" in result["check"]["output_backend"].lower()
