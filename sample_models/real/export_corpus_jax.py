"""Export JAX library functions that call ``jnp.eye`` / ``tf.eye`` to ONNX with jax2onnx.

Not run by CI: it needs jax and the libraries below. For each model it writes, into
``--out`` (this folder by default),

- ``<name>.onnx``: the jax2onnx export;
- ``<name>.inputs.npz``: one array per graph input name (what ``--check-inputs`` takes);
- ``<name>.jax.npz``: jax's outputs for those inputs, one array per graph output name;
- its entry in ``manifest.json`` (merged: other entries are kept as they are).

No library source is copied: each module below is a few lines that call the library's own
function with chosen sizes. Every library comes from its PyPI release. Tested with
jax 0.10.2, jaxlib 0.10.2, jax2onnx 0.17.1, onnx 1.23.2, onnx-ir 1.1.0, optax 0.2.8,
distrax 0.1.9, tfp-nightly 0.26.0.dev20261027:

    python export_corpus_jax.py --out sample_models/real

jax2onnx writes ``jnp.eye(n)`` as ``ConstantOfShape(Constant [n, m]) -> EyeLike`` when
``n`` is a Python int at trace time (its ``jax.numpy.eye`` plugin). A size read from a
static dim of an input is such an int: every EyeLike below is static. A size read from a
symbolic dim (``"B"``) is not: the plugin falls back to jax's own ``eye``, an
``iota``/``eq`` that jax2onnx writes as ``Range -> Equal`` (no EyeLike), the
``_dyn`` model below.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from jax2onnx import to_onnx

SEED = 0
OPTAX = {
    "library": "optax",
    "version": "0.2.8",
    "repo": "google-deepmind/optax",
    "commit": "PyPI release optax==0.2.8",
    "path": "optax/losses/_self_supervised.py",
    "line": 103,
    "function": "ntxent",
    "call": "jnp.eye(matches.shape[0]) with matches [batch, batch] from labels",
}
DISTRAX = {
    "library": "distrax",
    "version": "0.1.9",
    "repo": "google-deepmind/distrax",
    "commit": "PyPI release distrax==0.1.9",
    "path": "distrax/_src/bijectors/lower_upper_triangular_affine.py",
    "line": 73,
    "function": "LowerUpperTriangularAffine.__init__ (then .forward)",
    "call": "jnp.eye(dim) + jnp.tril(matrix, -1) with dim = matrix.shape[-1] (line 72)",
}
OPTAX_HESSIAN = {
    **OPTAX,
    "path": "optax/second_order/_deprecated.py",
    "line": 91,
    "function": "hessian_diag (deprecated in 0.2.7, still in 0.2.8)",
    "call": "jnp.eye(_ravel(params).size): the number of parameters, computed by the exporter",
}
TFP = {
    "library": "tfp-nightly (tensorflow_probability.substrates.jax)",
    "version": "0.26.0.dev20261027",
    "repo": "tensorflow/probability",
    "commit": "PyPI release tfp-nightly==0.26.0.dev20261027",
    "path": "tensorflow_probability/substrates/jax/math/psd_kernels/internal/util.py",
    "line": 316,
    "function": "mask_matrix",
    "call": "tf.eye(n, dtype=x.dtype) with n = ps.dimension_size(x, -1) (line 313);"
    " the jax substrate's tf.eye is jax.numpy.eye",
}

TFP_INV_CHOLESKY = {
    **TFP,
    "path": "tensorflow_probability/substrates/jax/bijectors/cholesky_to_inv_cholesky.py",
    "line": 75,
    "function": "CholeskyToInvCholesky._forward",
    "call": "tf.eye(x_shape[-1], batch_shape=x_shape[:-2]) with x_shape = ps.shape(x)"
    " (line 74), then triangular_solve and cholesky",
}
TFP_NEWTON_QR = {
    **TFP,
    "path": "tensorflow_probability/substrates/jax/math/ode/bdf_util.py",
    "line": 209,
    "function": "newton_qr",
    "call": "tf.eye(ps.shape(jacobian_mat)[0]) - step_size * newton_coefficient *"
    " jacobian_mat, then tf.linalg.qr",
}


def _ntxent(embeddings: jax.Array, labels: jax.Array) -> jax.Array:
    import optax

    return optax.ntxent(embeddings, labels)


def _lu_affine(matrix: jax.Array, bias: jax.Array, x: jax.Array) -> jax.Array:
    import distrax

    return distrax.LowerUpperTriangularAffine(matrix, bias).forward(x)


def _hessian_diag(
    w: jax.Array, b: jax.Array, inputs: jax.Array, targets: jax.Array
) -> jax.Array:
    import optax

    def loss(params: dict[str, jax.Array], x: jax.Array, t: jax.Array) -> jax.Array:
        return jnp.mean((jnp.tanh(x @ params["w"]) + params["b"] - t) ** 2)

    return optax.second_order.hessian_diag(loss, {"w": w, "b": b}, inputs, targets)


def _inv_cholesky(x: jax.Array) -> jax.Array:
    from tensorflow_probability.substrates.jax import bijectors

    return bijectors.CholeskyToInvCholesky().forward(x)


def _newton_qr(
    jacobian: jax.Array, coefficient: jax.Array, step: jax.Array
) -> tuple[jax.Array, jax.Array]:
    from tensorflow_probability.substrates.jax.math.ode import bdf_util

    return bdf_util.newton_qr(jacobian, coefficient, step)


def _mask_matrix(x: jax.Array, is_missing: jax.Array) -> jax.Array:
    from tensorflow_probability.substrates.jax.math.psd_kernels.internal import util

    return util.mask_matrix(x, is_missing=is_missing)


def _ntxent_feeds(rng: np.random.Generator, batch: int) -> dict[str, np.ndarray]:
    return {
        "embeddings": rng.standard_normal((batch, 4)).astype(np.float32),
        "labels": (np.arange(batch) // 2).astype(np.int32),
    }


def _lu_feeds(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "matrix": rng.standard_normal((4, 4)).astype(np.float32),
        "bias": rng.standard_normal(4).astype(np.float32),
        "x": rng.standard_normal((3, 4)).astype(np.float32),
    }


def _hessian_feeds(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "w": rng.standard_normal((3, 2)).astype(np.float32),
        "b": rng.standard_normal(2).astype(np.float32),
        "inputs": rng.standard_normal((5, 3)).astype(np.float32),
        "targets": rng.standard_normal((5, 2)).astype(np.float32),
    }


def _cholesky_feeds(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A Cholesky factor: lower triangular with a positive diagonal."""
    x = np.tril(rng.standard_normal((4, 4))) * 0.3
    np.fill_diagonal(x, 1.0 + rng.random(4))
    return {"x": x.astype(np.float32)}


