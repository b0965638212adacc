"""Export the EyeLike-making functions of torch_geometric, roma and kornia, with outputs.

Not run by CI: it needs torch and the libraries below (PyPI releases, not copied here:
torch_geometric 2.8.1, roma 1.8.0, kornia 0.9.0; tried with torch 2.13.0+cpu, onnx 1.23,
onnxscript for the dynamo exporter). Each library function is called by a few-line wrapper
module with the sizes chosen below, and exported by TorchScript (opsets 9 to 17, wherever
the function exports) and by dynamo (opset 20). For each model it writes, into ``--out``:

- ``<name>.onnx``;
- ``<name>.inputs.npz``: one array per graph input name;
- ``<name>.torch.npz``: torch's outputs for those inputs, one array per graph output name;
- its entry in ``manifest.json`` (merged into the file: the other entries are kept), with
  the file and line cited and, per EyeLike node, its class (static, pinnable, dynamic)
  decided from the library's source, not from any optimizer's output.

The EyeLike node names are the exporter's; the script checks that the export has exactly
the nodes classified below, so a new torch that names or splits them differently stops it.

    python export_corpus_torch_a.py --out sample_models/real
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import warnings
from collections.abc import Callable

import numpy as np
import onnx
import torch

SEED = 0
TOLERANCE = 1e-5
# Where tract 0.23 does not run the original export (recorded, not eyefold's doing).
TRACT_FILL = {
    "tract": "ConstantOfShape without value (dynamo's diagonal mask): "
    "Impossible to unify F32 with F64",
}
TRACT_CUMSUM = {
    "tract": "CumSum of TorchScript's aten::diagonal (symbolic_opset13.py): "
    "Impossible to unify 1 with 0",
}
TRACT_OR = {
    "tract": "Or of a Cast output (safe_inverse_with_mask): No super type for F64 and Bool"
}
TRACT_RESHAPE = {
    "tract": "the attention-pooling head's Reshape: Incompatible reshape for shape [1, 1, 16] "
    "and Reshape(1, [B,16], [2*B,8])"
}


@dataclasses.dataclass
class Source:
    """Where the EyeLike-making call is, in the library's PyPI release."""

    library: str
    version: str
    repo: str
    path: str
    line: int
    function: str
    call: str

    def entry(self) -> dict:
        return {
            "library": self.library,
            "version": self.version,
            "repo": self.repo,
            "commit": f"PyPI release {self.library}=={self.version}",
            "path": self.path,
            "line": self.line,
            "function": self.function,
            "call": self.call,
        }


@dataclasses.dataclass
class Case:
    """One module to export: inputs, names, dims left symbolic, and its EyeLike classes."""

    name: str
    source: Source
    module: torch.nn.Module
    inputs: dict[str, torch.Tensor]
    outputs: list[str]
    # input name -> {dim index: symbol}; TorchScript's dynamic_axes, dynamo's Dims.
    dynamic: dict[str, dict[int, str]]
    exporter: str
    opset: int
    eyelike: dict[str, dict]
    identities: int = 0
    # runtime -> its error, where the original itself does not run.
    original_fails: dict[str, str] = dataclasses.field(default_factory=dict)
    # "<variant>/<runtime>" -> why eyefold's output fails there (tests/corpus xfails it).
    known_gap: dict[str, str] = dataclasses.field(default_factory=dict)


class _Call(torch.nn.Module):
    """Calls a library function with the graph inputs as positional arguments."""

    def __init__(self, function: Callable, **fixed: object) -> None:
        super().__init__()
        self.function = function
        self.fixed = fixed

    def forward(self, *inputs):
        return self.function(*inputs, **self.fixed)


