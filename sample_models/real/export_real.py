"""Export the real library modules of sample_models/real/ to ONNX, with torch's outputs.

Not run by CI: it needs torch and the libraries below. The committed models in this folder
are its output (see README.md there). For each model it writes

- ``<name>.onnx``: the export;
- ``<name>.inputs.npz``: one array per graph input name (what ``--check-inputs`` takes);
- ``<name>.torch.npz``: torch's outputs for those inputs, one array per graph output name
  (the fp16 conversions share their base model's: the float32 reference);
- ``manifest.json``: per model, the source cited (repository, file, commit or release),
  the exporter and opset, and the versions used.

No library source is copied here. ClearerVoice-Studio and mmcv are imported from checkouts
given on the command line (``git archive`` of the commits cited below); hippynn and kornia
come from their PyPI releases. Tested with torch 2.13.0+cpu, onnx 1.23.2, onnxruntime
1.32.0, onnxconverter-common 1.16.0, hippynn 0.1.3, kornia 0.9.0, einops 0.8.2,
rotary-embedding-torch 0.8.3, mmengine 0.10.7, mmcv-lite 2.2.0:

    python export_real.py --clearvoice-src CLEARVOICE --mmcv-src MMCV --out sample_models/real
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys

import numpy as np
import onnx
import torch

SEED = 0
CLEARVOICE = {
    "repo": "modelscope/ClearerVoice-Studio",
    "path": "clearvoice/clearvoice/models/mossformer_gan_se/mossformer.py",
    "commit": "6b3774dc79c46ae8bed2a4fa5f706f0ac8c75c61",
}
MMCV = {
    "repo": "open-mmlab/mmcv",
    "path": "mmcv/ops/cc_attention.py",
    "commit": "a8073c74bf83d62ec36a103f835faa4837fb6585",
}
HIPPYNN = {
    "repo": "lanl/hippynn",
    "path": "hippynn/layers/hiplayers/interactions.py (InteractLayerQuad)",
    "commit": "PyPI release hippynn==0.1.3",
}
KORNIA = {
    "repo": "kornia/kornia",
    "path": "kornia/morphology/morphology.py (dilation, _neight2channels_like_kernel)",
    "commit": "PyPI release kornia==0.9.0",
}


def _seeded() -> None:
    torch.manual_seed(SEED)


def _save(out, name, model_path, feeds, outputs, manifest, source, **notes) -> None:
    """Writes the feeds and torch's outputs beside the export, and its manifest entry."""
    model = onnx.load(model_path)
    inputs = [i.name for i in model.graph.input]
    assert sorted(feeds) == sorted(inputs), (feeds.keys(), inputs)
    np.savez(os.path.join(out, f"{name}.inputs.npz"), **feeds)
    names = [o.name for o in model.graph.output]
    np.savez(os.path.join(out, f"{name}.torch.npz"), **dict(zip(names, outputs, strict=True)))
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    manifest[name] = {**source, "opset": opsets.get("ai.onnx"), **notes}
    print(f"wrote {name}: {os.path.getsize(model_path)} bytes", flush=True)


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


def _torchscript(module, inputs, path, input_names, dynamic_axes=None) -> None:
    """The TorchScript exporter at opset 13, as a user calls it (one output, ``y``)."""
    torch.onnx.export(
        module,
        inputs,
        path,
        dynamo=False,
        opset_version=13,
        input_names=input_names,
        output_names=["y"],
        dynamic_axes=dynamic_axes,
    )


class _Positional(torch.nn.Module):
    """Calls the wrapped module with one positional argument.

    MossFormer.forward(self, x, *, mask=None) has a keyword-only parameter, and the
    TorchScript exporter passes its default as a second positional argument ("forward()
    takes 2 positional arguments but 3 were given"); a user exports through a wrapper.
    """

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