def _newton_feeds(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "jacobian": rng.standard_normal((4, 4)).astype(np.float32),
        "coefficient": np.float32(0.5),
        "step": np.float32(0.1),
    }


def _mask_feeds(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "x": rng.standard_normal((2, 5, 5)).astype(np.float32),
        "is_missing": rng.random((2, 5)) < 0.4,
    }


@dataclasses.dataclass(frozen=True)
class Model:
    function: Callable[..., Any]
    inputs: list[Any]  # jax2onnx's specs: a tuple with "B" has a symbolic dim
    feeds: Callable[[np.random.Generator], dict[str, np.ndarray]]
    outputs: list[str]
    source: dict[str, Any]
    eyelike: list[dict[str, str]]  # the EyeLike nodes' classes, in graph order
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


def _models() -> dict[str, Model]:
    f32, i32 = jnp.float32, jnp.int32
    static = jax.ShapeDtypeStruct
    ntxent_why = {
        "class": "static",
        "why": "n = matches.shape[0] (line 103): the batch of labels, static at trace time;"
        " jax2onnx writes the Constant [6, 6]",
    }
    lu_why = {
        "class": "static",
        "why": "dim = matrix.shape[-1] (line 72): matrix is [4, 4]; x's batch B does not"
        " reach it",
    }
    ntxent_inputs = [static((6, 4), f32), static((6,), i32)]
    models = {
        "optax_ntxent_jax17": Model(
            _ntxent,
            ntxent_inputs,
            lambda rng: _ntxent_feeds(rng, 6),
            ["loss"],
            OPTAX,
            [ntxent_why],
            {
                "invalid": "jax2onnx writes `matches ^ 1` (line 102) as BitwiseXor (opset 18)"
                " into this opset-17 model: onnx's checker and onnxruntime refuse it, and"
                " so does eyefold (exit 1); OpenVINO and tract run it",
            },
        ),
        "optax_ntxent_jax23": Model(
            _ntxent,
            ntxent_inputs,
            lambda rng: _ntxent_feeds(rng, 6),
            ["loss"],
            OPTAX,
            [ntxent_why],
        ),
        "optax_ntxent_dyn_jax23": Model(
            _ntxent,
            [("B", 4), static(("B",), i32)],
            lambda rng: _ntxent_feeds(rng, 6),
            ["loss"],
            OPTAX,
            [],
            {
                "note": "n = matches.shape[0] is the symbolic B: jax2onnx's jnp.eye plugin"
                " falls back to jax's own eye, written as Equal(Add(Cast(Expand(Unsqueeze("
                "Range))), 0), Cast(Expand(Unsqueeze(Range)))): an identity of dynamic size,"
                " not dynamo's form (no EyeLike, not counted in identities)",
                "original_fails": {
                    "onnxruntime": "jax2onnx declares the Concat of line 110 [B, B], not"
                    " [B, 2B]: onnxruntime's buffer reuse fails ({6,6} != {6,12})",
                    "tract": "the same declared [B, B]: Impossible to unify MulInt(2, Sym(B))"
                    " with Sym(B)",
                },
            },
        ),
        "tfp_mask_matrix_jax23": Model(
            _mask_matrix,
            [("B", 5, 5), static(("B", 5), jnp.bool_)],
            _mask_feeds,
            ["masked"],
            TFP,
            [
                {
                    "class": "static",
                    "why": "n = ps.dimension_size(x, -1) (line 313): x is [B, 5, 5], its last"
                    " dim is static; B does not reach it",
                }
            ],
        ),
    }
    models["tfp_cholesky_to_inv_cholesky_jax23"] = Model(
        _inv_cholesky,
        [static((4, 4), f32)],
        _cholesky_feeds,
        ["inv_cholesky"],
        TFP_INV_CHOLESKY,
        [
            {
                "class": "static",
                "why": "x_shape[-1] (line 75) of x's static [4, 4]; batch_shape x_shape[:-2]"
                " is empty",
            }
        ],
    )
    models["tfp_newton_qr_jax17"] = Model(
        _newton_qr,
        [static((4, 4), f32), static((), f32), static((), f32)],
        _newton_feeds,
        ["q", "r"],
        TFP_NEWTON_QR,
        [
            {
                "class": "static",
                "why": "ps.shape(jacobian_mat)[0] (line 209) of the static [4, 4] jacobian",
            }
        ],
    )
    for opset in (17, 23):
        models[f"optax_hessian_diag_jax{opset}"] = Model(
            _hessian_diag,
            [static((3, 2), f32), static((2,), f32), static((5, 3), f32), static((5, 2), f32)],
            _hessian_feeds,
            ["hessian_diag"],
            OPTAX_HESSIAN,
            [
                {
                    "class": "static",
                    "why": "_ravel(params).size (line 91): w [3, 2] and b [2], 8 parameters",
                }
            ],
        )
        models[f"distrax_lu_affine_jax{opset}"] = Model(
            _lu_affine,
            [static((4, 4), f32), static((4,), f32), ("B", 4)],
            _lu_feeds,
            ["y"],
            DISTRAX,
            [lu_why],
        )
    return models


