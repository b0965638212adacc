"""Export the torch corpus, stream B: torchaudio, timm, transformers, asteroid, ClearerVoice.

Not run by CI: it needs torch and the libraries below. Each model is a library's own
module whose code calls ``torch.eye`` or ``torch.diagonal`` with a size read from a
tensor, exported as a user would. For each it writes

- ``<name>.onnx``: the export;
- ``<name>.inputs.npz``: one array per graph input name (what ``--check-inputs`` takes);
- ``<name>.torch.npz``: torch's outputs for those inputs, one array per graph output name;
- its entry in ``manifest.json`` (the other entries are kept): the file, release or commit
  and line cited, the exporter and opset, and for each EyeLike node of the export whether
  its shape is static, pinnable or dynamic, as the source decides it (see ``CLASSES``).

No library source is copied here. torchaudio's ``_hdemucs.py`` and asteroid's
``beamforming.py`` import only torch and are loaded from their files: the PyPI torchaudio
wheel's compiled extension needs a CUDA build of torch (``libc10_cuda.so``), and
``import asteroid`` imports soundfile and the whole toolkit. ClearerVoice-Studio is imported
from a ``git archive`` of the commit below. Tested with torch 2.13.0+cpu, onnx 1.23.2,
onnxscript 0.7.2, torchaudio 2.11.0, timm 1.0.31, transformers 5.23.0, asteroid 0.7.0,
rotary-embedding-torch 0.8.3, einops 0.8.2:

    pip download --no-deps torchaudio==2.11.0 && unzip torchaudio-2.11.0-*.whl -d ta
    git -C ClearerVoice-Studio archive 6b3774dc79c46ae8bed2a4fa5f706f0ac8c75c61 | tar -x -C cv
    python export_corpus_torch_b.py --torchaudio-src ta --clearvoice-src cv
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import types

import numpy as np
import onnx
import torch

SEED = 0
# Why a runtime does not run an export itself, one line each (see Corpus.save).
ORT_BOOL_EYELIKE = "no EyeLike kernel with a BOOL output (NOT_IMPLEMENTED)"
TRACT_BOOL_EYELIKE = "EyeLike with a BOOL output: Bool is not a number"
TRACT_CUMSUM = (
    "CumSum of TorchScript's aten::diagonal (symbolic_opset13.py): "
    "Impossible to unify 1 with 0"
)
TRACT_IMPLICIT_FILL = (
    "ConstantOfShape without value (dynamo's diagonal mask): Impossible to unify F32 with F64"
)
# (library, version, repository, commit or release, file in it)
TORCHAUDIO = (
    "torchaudio",
    "2.11.0",
    "pytorch/audio",
    "PyPI release torchaudio==2.11.0",
    "torchaudio/models/_hdemucs.py",
)
TIMM = (
    "timm",
    "1.0.31",
    "huggingface/pytorch-image-models",
    "PyPI release timm==1.0.31",
    "timm/layers/non_local_attn.py",
)
TRANSFORMERS = (
    "transformers",
    "5.23.0",
    "huggingface/transformers",
    "PyPI release transformers==5.23.0",
    "transformers/models/bros/modeling_bros.py",
)
TRANSFORMERS_NYSTROMFORMER = (
    *TRANSFORMERS[:4],
    "transformers/models/nystromformer/modeling_nystromformer.py",
)
ASTEROID = (
    "asteroid",
    "0.7.0",
    "asteroid-team/asteroid",
    "PyPI release asteroid==0.7.0",
    "asteroid/dsp/beamforming.py",
)
CLEARVOICE = (
    "ClearerVoice-Studio",
    "6b3774dc79c46ae8bed2a4fa5f706f0ac8c75c61",
    "modelscope/ClearerVoice-Studio",
    "6b3774dc79c46ae8bed2a4fa5f706f0ac8c75c61",
    "clearvoice/clearvoice/models/mossformer_gan_se/mossformer.py",
)


def _seeded() -> None:
    torch.manual_seed(SEED)


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


def _load_file(name: str, path: str) -> types.ModuleType:
    """One source file of a library, as a module (its package's __init__ is not run)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _installed_file(package: str, *parts: str) -> str:
    """Where an installed package's file is, without importing the package."""
    return os.path.join(
        importlib.util.find_spec(package).submodule_search_locations[0], *parts
    )


def _torchscript(module, inputs, path, names, outputs, opset, axes=None) -> None:
    torch.onnx.export(
        module,
        inputs,
        path,
        dynamo=False,
        opset_version=opset,
        input_names=names,
        output_names=outputs,
        dynamic_axes=axes,
    )


def _dynamo(module, inputs, path, names, outputs, shapes) -> None:
    program = torch.onnx.export(
        module,
        inputs,
        None,
        dynamo=True,
        input_names=names,
        output_names=outputs,
        dynamic_shapes=shapes,
    )
    program.save(path)


class Corpus:
    """Writes the exports and their manifest entries into one folder."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.entries: dict[str, dict] = {}

    def path(self, name: str) -> str:
        return os.path.join(self.out, f"{name}.onnx")

    def save(
        self,
        name,
        source,
        feeds,
        outputs,
        *,
        function,
        line,
        call,
        classes,
        tolerance,
        identities=0,
        original_fails=None,
        **notes,
    ) -> None:
        """Writes the feeds and torch's outputs beside the export, and its manifest entry.

        ``classes`` gives, in graph order, one (class, why[, inputs]) per EyeLike node of
        the export: decided from the source, and matched here to the node names. inputs
        are a pinnable node's pins, or the graph inputs whose declared static dims a
        static node's size reads (its ``from_inputs``).
        ``original_fails`` names the runtimes that do not run the export itself, and why
        (measured with onnxruntime 1.32.0, OpenVINO 2026.4.1 and tract 0.23.9).
        """
        model = onnx.load(self.path(name))
        inputs = [i.name for i in model.graph.input]
        assert sorted(feeds) == sorted(inputs), (sorted(feeds), inputs)
        np.savez(os.path.join(self.out, f"{name}.inputs.npz"), **feeds)
        names = [o.name for o in model.graph.output]
        outputs = dict(zip(names, map(_numpy, outputs), strict=True))
        np.savez(os.path.join(self.out, f"{name}.torch.npz"), **outputs)
        eyes = [n.name for n in model.graph.node if n.op_type == "EyeLike"]
        assert len(eyes) == len(classes), (name, eyes)
        eyelike = {}
        for node, (kind, why, *inputs) in zip(eyes, classes, strict=True):
            key = "pins" if kind == "pinnable" else "from_inputs"
            eyelike[node] = {"class": kind, "why": why, **({key: inputs[0]} if inputs else {})}
        library, version, repo, commit, path = source
        opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
        self.entries[name] = {
            "library": library,
            "version": version,
            "repo": repo,
            "commit": commit,
            "path": path,
            "line": line,
            "function": function,
            "call": call,
            "exporter": "dynamo"
            if name.rsplit("_", 1)[-1].startswith("dynamo")
            else "torchscript",
            "opset": opsets.get("ai.onnx"),
            "reference": f"{name}.torch.npz",
            "tolerance": tolerance,
            "eyelike": eyelike,
            "identities": identities,
            **({"original_fails": original_fails} if original_fails else {}),
            **notes,
        }
        print(f"wrote {name}: {os.path.getsize(self.path(name))} bytes", flush=True)

    def write_manifest(self) -> None:
        """Adds (or replaces) this stream's entries; every other entry is kept."""
        path = os.path.join(self.out, "manifest.json")
        with open(path) as file:
            manifest = json.load(file)
        manifest.update(self.entries)
        with open(path, "w") as file:
            json.dump(manifest, file, indent=1, sort_keys=True)
            file.write("\n")


def export_local_state(args, corpus: Corpus) -> None:
    """HDemucs's ``_LocalState``: ``torch.eye(T, dtype=torch.bool)`` with ``B, C, T =
    x.shape`` (line 832), the self-reference mask of its local attention.

    einsum needs opset 12. Three exports: TorchScript at opset 12 with dynamic B and T (the
    EyeLike is T x T: pinnable), at opset 17 with only B dynamic (T is a static dim the
    exporter writes: static), and dynamo with dynamic B and T, where torch.eye of a
    symbolic size is ``Range/Unsqueeze/Equal`` (a bool identity, no EyeLike).
    """
    path = os.path.join(os.path.abspath(args.torchaudio_src), *TORCHAUDIO[4].split("/"))
    hdemucs = _load_file("torchaudio_hdemucs", path)
    _seeded()
    module = hdemucs._LocalState(8, heads=2, ndecay=2).eval()
    x = torch.randn(1, 8, 10)
    with torch.no_grad():
        y = module(x)
    where = {
        "function": "_LocalState.forward",
        "line": 851,
        "call": "torch.eye(T, device=dots.device, dtype=torch.bool), B, C, T = x.shape",
    }
    why_t = "T = x.shape[2] (line 832): x dim 2 alone sizes the T x T mask"
    name = "torchaudio_localstate_ts12"
    axes = {"x": {0: "B", 2: "T"}, "y": {0: "B", 2: "T"}}
    _torchscript(module, (x,), corpus.path(name), ["x"], ["y"], 12, axes)
    bool_eye = {"onnxruntime": ORT_BOOL_EYELIKE, "tract": TRACT_BOOL_EYELIKE}
    corpus.save(
        name,
        TORCHAUDIO,
        {"x": _numpy(x)},
        [y],
        **where,
        tolerance=1e-5,
        classes=[("pinnable", why_t, ["x:1,8,10"])],
        original_fails=bool_eye,
    )
    name = "torchaudio_localstate_ts17"
    axes = {"x": {0: "B"}, "y": {0: "B"}}
    _torchscript(module, (x,), corpus.path(name), ["x"], ["y"], 17, axes)
    why_static = "T = x.shape[2] (line 832), a static 10 in the export: 10 x 10"
    corpus.save(
        name,
        TORCHAUDIO,
        {"x": _numpy(x)},
        [y],
        **where,
        tolerance=1e-5,
        classes=[("static", why_static, ["x"])],
        original_fails=bool_eye,
    )
    name = "torchaudio_localstate_dynamo20"
    dims = {0: torch.export.Dim("B", max=64), 2: torch.export.Dim("T", min=2, max=4096)}
    _dynamo(module, (x,), corpus.path(name), ["x"], ["y"], {"x": dims})
    corpus.save(
        name,
        TORCHAUDIO,
        {"x": _numpy(x)},
        [y],
        **where,
        tolerance=1e-5,
        classes=[],
        identities=1,
    )


def _timm_non_local_attn() -> types.ModuleType:
    """``timm.layers.non_local_attn``, imported without torchvision.

    The PyPI torchvision wheel does not load with a CPU build of torch (its extension needs
    ``libc10_cuda.so``), and ``import timm.layers`` imports torchvision's
    ``FrozenBatchNorm2d`` at module level; ``BatNonLocalAttn`` never uses it. A stand-in
    that refuses to be built takes its place while timm.layers is imported, and timm's own
    ``__init__`` (its models, data and PIL) is not run.
    """

    class FrozenBatchNorm2d(torch.nn.Module):
        def __init__(self, *args, **kwargs) -> None:
            raise RuntimeError("torchvision's FrozenBatchNorm2d is not available here")

    names = ("torchvision", "torchvision.ops", "torchvision.ops.misc")
    for name in names:
        sys.modules[name] = types.ModuleType(name)
    sys.modules["torchvision.ops.misc"].FrozenBatchNorm2d = FrozenBatchNorm2d
    timm = types.ModuleType("timm")
    timm.__path__ = [_installed_file("timm")]
    sys.modules["timm"] = timm
    try:
        return importlib.import_module("timm.layers.non_local_attn")
    finally:
        for name in names:  # the dynamo exporter looks torchvision up itself
            del sys.modules[name]


def export_bat(args, corpus: Corpus) -> None:
    """timm's ``BatNonLocalAttn``: ``BilinearAttnTransform.resize_mat`` multiplies by
    ``torch.eye(t, t)`` with ``t = H // block_size`` and ``W // block_size`` (lines 139-140).

    TorchScript only: its ``adaptive_max_pool2d`` needs static H and W ("input size not
    accessible"), so only B is dynamic; the two EyeLike nodes (3 x 3 from H = 6, 4 x 4 from
    W = 8, block_size 2) are static. dynamo writes both eyes as initializers. Opsets 9 and
    16 (Split, Squeeze and Slice change form between them).
    """
    bat = _timm_non_local_attn()
    _seeded()
    module = bat.BatNonLocalAttn(16, block_size=2, groups=2).eval()
    x = torch.randn(1, 16, 6, 8)
    with torch.no_grad():
        y = module(x)
    where = {
        "function": "BilinearAttnTransform.resize_mat",
        "line": 115,
        "call": "torch.eye(t, t, dtype=x.dtype) with t = H // block_size, "
        "W // block_size (lines 139-140)",
    }
    classes = [
        ("static", "t = H // block_size (line 139): x's static H = 6, 3 x 3", ["x"]),
        ("static", "t = W // block_size (line 140): x's static W = 8, 4 x 4", ["x"]),
    ]
    for opset in (9, 16):
        name = f"timm_batnonlocalattn_ts{opset}"
        axes = {"x": {0: "B"}, "y": {0: "B"}}
        _torchscript(module, (x,), corpus.path(name), ["x"], ["y"], opset, axes)
        corpus.save(
            name, TIMM, {"x": _numpy(x)}, [y], **where, tolerance=1e-5, classes=classes
        )


class _SpadeEE(torch.nn.Module):
    """BrosSpadeEEForTokenClassification with its tensors as positional inputs and its two
    logits as outputs (the exporters take tensors, not a ModelOutput)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, bbox, attention_mask):
        out = self.model(input_ids=input_ids, bbox=bbox, attention_mask=attention_mask)
        return out.initial_token_logits, out.subsequent_token_logits


def export_bros(args, corpus: Corpus) -> None:
    """transformers' ``BrosSpadeEEForTokenClassification``: ``torch.eye(max_seq_length,
    max_seq_length + 1, dtype=torch.bool)`` with ``batch_size, max_seq_length =
    inv_attention_mask.shape`` (line 811), a rectangular S x (S + 1) eye.

    A tiny config (hidden 64, one layer; dim_bbox_sinusoid_emb_1d = 64 // 4 // 8 must be
    even), random weights. TorchScript at opset 14 (einsum needs 12) with dynamic B and S:
    the EyeLike reads only attention_mask's dim 1, so pinning attention_mask alone folds
    it. dynamo, dynamic B and S: ``Range/Range/Equal`` (not square: no identity).
    """
    from transformers import BrosConfig, BrosSpadeEEForTokenClassification

    _seeded()
    config = BrosConfig(
        vocab_size=50,
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=3,
    )
    module = _SpadeEE(BrosSpadeEEForTokenClassification(config).eval()).eval()
    input_ids = torch.randint(0, 50, (2, 5))
    bbox = torch.rand(2, 5, 4)
    attention_mask = torch.ones(2, 5, dtype=torch.int64)
    attention_mask[1, 3:] = 0
    inputs = (input_ids, bbox, attention_mask)
    names = ["input_ids", "bbox", "attention_mask"]
    outputs = ["initial_token_logits", "subsequent_token_logits"]
    with torch.no_grad():
        expected = module(*inputs)
    feeds = {n: _numpy(t) for n, t in zip(names, inputs, strict=True)}
    where = {
        "function": "BrosSpadeEEForTokenClassification.forward",
        "line": 819,
        "call": "torch.eye(max_seq_length, max_seq_length + 1, dtype=torch.bool), "
        "max_seq_length = inv_attention_mask.shape[1]",
    }
    name = "transformers_brosspadeee_ts14"
    axes = {n: {0: "B", 1: "S"} for n in names}
    _torchscript(module, inputs, corpus.path(name), names, outputs, 14, axes)
    why = "S = attention_mask.shape[1] (line 811): its dim 1 alone sizes the S x (S + 1) mask"
    fails = {
        "onnxruntime": ORT_BOOL_EYELIKE,
        "tract": "the exporter's Flatten of [B, S, S, ...]: Can not compute a shape "
        "with square of symbols",
    }
    corpus.save(
        name,
        TRANSFORMERS,
        feeds,
        expected,
        **where,
        tolerance=1e-5,
        classes=[("pinnable", why, ["attention_mask:2,5"])],
        original_fails=fails,
    )
    name = "transformers_brosspadeee_dynamo20"
    dims = {0: torch.export.Dim("B", max=64), 1: torch.export.Dim("S", min=2, max=30)}
    _dynamo(module, inputs, corpus.path(name), names, outputs, dict.fromkeys(names, dims))
    # torch.eye(S, S + 1) is Range(S) unsqueezed == Range(S + 1): a Range/Equal pair,
    # though not an identity (it is not square).
    corpus.save(
        name, TRANSFORMERS, feeds, expected, **where, tolerance=1e-5, classes=[], identities=1
    )


class _FirstOutput(torch.nn.Module):
    """The context layer alone (the attention modules return a tuple)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, hidden_states):
        return self.inner(hidden_states)[0]


