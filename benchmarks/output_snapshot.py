"""Writes eyefold's outputs on the comparison set, to diff two commits byte for byte.

Usage (from the repository root)::

    python benchmarks/output_snapshot.py OUT_DIR [--no-corpus]
    diff -r OLD_DIR NEW_DIR && echo identical

The comparison set: the bundled samples, the real exports, the benchmark models
(``generate.py``: many_100, many_1000, chain_64, chain_512, big_20000, opset9_2000,
opset9_20000) and the models of onnx's backend test data, each through ``eyefold
optimize IN OUT`` in process, with the default options, ``--target-runtime onnxruntime``
and ``--target-runtime tensorrt``. A model eyefold refuses leaves a ``.refused`` file
holding the error line instead. To run another commit's code, put a clean export of it
first on ``PYTHONPATH``, its ``rules/`` linked as ``eyefold/rules`` (the installed
package's layout)::

    git archive OLD | tar -x -C /tmp/old && ln -s ../rules /tmp/old/eyefold/rules
    PYTHONPATH=/tmp/old python benchmarks/output_snapshot.py /tmp/out-old
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

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


def _corpus_models() -> list[Path]:
    import onnx

    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    return sorted(data.rglob("*.onnx"))


def _models(corpus: bool) -> dict[str, Path]:
    models = {f"sample/{p.stem}": p for p in sorted((ROOT / "sample_models").glob("*.onnx"))}
    real = sorted((ROOT / "sample_models" / "real").glob("*.onnx"))
    models.update({f"real/{p.stem}": p for p in real})
    models.update({f"bench/{name}": generate.generate(name) for name in BENCHMARK_MODELS})
    if corpus:
        for path in _corpus_models():
            models[f"corpus/{path.parent.parent.name}/{path.parent.name}"] = path
    return models


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--no-corpus", action="store_true", help="skip the backend corpus")
    args = parser.parse_args(argv)
    from eyefold.cli.main import main as eyefold_main

    print(f"eyefold from {sys.modules['eyefold'].__file__}")
    for name, path in _models(not args.no_corpus).items():
        for option_set, options in OPTION_SETS.items():
            out = args.out_dir / option_set / f"{name}.onnx"
            out.parent.mkdir(parents=True, exist_ok=True)
            errors = io.StringIO()
            with contextlib.redirect_stderr(errors):
                status = eyefold_main(["optimize", str(path), str(out), "-q", *options])
            if status != 0:
                out.with_suffix(".refused").write_text(errors.getvalue())
    print(f"wrote {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