def export_mossformer(args, manifest) -> None:
    """MossFormer of MossFormerGAN-SE: ``torch.eye(quad_q_c.shape[-2], dtype=torch.bool)``.

    ``MossFormer.cal_attention`` masks with the bool eye (``masked_fill``); ``forward`` pads
    with ``F.pad(x_shift, (0, 0, 1, -1))``, a negative pad onnx's reference evaluator
    cannot run. TorchScript exporter, opset 13, dynamic B, T, Q. The views in
    cal_attention need query_key_dim == dim * expansion_factor / 2 (generator.py uses
    dim=64, query_key_dim=128); here dim=8, query_key_dim=16, x of [1, 6, 5, 8].
    """
    models = os.path.join(os.path.abspath(args.clearvoice_src), "clearvoice", "clearvoice")
    sys.path.insert(0, os.path.join(models, "models"))
    mossformer = importlib.import_module("mossformer_gan_se.mossformer")
    _seeded()
    module = mossformer.MossFormer(
        dim=8, group_size=16, query_key_dim=16, expansion_factor=4.0
    ).eval()
    # rotary_embedding_torch caches frequencies on its first call; the trace must not
    # depend on whether the module ran before.
    module.rotary_pos_emb.cache_if_possible = False
    x = torch.randn(1, 6, 5, 8)
    with torch.no_grad():
        y = module(x)
    path = os.path.join(args.out, "mossformer_op13.onnx")
    axes = {"x": {0: "B", 1: "T", 2: "Q"}, "y": {0: "BT", 1: "Q"}}
    _torchscript(_Positional(module).eval(), (x,), path, ["x"], axes)
    _save(args.out, "mossformer_op13", path, {"x": _numpy(x)}, [_numpy(y)], manifest,
          CLEARVOICE, exporter="torchscript")