def export_nystromformer(args, corpus: Corpus) -> None:
    """transformers' ``NystromformerSelfAttention``: ``iterative_inv`` builds
    ``torch.eye(mat.size(-1))`` (line 141) of kernel_2, ``[B, heads, L, L]`` with L =
    num_landmarks, the Reshape's constant (lines 183-194) that gives q_ and k_landmarks.

    TorchScript at opsets 11 and 17 with dynamic B: the 4 x 4 eye is static (no input's
    dim sizes it: hidden_states' length is the config's segment_means_seq_len). dynamo
    writes it as an initializer.
    """
    from transformers import NystromformerConfig
    from transformers.models.nystromformer.modeling_nystromformer import (
        NystromformerSelfAttention,
    )

    _seeded()
    config = NystromformerConfig(
        hidden_size=32,
        num_attention_heads=2,
        num_landmarks=4,
        segment_means_seq_len=8,
        conv_kernel_size=3,
    )
    module = _FirstOutput(NystromformerSelfAttention(config).eval()).eval()
    hidden_states = torch.randn(2, 8, 32)
    with torch.no_grad():
        y = module(hidden_states)
    why = "L = num_landmarks = 4, a constant of the landmarks' reshape (lines 183-194)"
    for opset in (11, 17):
        name = f"transformers_nystromformer_ts{opset}"
        axes = {"hidden_states": {0: "B"}, "context": {0: "B"}}
        path = corpus.path(name)
        _torchscript(
            module, (hidden_states,), path, ["hidden_states"], ["context"], opset, axes
        )
        corpus.save(
            name,
            TRANSFORMERS_NYSTROMFORMER,
            {"hidden_states": _numpy(hidden_states)},
            [y],
            function="NystromformerSelfAttention.iterative_inv",
            line=141,
            call="torch.eye(mat.size(-1)) of kernel_2 [B, heads, L, L], L = num_landmarks",
            tolerance=1e-5,
            classes=[("static", why, [])],
        )