class _Submodule(torch.nn.Module):
    """Calls a library module: the wrapper keeps the export's node names flat."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *inputs):
        return self.inner(*inputs)


# --- roma 1.8.0 ---------------------------------------------------------------------------

ROMA_QUAT = Source(
    "roma",
    "1.8.0",
    "naver/roma",
    "roma/mappings.py",
    934,
    "rotmat_to_unitquat",
    "x.diagonal(dim1=-2, dim2=-1) of x = torch.stack([...16 entries], dim=-1)"
    ".unflatten(-1, (4, 4)) (line 932)",
)
ROMA_ORTHO = Source(
    "roma",
    "1.8.0",
    "naver/roma",
    "roma/utils.py",
    30,
    "is_orthonormal_matrix",
    "torch.eye(D, ...) with B, D, D1 = R.shape (line 28)",
)

ROMA_RIGID = Source(
    "roma",
    "1.8.0",
    "naver/roma",
    "roma/transforms.py",
    411,
    "Rigid(None, translation) (Isometry.__init__)",
    "torch.eye(D, ...)[None].expand(batch_dims + (-1, -1)) with D = translation.shape[-1] "
    "(line 407)",
)


def _rigid_apply(translation: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    import roma

    return roma.Rigid(None, translation).apply(points)


def _rigid_to_homogeneous(translation: torch.Tensor) -> torch.Tensor:
    import roma

    return roma.Rigid(None, translation).to_homogeneous()


def _rotations(batch: int) -> torch.Tensor:
    """Random rotations, float32 (roma.random_rotmat draws from torch's generator)."""
    import roma

    return roma.random_rotmat(batch)


def roma_cases() -> list[Case]:
    import roma

    torch.manual_seed(SEED)
    rotations = _rotations(4)
    quat_static = {
        "class": "static",
        "why": "4x4: the literal (4, 4) of unflatten at line 932; the diagonal's mask is "
        "the size of the last two dims, 4 and 4, whatever R's dims",
        "from_inputs": [],
    }
    cases = [
        Case(
            f"roma_rotmat_to_unitquat_ts{opset}",
            ROMA_QUAT,
            _Call(roma.rotmat_to_unitquat),
            {"R": rotations},
            ["q"],
            {"R": {0: "B"}},
            "torchscript",
            opset,
            {"/EyeLike": quat_static},
            original_fails=TRACT_CUMSUM,
        )
        for opset in (13, 17)
    ]
    cases.append(
        Case(
            "roma_rotmat_to_unitquat_dynamo20",
            ROMA_QUAT,
            _Call(roma.rotmat_to_unitquat),
            {"R": rotations},
            ["q"],
            {"R": {0: "B"}},
            "dynamo",
            20,
            {"node_EyeLike_99": quat_static},
            original_fails=TRACT_FILL,
        )
    )
    # Orthonormal up to 1e-5 (float32): one matrix is not, so the output is False.
    matrices = rotations.clone()
    matrices[2, 0, 0] += 0.1
    ortho_why = (
        "D = R.shape[-1] (line 28, R of [B, D, D] after flatten_batch_dims); B does not matter"
    )
    cases.extend(
        Case(
            f"roma_is_orthonormal_matrix_ts{opset}",
            ROMA_ORTHO,
            _Call(roma.is_orthonormal_matrix, epsilon=1e-5),
            {"R": matrices},
            ["ok"],
            {"R": {0: "B", 1: "D", 2: "D"}},
            "torchscript",
            opset,
            {"/EyeLike": {"class": "pinnable", "why": ortho_why, "pins": ["R:4,3,3"]}},
        )
        for opset in (9, 11)
    )
    cases.append(
        Case(
            "roma_is_orthonormal_matrix_dynamo20",
            ROMA_ORTHO,
            _Call(roma.is_orthonormal_matrix, epsilon=1e-5),
            {"R": matrices},
            ["ok"],
            {"R": {0: "B", 1: "D", 2: "D"}},
            "dynamo",
            20,
            {},
            identities=1,
        )
    )
    # A translation-only rigid transform: its linear part is the identity of t's size.
    translation, points = torch.randn(2, 3), torch.randn(2, 3)
    rigid = {
        "class": "pinnable",
        "why": "D = translation.shape[-1] (line 407): t's dim 1",
        "pins": ["t:2,3"],
    }
    rigid_dims = {"t": {0: "B", 1: "D"}, "v": {0: "B", 1: "D"}}
    cases.append(
        Case(
            "roma_rigid_apply_ts13",
            ROMA_RIGID,
            _Call(_rigid_apply),
            {"t": translation, "v": points},
            ["y"],
            rigid_dims,
            "torchscript",
            13,
            {"/EyeLike": rigid},
        )
    )
    cases.append(
        Case(
            "roma_rigid_apply_dynamo20",
            ROMA_RIGID,
            _Call(_rigid_apply),
            {"t": translation, "v": points},
            ["y"],
            rigid_dims,
            "dynamo",
            20,
            {},
            identities=1,
        )
    )
    cases.append(
        Case(
            "roma_rigid_to_homogeneous_ts9",
            ROMA_RIGID,
            _Call(_rigid_to_homogeneous),
            {"t": translation},
            ["y"],
            {"t": {0: "B", 1: "D"}},
            "torchscript",
            9,
            {"/EyeLike": rigid},
        )
    )
    return cases


# --- torch_geometric 2.8.1 ----------------------------------------------------------------

PYG_MINCUT = Source(
    "torch_geometric",
    "2.8.1",
    "pyg-team/pytorch_geometric",
    "torch_geometric/nn/dense/mincut_pool.py",
    91,
    "dense_mincut_pool",
    "torch.eye(k) with k = s.size(-1) (line 69); and _rank3_diag's torch.eye(x.size(1)) "
    "of d_flat = einsum('ijk->ij', adj) (lines 82, 114)",
)
PYG_DMON = Source(
    "torch_geometric",
    "2.8.1",
    "pyg-team/pytorch_geometric",
    "torch_geometric/nn/dense/dmon_pool.py",
    141,
    "DMoNPooling.forward",
    "torch.eye(C) with C = s.size(-1), s = softmax(self.mlp(x)) (lines 107, 111)",
)


def _graphs(batch: int, nodes: int, features: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Node features and a symmetric weighted adjacency with no isolated node."""
    x = torch.randn(batch, nodes, features)
    adj = torch.rand(batch, nodes, nodes)
    return x, (adj + adj.transpose(1, 2)) / 2


def torch_geometric_cases() -> list[Case]:
    from torch_geometric.nn.dense import DMoNPooling, dense_mincut_pool

    torch.manual_seed(SEED)
    x, adj = _graphs(2, 6, 5)
    s = torch.randn(2, 6, 3)
    mincut_eyelike = {
        "/EyeLike": {
            "class": "pinnable",
            "why": "_rank3_diag: torch.eye(x.size(1)) of d_flat [B, N] (line 114), "
            "N = adj.shape[1]",
            "pins": ["adj:2,6,6"],
        },
        "/EyeLike_1": {
            "class": "pinnable",
            "why": "i_s = torch.eye(k) (line 91), k = s.size(-1) (line 69): s's dim 2",
            "pins": ["s:2,6,3"],
        },
    }
    dynamic = {
        "x": {0: "B", 1: "N"},
        "adj": {0: "B", 1: "N", 2: "N"},
        "s": {0: "B", 1: "N", 2: "K"},
    }
    outputs = ["out", "out_adj", "mincut_loss", "ortho_loss"]
    feeds = {"x": x, "adj": adj, "s": s}
    cases = [
        Case(
            f"torch_geometric_dense_mincut_pool_ts{opset}",
            PYG_MINCUT,
            _Call(dense_mincut_pool),
            feeds,
            outputs,
            dynamic,
            "torchscript",
            opset,
            mincut_eyelike,
        )
        for opset in (13, 17)
    ]
    cases.append(
        Case(
            "torch_geometric_dense_mincut_pool_dynamo20",
            PYG_MINCUT,
            _Call(dense_mincut_pool),
            feeds,
            outputs,
            dynamic,
            "dynamo",
            20,
            {},
            identities=2,
        )
    )
    torch.manual_seed(SEED)
    dmon = DMoNPooling([5, 8], 3).eval()
    dmon_outputs = ["s", "out", "out_adj", "spectral_loss", "ortho_loss", "cluster_loss"]
    dmon_why = (
        "C = s.size(-1) (line 111): the 3 clusters of the MLP's last Linear, a weight's dim"
    )
    cases.extend(
        Case(
            f"torch_geometric_dmon_pooling_ts{opset}",
            PYG_DMON,
            _Submodule(dmon),
            {"x": x, "adj": adj},
            dmon_outputs,
            {"x": {0: "B", 1: "N"}, "adj": {0: "B", 1: "N", 2: "N"}},
            "torchscript",
            opset,
            {
                "/inner/EyeLike": {
                    "class": "static",
                    "why": dmon_why,
                    "from_inputs": [],
                }
            },
        )
        for opset in (13, 17)
    )
    return cases


# --- kornia 0.9.0 -------------------------------------------------------------------------

KORNIA_IOU = Source(
    "kornia",
    "0.9.0",
    "kornia/kornia",
    "kornia/metrics/mean_iou.py",
    69,
    "mean_iou",
    "torch.diagonal(conf_mat, dim1=-2, dim2=-1) of confusion_matrix's "
    "view(batch_size, num_classes, num_classes) (confusion_matrix.py line 122)",
)
KORNIA_TRANSFER = Source(
    "kornia",
    "0.9.0",
    "kornia/kornia",
    "kornia/core/utils.py",
    660,
    "geometry.homography.symmetric_transfer_error -> core.utils.safe_inverse_with_mask",
    "torch.eye(A_cast.shape[-1]) in safe_inverse_with_mask, called twice on H "
    "(homography.py lines 173, 176)",
)


KORNIA_SIGLIP2 = Source(
    "kornia",
    "0.9.0",
    "kornia/kornia",
    "kornia/models/siglip2/model.py",
    260,
    "SigLip2Model.forward(return_loss=True)",
    "torch.eye(logits_per_text.shape[0]) of logits_per_text = text_embeds @ image_embeds.t() "
    "(line 249)",
)


class _SigLip2Loss(torch.nn.Module):
    """A SigLip2Model small enough to commit, returning its pairwise sigmoid loss."""

    def __init__(self) -> None:
        super().__init__()
        from kornia.models.siglip2.config import (
            SigLip2Config,
            SigLip2TextConfig,
            SigLip2VisionConfig,
        )
        from kornia.models.siglip2.model import SigLip2Model

        vision = SigLip2VisionConfig(
            image_size=16,
            patch_size=8,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
        text = SigLip2TextConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=8,
        )
        config = SigLip2Config(vision_config=vision, text_config=text, projection_dim=16)
        self.inner = SigLip2Model(config)

    def forward(self, pixel_values, input_ids):
        result = self.inner(pixel_values=pixel_values, input_ids=input_ids, return_loss=True)
        return result.loss, result.logits_per_text


def _mean_iou_4(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    from kornia.metrics import mean_iou

    return mean_iou(pred, target, num_classes=4)


def kornia_cases() -> list[Case]:
    from kornia.geometry.homography import symmetric_transfer_error

    torch.manual_seed(SEED)
    pred = torch.randint(0, 4, (2, 5, 6))
    target = torch.randint(0, 4, (2, 5, 6))
    iou_why = (
        "4x4: num_classes=4, a Python int the caller passes (confusion_matrix.py line 122)"
    )
    iou_dynamic = {"pred": {0: "B", 1: "H", 2: "W"}, "target": {0: "B", 1: "H", 2: "W"}}
    cases = [
        Case(
            "kornia_mean_iou_ts16",
            KORNIA_IOU,
            _Call(_mean_iou_4),
            {"pred": pred, "target": target},
            ["iou"],
            iou_dynamic,
            "torchscript",
            16,
            {"/EyeLike": {"class": "static", "why": iou_why, "from_inputs": []}},
            original_fails=TRACT_CUMSUM,
        ),
        Case(
            "kornia_mean_iou_dynamo20",
            KORNIA_IOU,
            _Call(_mean_iou_4),
            {"pred": pred, "target": target},
            ["iou"],
            iou_dynamic,
            "dynamo",
            20,
            {"node_EyeLike_31": {"class": "static", "why": iou_why, "from_inputs": []}},
            original_fails=TRACT_FILL,
        ),
    ]
    points1 = torch.rand(2, 7, 2)
    points2 = torch.rand(2, 7, 2)
    homographies = torch.eye(3).repeat(2, 1, 1) + 0.1 * torch.randn(2, 3, 3)
    feeds = {"pts1": points1, "pts2": points2, "H": homographies}
    point_dims = {0: "B", 1: "P"}
    # The first call's A is H; the second's is H_safe = torch.where(good_H, H,
    # torch.eye(3).expand_as(H)) (homography.py lines 174-176), 3x3 whatever H's declared
    # dims: expand_as keeps the eye's 3 (torch requires H's to be 3; ONNX broadcasts 1).
    first_why = "n = A_cast.shape[-1] (line 660) of A = H (homography.py line 173): H's dim 2"
    second = {
        "class": "static",
        "why": "n = A_cast.shape[-1] (line 660) of A = H_safe, the where() of H and "
        "torch.eye(3).expand_as(H) (homography.py lines 174-176): the eye's 3",
        "from_inputs": [],
    }
    cases.append(
        Case(
            "kornia_symmetric_transfer_error_ts11",
            KORNIA_TRANSFER,
            _Call(symmetric_transfer_error),
            feeds,
            ["err"],
            {"pts1": point_dims, "pts2": point_dims, "H": {0: "B", 1: "M", 2: "M"}},
            "torchscript",
            11,
            {
                "/EyeLike": {"class": "pinnable", "why": first_why, "pins": ["H:2,3,3"]},
                "/EyeLike_1": second,
            },
            original_fails=TRACT_OR,
        )
    )
    cases.append(
        Case(
            "kornia_symmetric_transfer_error_ts17",
            KORNIA_TRANSFER,
            _Call(symmetric_transfer_error),
            feeds,
            ["err"],
            {"pts1": point_dims, "pts2": point_dims, "H": {0: "B"}},
            "torchscript",
            17,
            {
                "/EyeLike": {
                    "class": "static",
                    "why": f"{first_why}, declared 3",
                    "from_inputs": ["H"],
                },
                "/EyeLike_1": second,
            },
            original_fails=TRACT_OR,
        )
    )
    torch.manual_seed(SEED)
    siglip = _SigLip2Loss().eval()
    images = torch.randn(2, 3, 16, 16)
    tokens = torch.randint(0, 50, (2, 5))
    cases.append(
        Case(
            "kornia_siglip2_loss_ts17",
            KORNIA_SIGLIP2,
            siglip,
            {"pixel_values": images, "input_ids": tokens},
            ["loss", "logits_per_text"],
            {"pixel_values": {0: "B"}, "input_ids": {0: "B", 1: "L"}},
            "torchscript",
            17,
            {
                "/inner/EyeLike": {
                    "class": "pinnable",
                    "why": "logits_per_text.shape[0] (line 260): the texts, input_ids' dim 0",
                    "pins": ["input_ids:2,5"],
                }
            },
            original_fails=TRACT_RESHAPE,
        )
    )
    return cases


# --- export ---------------------------------------------------------------------------------


def _export(case: Case, path: str) -> None:
    names = list(case.inputs)
    args = tuple(case.inputs.values())
    if case.exporter == "torchscript":
        torch.onnx.export(
            case.module,
            args,
            path,
            dynamo=False,
            opset_version=case.opset,
            input_names=names,
            output_names=case.outputs,
            dynamic_axes=case.dynamic,
        )
        return
    dims: dict[str, torch.export.Dim] = {}
    shapes = []
    for name in names:
        shape = {}
        for index, symbol in case.dynamic.get(name, {}).items():
            dims.setdefault(symbol, torch.export.Dim(symbol, min=2, max=1024))
            shape[index] = dims[symbol]
        shapes.append(shape)
    program = torch.onnx.export(
        case.module,
        args,
        None,
        dynamo=True,
        opset_version=case.opset,
        input_names=names,
        output_names=case.outputs,
        dynamic_shapes=(tuple(shapes),),
    )
    program.save(path)


def _eyelike_names(model: onnx.ModelProto) -> list[str]:
    return [node.name for node in model.graph.node if node.op_type == "EyeLike"]


def write_case(case: Case, out: str, manifest: dict) -> None:
    """Exports ``case``, checks its EyeLike nodes against the classes, writes the files."""
    case.module.eval()
    with torch.no_grad():
        results = case.module(*case.inputs.values())
    results = results if isinstance(results, tuple) else (results,)
    path = os.path.join(out, f"{case.name}.onnx")
    _export(case, path)
    model = onnx.load(path)
    found = sorted(_eyelike_names(model))
    if found != sorted(case.eyelike):
        sys.exit(f"{case.name}: EyeLike nodes {found}, classified {sorted(case.eyelike)}")
    inputs = [value.name for value in model.graph.input]
    if inputs != list(case.inputs):
        sys.exit(f"{case.name}: graph inputs {inputs}, fed {list(case.inputs)}")
    outputs = [value.name for value in model.graph.output]
    np.savez(
        os.path.join(out, f"{case.name}.inputs.npz"),
        **{name: tensor.numpy() for name, tensor in case.inputs.items()},
    )
    np.savez(
        os.path.join(out, f"{case.name}.torch.npz"),
        **{name: np.asarray(r.numpy()) for name, r in zip(outputs, results, strict=True)},
    )
    entry = {
        **case.source.entry(),
        "exporter": case.exporter,
        "opset": case.opset,
        "reference": f"{case.name}.torch.npz",
        "tolerance": TOLERANCE,
        "eyelike": case.eyelike,
        "identities": case.identities,
    }
    if case.original_fails:
        entry["original_fails"] = case.original_fails
    if case.known_gap:
        entry["known_gap"] = case.known_gap
    manifest[case.name] = entry
    print(f"wrote {case.name}: {os.path.getsize(path)} bytes, EyeLike {found}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--only", nargs="*", help="export only these model names")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    manifest_path = os.path.join(args.out, "manifest.json")
    with open(manifest_path) as file:
        manifest = json.load(file)
    for case in [*roma_cases(), *torch_geometric_cases(), *kornia_cases()]:
        if not args.only or case.name in args.only:
            write_case(case, args.out, manifest)
    with open(manifest_path, "w") as file:
        json.dump(manifest, file, indent=1, sort_keys=True)
        file.write("\n")


if __name__ == "__main__":
    main()
