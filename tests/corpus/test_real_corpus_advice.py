"""The "lost at" advice on real exports names what the eye's size is read from, and no more.

Where a pinnable EyeLike stays, ``inspect`` says at which graph input its shape was lost and
which dims ``--input-shape`` must pin. Users pin, and bake in, what it names: on these
exports the source reads one input's dims, and the advice must name those only (not the
batch, not the other inputs). The expected input and dims come from the libraries' source,
cited in ``sample_models/real/manifest.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eyefold.cli.main import main

REAL = Path(__file__).resolve().parents[2] / "sample_models" / "real"

# (model, EyeLike node, graph input, the dims the source reads).
LOST_AT = [
    # HDemucs _LocalState: torch.eye(T), B, C, T = x.shape.
    ("torchaudio_localstate_ts12", "/EyeLike", "x", "dim 2 ('T') is dynamic"),
    # Bros: torch.eye(S, S + 1), S = attention_mask.shape[1]; input_ids and bbox not read.
    (
        "transformers_brosspadeee_ts14",
        "/model/EyeLike",
        "attention_mask",
        "dim 1 ('S') is dynamic",
    ),
    # condition_scm on the SCM itself: the diagonal's mask is its last two dims, the eye
    # its dim 2.
    ("asteroid_condition_scm_ts13", "/EyeLike", "scm", "dim 2 ('M'), dim 3 ('M') are dynamic"),
    ("asteroid_condition_scm_ts13", "/EyeLike_1", "scm", "dim 2 ('M') is dynamic"),
    # After compute_scm: both read M = x.shape[1]; not mask, not B, F or T.
    ("asteroid_condition_scm_ts15", "/EyeLike", "x", "dim 1 ('M') is dynamic"),
    ("asteroid_condition_scm_ts15", "/EyeLike_1", "x", "dim 1 ('M') is dynamic"),
    ("asteroid_condition_scm_dynamo20", "node_EyeLike_19", "x", "dim 1 ('M') is dynamic"),
]


@pytest.mark.parametrize(
    ("name", "node", "value", "dims"), LOST_AT, ids=[f"{c[0]}:{c[1]}" for c in LOST_AT]
)
def test_lost_at_names_only_the_dims_the_source_reads(capsys, name, node, value, dims) -> None:
    assert main(["inspect", str(REAL / f"{name}.onnx"), "--json"]) == 0
    nodes = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert nodes[node]["action"] == "inferred"
    plural = " are dynamic" in dims
    assert nodes[node]["shape_lost"] == {
        "value": value,
        "node": None,
        "op": None,
        "why": f"{dims}; --input-shape pins {'them' if plural else 'it'}",
    }
    assert f"lost at graph input '{value}': {dims}" in nodes[node]["reason"]