def _beamforming() -> types.ModuleType:
    return _load_file(
        "asteroid_beamforming", _installed_file("asteroid", "dsp", "beamforming.py")
    )


class _ConditionScm(torch.nn.Module):
    """asteroid's ``condition_scm`` of a real [B, F, M, M] spatial covariance matrix."""

    def __init__(self, beamforming: types.ModuleType) -> None:
        super().__init__()
        self.beamforming = beamforming

    def forward(self, scm):
        return self.beamforming.condition_scm(scm)


class _MaskedScm(torch.nn.Module):
    """``condition_scm(compute_scm(x, mask).permute(0, 3, 1, 2))``: the SCM of a real
    [B, M, F, T] STFT under a [B, 1, F, T] mask, in the [B, F, M, M] layout the beamformers
    condition it in (``GEVBeamformer``, ``stable_solve``)."""

    def __init__(self, beamforming: types.ModuleType) -> None:
        super().__init__()
        self.beamforming = beamforming

    def forward(self, x, mask):
        scm = self.beamforming.compute_scm(x, mask).permute(0, 3, 1, 2)
        return self.beamforming.condition_scm(scm)


def export_condition_scm(args, corpus: Corpus) -> None:
    """asteroid's ``condition_scm``: ``batch_trace`` is ``torch.diagonal(x).sum(-1)``
    (line 404), then ``torch.eye(x.shape[dim1])`` (line 398). Both are M x M, M the mics.

    TorchScript at opset 13 (aten::diagonal needs it) on the SCM itself, dynamic B, F, M;
    at opset 15 after ``compute_scm`` with dynamic B, M, F, T: both nodes depend on x's
    dim 1 alone, not on mask, B, F or T. dynamo (same dims): the diagonal is
    ``ConstantOfShape -> EyeLike``, torch.eye a float identity ``Range/Equal/Cast``.
    """
    beamforming = _beamforming()
    _seeded()
    scm = torch.randn(2, 5, 3, 3)
    x = torch.randn(2, 3, 5, 7)
    mask = torch.rand(2, 1, 5, 7)
    where = {
        "function": "condition_scm",
        "line": 398,
        "call": "torch.eye(x.shape[dim1]) and batch_trace's torch.diagonal(x, "
        "dim1=-2, dim2=-1) (line 404)",
    }
    module = _ConditionScm(beamforming).eval()
    with torch.no_grad():
        y = module(scm)
    name = "asteroid_condition_scm_ts13"
    axes = {"scm": {0: "B", 1: "F", 2: "M", 3: "M"}, "y": {0: "B", 1: "F", 2: "M", 3: "M"}}
    _torchscript(module, (scm,), corpus.path(name), ["scm"], ["y"], 13, axes)
    pins = ["scm:2,5,3,3"]
    fails = {"tract": TRACT_CUMSUM}
    corpus.save(
        name,
        ASTEROID,
        {"scm": _numpy(scm)},
        [y],
        **where,
        tolerance=1e-5,
        original_fails=fails,
        classes=[
            ("pinnable", "torch.diagonal's mask is scm's last two dims (line 404)", pins),
            ("pinnable", "torch.eye(x.shape[-2]) (line 398): scm's dim 2", pins),
        ],
    )
    module = _MaskedScm(beamforming).eval()
    with torch.no_grad():
        y = module(x, mask)
    feeds = {"x": _numpy(x), "mask": _numpy(mask)}
    where = {**where, "function": "compute_scm, condition_scm"}
    pins = ["x:2,3,5,7"]
    name = "asteroid_condition_scm_ts15"
    axes = {
        "x": {0: "B", 1: "M", 2: "F", 3: "T"},
        "mask": {0: "B", 2: "F", 3: "T"},
        "y": {0: "B", 1: "F", 2: "M", 3: "M"},
    }
    _torchscript(module, (x, mask), corpus.path(name), ["x", "mask"], ["y"], 15, axes)
    corpus.save(
        name,
        ASTEROID,
        feeds,
        [y],
        **where,
        tolerance=1e-5,
        original_fails=fails,
        classes=[
            (
                "pinnable",
                "torch.diagonal of the [B, F, M, M] SCM (line 404): M = x.shape[1] "
                "through compute_scm's einsum (line 352)",
                pins,
            ),
            ("pinnable", "torch.eye(x.shape[-2]) (line 398): M = x.shape[1]", pins),
        ],
    )
    name = "asteroid_condition_scm_dynamo20"
    dims = {k: torch.export.Dim(k, min=2, max=64) for k in "BMFT"}
    shapes = {
        "x": {0: dims["B"], 1: dims["M"], 2: dims["F"], 3: dims["T"]},
        "mask": {0: dims["B"], 2: dims["F"], 3: dims["T"]},
    }
    _dynamo(module, (x, mask), corpus.path(name), ["x", "mask"], ["y"], shapes)
    corpus.save(
        name,
        ASTEROID,
        feeds,
        [y],
        **where,
        tolerance=1e-5,
        identities=1,
        original_fails={"tract": TRACT_IMPLICIT_FILL},
        classes=[
            (
                "pinnable",
                "torch.diagonal of the [B, F, M, M] SCM (line 404): M = x.shape[1]",
                pins,
            ),
        ],
    )