def _export(name: str, spec: Model, out: str, manifest: dict[str, Any]) -> None:
    opset = int(name.rsplit("jax", 1)[1])
    feeds = spec.feeds(np.random.default_rng(SEED))
    model = to_onnx(
        spec.function,
        spec.inputs,
        model_name=name,
        opset=opset,
        input_names=list(feeds),
        output_names=spec.outputs,
    )
    onnx.save(model, os.path.join(out, f"{name}.onnx"))
    results = jax.jit(spec.function)(*(jnp.asarray(v) for v in feeds.values()))
    results = results if isinstance(results, tuple) else (results,)
    np.savez(os.path.join(out, f"{name}.inputs.npz"), **feeds)
    np.savez(
        os.path.join(out, f"{name}.jax.npz"),
        **{k: np.asarray(v) for k, v in zip(spec.outputs, results, strict=True)},
    )
    entry = {
        **spec.source,
        "exporter": f"jax2onnx {_version('jax2onnx')}",
        "opset": opset,
        "reference": f"{name}.jax.npz",
        "tolerance": 1e-5,
        "identities": 0,
        **spec.extra,
    }
    eyes = [node.name for node in model.graph.node if node.op_type == "EyeLike"]
    if len(eyes) != len(spec.eyelike):
        raise SystemExit(f"{name}: {len(eyes)} EyeLike nodes, {len(spec.eyelike)} classes")
    # An invalid export's nodes are classified all the same, under a key the generic
    # corpus test does not read (eyefold refuses the file).
    key = "eyelike_untested" if "invalid" in spec.extra else "eyelike"
    entry[key] = dict(zip(eyes, spec.eyelike, strict=True))
    manifest[name] = entry


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--only", nargs="*", help="export only these models")
    args = parser.parse_args()
    path = os.path.join(args.out, "manifest.json")
    with open(path) as handle:
        manifest = json.load(handle)
    for name, spec in _models().items():
        if not args.only or name in args.only:
            _export(name, spec, args.out, manifest)
    with open(path, "w") as handle:
        json.dump(manifest, handle, indent=1, sort_keys=True)
        handle.write("\n")


if __name__ == "__main__":
    main()