def _criss_cross_attention(mmcv_src: str):
    """mmcv's CrissCrossAttention, loaded from the one file (``import mmcv.ops`` would
    load mmcv's compiled extension, which mmcv-lite does not have)."""
    path = os.path.join(os.path.abspath(mmcv_src), "mmcv", "ops", "cc_attention.py")
    spec = importlib.util.spec_from_file_location("mmcv_cc_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _eye_neg_inf_diag(n: int, device) -> torch.Tensor:
    """NEG_INF_DIAG with a bool torch.eye, as the user of CCNet#115 writes it for export."""
    mask = torch.eye(n, dtype=torch.bool, device=device)
    return torch.zeros(n, n, device=device).masked_fill(mask, float("-inf"))


def export_ccnet(args, manifest) -> None:
    """CrissCrossAttention (CCNet), mmcv's pure-PyTorch version.

    Its ``NEG_INF_DIAG`` is ``torch.diag(...)``: TorchScript cannot export aten::diag, and
    dynamo exports it as Range/Equal/Where, so ``ccnet_mmcv_dynamo`` has no EyeLike (it
    is the float16 converters' case). Neither mmcv's history of that file nor
    speedinghzl/CCNet's branches ever use torch.eye (``git log -S'torch.eye'``: no
    commit); ``ccnet_mmcv_eye_op13`` replaces NEG_INF_DIAG by the bool torch.eye a
    TensorRT user describes in speedinghzl/CCNet#115, and is exported by TorchScript.
    gamma (a Scale initialised to 0, which makes the block the identity) is set to 0.5.
    """
    source = _criss_cross_attention(args.mmcv_src)
    _seeded()
    module = source.CrissCrossAttention(16).eval()
    with torch.no_grad():
        module.gamma.scale.fill_(0.5)
    x = torch.randn(1, 16, 5, 6)
    with torch.no_grad():
        y = module(x)
    dims = {
        "B": torch.export.Dim("B", min=1, max=64),
        "H": torch.export.Dim("H", min=2, max=512),
        "W": torch.export.Dim("W", min=2, max=512),
    }
    program = torch.onnx.export(
        module,
        (x,),
        None,
        dynamo=True,
        input_names=["x"],
        output_names=["y"],
        dynamic_shapes={"x": {0: dims["B"], 2: dims["H"], 3: dims["W"]}},
    )
    path = os.path.join(args.out, "ccnet_mmcv_dynamo.onnx")
    program.save(path)
    _save(args.out, "ccnet_mmcv_dynamo", path, {"x": _numpy(x)}, [_numpy(y)], manifest, MMCV,
          exporter="dynamo")
    source.NEG_INF_DIAG = _eye_neg_inf_diag
    with torch.no_grad():
        y_eye = module(x)
    path = os.path.join(args.out, "ccnet_mmcv_eye_op13.onnx")
    axes = {0: "B", 2: "H", 3: "W"}
    _torchscript(module, (x,), path, ["x"], {"x": axes, "y": axes})
    _save(args.out, "ccnet_mmcv_eye_op13", path, {"x": _numpy(x)}, [_numpy(y_eye)], manifest,
          MMCV, exporter="torchscript",
          change="NEG_INF_DIAG written with torch.eye(n, dtype=torch.bool) (CCNet#115)")


def _hippynn_inputs(n_atoms: int = 5):
    """Atoms at random positions in a 2.5^3 box, every ordered pair closer than 4.0."""
    positions = torch.rand(n_atoms, 3) * 2.5
    features = torch.randn(n_atoms, 4)
    pairs = [
        (i, j)
        for i in range(n_atoms)
        for j in range(n_atoms)
        if i != j and float((positions[j] - positions[i]).norm()) < 4.0
    ]
    first = torch.tensor([i for i, _ in pairs], dtype=torch.int64)
    second = torch.tensor([j for _, j in pairs], dtype=torch.int64)
    coord_pairs = positions[second] - positions[first]
    return features, first, second, coord_pairs.norm(dim=1), coord_pairs


def export_hippynn(args, manifest) -> None:
    """hippynn's InteractLayerQuad: ``torch.diagonal(rhatsquad, dim1=1, dim2=2)`` of a
    [n_pairs, 3, 3] tensor. dynamo exporter, dynamic n_atoms and n_pairs; the pair indices
    must be real (GatherND), so random feeds do not run it."""
    os.environ.setdefault("HIPPYNN_USE_CUSTOM_KERNELS", "False")
    from hippynn import custom_kernels, settings
    from hippynn.layers.hiplayers.interactions import InteractLayerQuad
    from hippynn.layers.hiplayers.sensitivity import GaussianSensitivityModule

    settings.WARN_LOW_DISTANCES = False  # its warning is data-dependent Python control flow
    custom_kernels.set_custom_kernels("pytorch")
    _seeded()
    module = InteractLayerQuad(
        nf_in=4,
        nf_out=4,
        n_dist=3,
        mind_soft=0.8,
        maxd_soft=3.0,
        hard_cutoff=4.0,
        sensitivity_module=GaussianSensitivityModule,
        cusp_reg=1e-6,
    ).eval()
    inputs = _hippynn_inputs()
    names = ["in_features", "pair_first", "pair_second", "dist_pairs", "coord_pairs"]
    with torch.no_grad():
        y = module(*inputs)
    atoms = torch.export.Dim("n_atoms", min=2, max=100000)
    pairs = torch.export.Dim("n_pairs", min=2, max=10000000)
    dynamic = {"in_features": {0: atoms}, **{n: {0: pairs} for n in names[1:]}}
    program = torch.onnx.export(
        module,
        inputs,
        None,
        dynamo=True,
        input_names=names,
        output_names=["features_out"],
        dynamic_shapes=dynamic,
    )
    path = os.path.join(args.out, "hippynn_quad_dynamo.onnx")
    program.save(path)
    feeds = {n: _numpy(t) for n, t in zip(names, inputs, strict=True)}
    _save(args.out, "hippynn_quad_dynamo", path, feeds, [_numpy(y)], manifest, HIPPYNN,
          exporter="dynamo")


class _Dilation(torch.nn.Module):
    """kornia.morphology.dilation(x, kernel, engine="convolution"), 3x3 kernel buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("kernel", torch.ones(3, 3))

    def forward(self, x):
        import kornia

        return kornia.morphology.dilation(x, self.kernel, engine="convolution")


def export_kornia(args, manifest) -> None:
    """kornia's dilation: ``torch.eye(h * w)`` of the kernel's size; TorchScript, opset 13,
    dynamic B, C, H, W (the EyeLike is static: it folds)."""
    _seeded()
    x = torch.rand(1, 2, 7, 8)
    module = _Dilation().eval()
    with torch.no_grad():
        y = module(x)
    path = os.path.join(args.out, "kornia_dilation_op13.onnx")
    axes = {0: "B", 1: "C", 2: "H", 3: "W"}
    _torchscript(module, (x,), path, ["x"], {"x": axes, "y": axes})
    _save(args.out, "kornia_dilation_op13", path, {"x": _numpy(x)}, [_numpy(y)], manifest,
          KORNIA, exporter="torchscript")


class _DiagonalOfProduct(torch.nn.Module):
    def forward(self, a, b):
        return torch.diagonal(a @ b, dim1=-2, dim2=-1)


def export_diagonal(args, manifest) -> None:
    """``torch.diagonal(a @ b)`` (float32), TorchScript at opset 13: aten::diagonal's
    symbolic (Mul by an EyeLike mask, ReduceSum) on a MatMul output that carries no shape;
    a static and a dynamic-batch variant."""
    _seeded()
    a, b = torch.randn(2, 4, 3), torch.randn(2, 3, 4)
    module = _DiagonalOfProduct().eval()
    with torch.no_grad():
        y = module(a, b)
    for name, axes in (
        ("diag_matmul_op13", None),
        ("diag_matmul_op13_dyn", {"a": {0: "B"}, "b": {0: "B"}, "y": {0: "B"}}),
    ):
        path = os.path.join(args.out, f"{name}.onnx")
        _torchscript(module, (a, b), path, ["a", "b"], axes or None)
        source = {
            "repo": "(none: a two-line module)",
            "path": "sample_models/real/export_real.py (_DiagonalOfProduct)",
            "commit": None,
        }
        _save(args.out, name, path, {"a": _numpy(a), "b": _numpy(b)}, [_numpy(y)], manifest,
              source, exporter="torchscript")


class _TimesEye(torch.nn.Module):
    def forward(self, x):
        return x @ torch.eye(x.shape[-1])


def export_eye_matmul(args, manifest) -> None:
    """``x @ torch.eye(x.shape[-1])`` (float32), dynamo at opset 20 with a dynamic size:
    torchlib has no ``aten::eye``, so torch's decomposition gives
    ``Cast(Equal(Unsqueeze(Range(0, n, 1), [1]), Range(0, n, 1)))``, not EyeLike."""
    _seeded()
    x = torch.randn(3, 4)
    module = _TimesEye().eval()
    with torch.no_grad():
        y = module(x)
    dims = {"B": torch.export.Dim("B", min=1, max=64), "D": torch.export.Dim("D", min=2)}
    program = torch.onnx.export(
        module,
        (x,),
        None,
        dynamo=True,
        input_names=["x"],
        output_names=["y"],
        dynamic_shapes={"x": {0: dims["B"], 1: dims["D"]}},
    )
    name = "eye_matmul_dynamo"
    path = os.path.join(args.out, f"{name}.onnx")
    program.save(path)
    source = {
        "repo": "(none: a two-line module)",
        "path": "sample_models/real/export_real.py (_TimesEye)",
        "commit": None,
    }
    _save(args.out, name, path, {"x": _numpy(x)}, [_numpy(y)], manifest, source,
          exporter="dynamo")


def export_fp16(args, manifest, bases) -> None:
    """Both float16 converters on top (``keep_io_types=True``): onnxruntime's
    (``onnxruntime.transformers.float16``), which writes unsorted graphs, and
    onnxconverter-common's. They share their base model's feeds and torch outputs."""
    import shutil

    import onnxconverter_common
    import onnxruntime
    from onnxconverter_common import float16 as common_float16
    from onnxruntime.transformers import float16 as ort_float16

    converters = {
        "ortf16": (
            ort_float16.convert_float_to_float16,
            f"onnxruntime {onnxruntime.__version__}",
        ),
        "occf16": (
            common_float16.convert_float_to_float16,
            f"onnxconverter-common {onnxconverter_common.__version__}",
        ),
    }
    for base in bases:
        for tag, (convert, version) in converters.items():
            name = f"{base}_{tag}"
            converted = convert(onnx.load(os.path.join(args.out, f"{base}.onnx")),
                                keep_io_types=True)
            onnx.save(converted, os.path.join(args.out, f"{name}.onnx"))
            for kind in ("inputs", "torch"):
                shutil.copy(os.path.join(args.out, f"{base}.{kind}.npz"),
                            os.path.join(args.out, f"{name}.{kind}.npz"))
            manifest[name] = {
                **manifest[base],
                "converter": f"{version} convert_float_to_float16(keep_io_types=True)",
                "base": base,
            }
            print(f"wrote {name}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clearvoice-src", required=True, help="checkout with clearvoice/")
    parser.add_argument("--mmcv-src", required=True, help="checkout with mmcv/ops/")
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    manifest: dict[str, dict] = {}
    export_mossformer(args, manifest)
    export_ccnet(args, manifest)
    export_hippynn(args, manifest)
    export_kornia(args, manifest)
    export_diagonal(args, manifest)
    export_eye_matmul(args, manifest)
    bases = ["mossformer_op13", "ccnet_mmcv_dynamo", "kornia_dilation_op13"]
    export_fp16(args, manifest, bases)
    import onnxruntime

    manifest["versions"] = {
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "python": sys.version.split()[0],
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as file:
        json.dump(manifest, file, indent=1, sort_keys=True)
        file.write("\n")


if __name__ == "__main__":
    main()
