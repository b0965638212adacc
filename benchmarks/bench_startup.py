"""Start-up of the eyefold command side by side with the interpreter, onnx and the peers.

Usage (from the repository root, in the environment to measure)::

    python benchmarks/bench_startup.py [--reps 15] [--out benchmarks/out/startup.json]

Each row is one command in a fresh process, wall time, timed from the parent. One warm-up
round, then ``--reps`` rounds with the commands interleaved (A B C D, A B C D, ...), so a
load change on the shared machine hits every row alike; the table gives medians and
ratios within this run. The targets: ``eyefold --version`` <= 4x ``python -c pass``;
``eyefold optimize`` on the torch sample <= 1.5x the ``import onnx`` process, and at most
1.0x the ``onnxslim`` and ``onnxsim`` commands on the same sample (whole processes, the
peers' scripts from this environment; a peer not installed is left out).

Every command runs from compiled bytecode, as an installed package does: pip compiles the
peers' modules when it installs them, and an editable eyefold writes its own on the first
run, the warm-up round. So the children run without ``PYTHONDONTWRITEBYTECODE``, under
which an editable eyefold would compile its hundred modules on every start (about 0.08 s
here) while the peers' compiled modules are read as usual.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_models" / "torch_eye_chain.onnx"


def _eyefold() -> list[str]:
    script = Path(sys.executable).with_name("eyefold")
    return [str(script)] if script.exists() else [sys.executable, "-m", "eyefold"]


PEERS = ("onnxslim", "onnxsim")


def _peer_rows(output: Path) -> dict[str, list[str]]:
    """The peers' own commands on the sample, where their scripts are installed here."""
    rows = {}
    for name in PEERS:
        script = Path(sys.executable).with_name(name)
        if script.exists():
            rows[f"{name} torch_eye_chain.onnx OUT"] = [
                str(script),
                str(SAMPLE),
                str(output.with_name(f"{name}.onnx")),
            ]
    return rows


def commands(output: Path) -> dict[str, list[str]]:
    """The rows, in run order."""
    return {
        'python -c "pass"': [sys.executable, "-c", "pass"],
        'python -c "import onnx"': [sys.executable, "-c", "import onnx"],
        'python -c "import onnx_ir"': [sys.executable, "-c", "import onnx_ir"],
        "eyefold --version": [*_eyefold(), "--version"],
        "eyefold optimize torch_eye_chain.onnx OUT": [
            *_eyefold(),
            "optimize",
            str(SAMPLE),
            str(output),
            "-q",
        ],
        **_peer_rows(output),
    }


_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _once(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=_ENV)
    return time.perf_counter() - start


def measure(reps: int) -> dict[str, list[float]]:
    """Wall times per row: one warm-up round (dropped), then ``reps`` interleaved rounds."""
    with tempfile.TemporaryDirectory() as folder:
        rows = commands(Path(folder) / "out.onnx")
        times: dict[str, list[float]] = {name: [] for name in rows}
        for round_ in range(reps + 1):
            for name, command in rows.items():
                seconds = _once(command)
                if round_:
                    times[name].append(seconds)
    return times


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _versions() -> dict[str, str | None]:
    names = ("onnx", "onnx-ir", "onnxscript", "ml_dtypes", "numpy", "sympy", *PEERS)
    return {name: _version(name) for name in names}


def render(medians: dict[str, float]) -> str:
    """The markdown table and the two targets."""
    base = medians['python -c "pass"']
    onnx_import = medians['python -c "import onnx"']
    lines = [
        "| command | median s | x `python -c pass` | x `import onnx` process |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines.extend(
        f"| `{name}` | {value:.3f} | {value / base:.2f} | {value / onnx_import:.2f} |"
        for name, value in medians.items()
    )
    version = medians["eyefold --version"] / base
    optimize = medians["eyefold optimize torch_eye_chain.onnx OUT"] / onnx_import
    lines += [
        "",
        f"- `eyefold --version` = {version:.2f}x `python -c pass` (target <= 4x):"
        f" **{'met' if version <= 4 else 'missed'}**",
        f"- `eyefold optimize` = {optimize:.2f}x the `import onnx` process (target <= 1.5x):"
        f" **{'met' if optimize <= 1.5 else 'missed'}**",
    ]
    ours = medians["eyefold optimize torch_eye_chain.onnx OUT"]
    for name in PEERS:
        peer = medians.get(f"{name} torch_eye_chain.onnx OUT")
        if peer:
            lines.append(
                f"- `eyefold optimize` = {ours / peer:.2f}x `{name}` on the same sample"
                f" (target <= 1.0x): **{'met' if ours <= peer else 'missed'}**"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    times = measure(args.reps)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"versions: {_versions()}; {args.reps} interleaved rounds after a warm-up")
    print(render(medians))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        document = {"versions": _versions(), "times": times, "medians": medians}
        args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