class _Positional(torch.nn.Module):
    """Calls MossFormer with one positional argument (its ``mask`` is keyword-only, and
    the TorchScript exporter would pass it positionally)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


def export_mossformer64(args, corpus: Corpus) -> None:
    """MossFormer of MossFormerGAN-SE built with ``dim=64`` and the default query_key_dim
    128, as generator.py builds it (line 521, emb_dim = num_channel = 64):
    ``torch.eye(quad_q_c.shape[-2], dtype=torch.bool)`` (line 429), T x T with
    T = x.shape[1], read after ``view(B, -1, Q, C)`` (line 411). group_size is not on the
    eye's path (16 here).

    rotary-embedding-torch caches its frequencies on the first call, as a user's model has
    run before it is exported: the trace then slices ``cached_freqs``, a [8192, 32] float
    buffer (1 MiB), on the EyeLike's shape chain. TorchScript, opset 17, dynamic B, T, Q.
    """
    models = os.path.join(os.path.abspath(args.clearvoice_src), "clearvoice", "clearvoice")
    sys.path.insert(0, os.path.join(models, "models"))
    mossformer = importlib.import_module("mossformer_gan_se.mossformer")
    _seeded()
    module = mossformer.MossFormer(
        dim=64, group_size=16, query_key_dim=128, expansion_factor=4.0
    ).eval()
    x = torch.randn(1, 6, 5, 64)
    with torch.no_grad():
        y = module(x)
    assert tuple(module.rotary_pos_emb.cached_freqs.shape) == (8192, 32)
    name = "clearvoice_mossformer64_ts17"
    axes = {"x": {0: "B", 1: "T", 2: "Q"}, "y": {0: "BT", 1: "Q"}}
    _torchscript(_Positional(module).eval(), (x,), corpus.path(name), ["x"], ["y"], 17, axes)
    why = (
        "T = x.shape[1], read back as quad_q_c.shape[-2] after view(B, -1, Q, C) "
        "(line 411): the -1 takes B, T and Q, so all of x is pinned"
    )
    corpus.save(
        name,
        CLEARVOICE,
        {"x": _numpy(x)},
        [y],
        function="MossFormer.cal_attention",
        line=429,
        call="torch.eye(quad_q_c.shape[-2], dtype=torch.bool)",
        tolerance=1e-5,
        classes=[("pinnable", why, ["x:1,6,5,64"])],
        original_fails={
            "onnxruntime": ORT_BOOL_EYELIKE,
            "tract": "StridedSlice /inner/Slice_7: axis 2 out of range for input of rank 2",
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--torchaudio-src",
        required=True,
        help="unpacked torchaudio 2.11.0 wheel (with torchaudio/models/)",
    )
    parser.add_argument("--clearvoice-src", required=True, help="checkout with clearvoice/")
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    torch.set_num_threads(1)
    corpus = Corpus(args.out)
    export_local_state(args, corpus)
    export_bat(args, corpus)
    export_bros(args, corpus)
    export_nystromformer(args, corpus)
    export_condition_scm(args, corpus)
    export_mossformer64(args, corpus)
    corpus.write_manifest()


if __name__ == "__main__":
    main()
