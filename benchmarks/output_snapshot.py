"""Writes eyefold's outputs on the comparison set, to diff two commits byte for byte.

Usage (from the repository root)::

    python benchmarks/output_snapshot.py OUT_DIR [--no-corpus] [--only TEXT]
    diff -r OLD_DIR NEW_DIR && echo identical

The comparison set: the bundled samples, the real exports, the benchmark models
(``generate.py``: many_100, many_1000, chain_64, chain_512, big_20000, opset9_2000,
opset9_20000) and the models of onnx's backend test data, each through ``eyefold
optimize IN OUT`` in process, with the default options, ``--target-runtime onnxruntime``
and ``--target-runtime tensorrt``. A model eyefold refuses leaves a ``.refused`` file
holding the error line instead. Beside each output go its JSON report (``.report.json``,
timings and the output folder taken out) and what ``eyefold inspect --json`` prints
(``.inspect.json``, with ``.inspect.exit`` its exit code when not 0). To run another
commit's code, put a clean export of it first on ``PYTHONPATH``, its ``rules/`` linked as
``eyefold/rules`` (the installed package's layout)::

    git archive OLD | tar -x -C /tmp/old && ln -s ../rules /tmp/old/eyefold/rules
    PYTHONPATH=/tmp/old python benchmarks/output_snapshot.py /tmp/out-old
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402

BENCHMARK_MODELS = (
    "many_100",
    "many_1000",
    "chain_64",
    "chain_512",
    "big_20000",
    "opset9_2000",
    "opset9_20000",
)
OPTION_SETS = {
    "default": [],
    "onnxruntime": ["--target-runtime", "onnxruntime"],
    "tensorrt": ["--target-runtime", "tensorrt"],
}


def _corpus_models() -> dict[str, Path]:
    """The backend corpus by its path under onnx's test data, without the suffix.

    Every model has a name of its own: most are ``<test>/model.onnx``, but the ``light``
    models share one folder.
    """
    import onnx

    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    return {
        path.relative_to(data).with_suffix("").as_posix(): path
        for path in sorted(data.rglob("*.onnx"))
    }


def _models(corpus: bool) -> dict[str, Path]:
    models = {f"sample/{p.stem}": p for p in sorted((ROOT / "sample_models").glob("*.onnx"))}
    real = sorted((ROOT / "sample_models" / "real").glob("*.onnx"))
    models.update({f"real/{p.stem}": p for p in real})
    models.update({f"bench/{name}": generate.generate(name) for name in BENCHMARK_MODELS})
    if corpus:
        models.update({f"corpus/{name}": path for name, path in _corpus_models().items()})
    return models


def _without_timings(value: Any) -> Any:
    """The report with its step times dropped (they differ from run to run)."""
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _comparable(text: str, out_dir: Path) -> str:
    """A JSON report without timings, the output folder spelled ``OUT``."""
    data = _without_timings(json.loads(text))
    return json.dumps(data, indent=2, sort_keys=True).replace(str(out_dir.resolve()), "OUT")


def _inspect(eyefold_main: Any, path: Path, options: list[str], out: Path) -> None:
    """Writes what ``eyefold inspect --json`` prints, and its exit code when not 0."""
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        status = eyefold_main(["inspect", str(path), "--json", *options])
    text = _comparable(printed.getvalue(), out) if status == 0 else printed.getvalue()
    out.with_suffix(".inspect.json").write_text(text + errors.getvalue())
    if status != 0:
        out.with_suffix(".inspect.exit").write_text(f"{status}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--no-corpus", action="store_true", help="skip the backend corpus")
    parser.add_argument("--only", metavar="TEXT", help="only the models whose name has TEXT")
    args = parser.parse_args(argv)
    from eyefold.cli.main import main as eyefold_main

    print(f"eyefold from {sys.modules['eyefold'].__file__}")
    for name, path in _models(not args.no_corpus).items():
        if args.only is not None and args.only not in name:
            continue
        for option_set, options in OPTION_SETS.items():
            out = args.out_dir / option_set / f"{name}.onnx"
            out.parent.mkdir(parents=True, exist_ok=True)
            report = out.with_suffix(".report.json")
            errors = io.StringIO()
            with contextlib.redirect_stderr(errors):
                status = eyefold_main(
                    ["optimize", str(path), str(out), "-q", "--report", str(report), *options]
                )
            if status != 0:
                out.with_suffix(".refused").write_text(f"exit {status}: {errors.getvalue()}")
            else:
                text = _comparable(report.read_text(encoding="utf-8"), args.out_dir)
                report.write_text(text + "\n", encoding="utf-8")
            _inspect(eyefold_main, path, options, out)
    print(f"wrote {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
