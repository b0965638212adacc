"""The file path: optimize a ModelProto by deserializing only the EyeLike neighbourhood.

An onnx-ir round trip of a whole model costs about ten times its protobuf load and save,
even when eyefold changes ten nodes of a hundred thousand. On a ModelProto (the library
given one, the command line) eyefold therefore scans the proto once (:mod:`.scan`),
extracts the nodes the passes may read or change into a small onnx_ir model
(:mod:`.extract`), runs the very same pipeline steps on it, and writes the result back
into the proto (:mod:`.splice`). Nodes nobody touches are never deserialized.

The whole-model path (deserialize everything, run the steps, serialize) is taken instead,
and the report's steps say why, when the neighbourhood cannot stand for the model. Every
such fallback is one exception, :class:`~eyefold.errors.WholeModelNeeded`, carrying its
reason in words and one of five kinds (:class:`~eyefold.errors.FallbackKind`): what the
passes act on is out of reach (an EyeLike or identity-shaped constant in a subgraph, an
EyeLike in a function, a node holding subgraphs or a mask reader in the neighbourhood),
the graph is one the file path does not take apart (names defined twice or never, beyond
what a sort repairs; sparse initializers), an option works on the whole model (pinned
input shapes), the upgrade on the proto cannot do it, or the result cannot be written
back. Only the last is found after the
neighbourhood's steps ran, so only then are its objects collected first.

An opset upgrade converts every node, so it runs on the proto first
(:mod:`eyefold.upgrade.on_proto`, the same conversion as the pipeline's upgrade step, on
weightless copies of the bodies), as the pipeline's upgrade step: the other steps follow
it. What that upgrade cannot do the original proto takes to the whole-model path, which
gives the result or the precise error.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from collections.abc import Collection

import onnx
import onnx_ir as ir

from eyefold.core.domains import default_opset
from eyefold.core.eyelike_protos import check_eyelike_proto, check_model_eyelikes
from eyefold.core.gc_pause import cyclic_gc_paused
from eyefold.core.model_stats import (
    ModelStats,
    model_stats,
    op_label,
    proto_stats,
    stats_after,
)
from eyefold.core.proto_subgraphs import BodyColumns
from eyefold.errors import EyefoldError, FallbackKind, WholeModelNeeded
from eyefold.model_files.deferred_tensors import DeferredTensors
from eyefold.model_files.load import model_from_memory, model_from_proto
from eyefold.model_files.structure_checks import check_structure
from eyefold.model_files.tensors import check_external_data, external_data_files
from eyefold.options import PipelineOptions
from eyefold.pipeline import pipeline_steps, run_steps, sort_first
from eyefold.proto_path.extract import (
    Neighbourhood,
    build_neighbourhood,
    choose_nodes,
    core_nodes,
)
from eyefold.proto_path.infer_inputs import infer_undeclared_inputs
from eyefold.proto_path.node_order import sort_model_graphs
from eyefold.proto_path.scan import GraphIndex, scan_model
from eyefold.proto_path.splice import SpliceError, splice
from eyefold.rewriting.reach import READS_PAST_OPS
from eyefold.rule_registry import select_rules
from eyefold.run_record import RunRecord, Stage, StepEntry
from eyefold.upgrade.on_proto import ConverterTypes, upgrade_proto
from eyefold.upgrade.target import OpsetNotes
from eyefold.upgrade.validation import unregistered_op

__all__ = [
    "NEIGHBOURHOOD_STEP",
    "SPLICED_TENSOR_LIMIT_BYTES",
    "UPGRADE_STEP",
    "WHOLE_MODEL_STEP",
    "ProtoRun",
    "optimize_proto",
]

NEIGHBOURHOOD_STEP = "neighbourhood"
WHOLE_MODEL_STEP = "whole-model"
# The pipeline's name for its upgrade step (eyefold.pipeline.pipeline_steps).
UPGRADE_STEP = "upgrade"


def _identity_dtypes(options: PipelineOptions) -> frozenset[int]:
    specs = select_rules(options.rules, relaxed=options.relaxed)
    return frozenset(int(d) for spec in specs for d in spec.constant_dtypes)


# New tensors (folded EyeLike outputs) over this many bytes in all send the run to the
# whole-model path. Not for memory: either path writes large new tensors from their
# arrays (eyefold.model_files.deferred_tensors). The limit bounds what the file path adds
# to a model, so a save sizes the result (a C++ walk of the whole proto) only for an input
# within twice the limit of protobuf's (eyefold.file_run._may_not_fit).
SPLICED_TENSOR_LIMIT_BYTES = 64 << 20


@dataclasses.dataclass
class ProtoRun:
    """What :func:`optimize_proto` did.

    Attributes:
        record: what the run did so far, its route step naming the path taken (the
            report is built from it when the whole run ends).
        before: stats of the model as given (``bytes`` unknown), when asked for.
        after: stats of the result (``bytes`` unknown), when asked for.
        data_files: absolute paths of the data files the model as given keeps tensors in
            (those of a model read from a file; a save must copy what the result reads).
        whole_model: the onnx-ir result, when the whole-model path was taken (a file save
            then needs no second deserialization).
        data_elsewhere: whether a tensor outside the main graph's initializers (a node
            attribute, a subgraph's, a function's) keeps its data in a file: a save must
            then go through onnx-ir, which handles those.
        deferred: on the neighbourhood path, the proto with its large new initializers'
            data still to be written (:attr:`model` fills it in).
    """

    record: RunRecord
    before: ModelStats | None
    after: ModelStats | None
    data_files: list[str]
    whole_model: ir.Model | None = None
    proto: onnx.ModelProto | None = None
    data_elsewhere: bool = False
    deferred: DeferredTensors | None = None

    @property
    def model(self) -> onnx.ModelProto:
        """The optimized proto (the argument itself, on the neighbourhood path)."""
        if self.deferred is not None:
            self.proto = self.deferred.fill()
            self.deferred = None
        if self.proto is None:
            assert self.whole_model is not None
            self.proto = ir.serde.serialize_model(self.whole_model)
        return self.proto

    def proto_to_write(self) -> onnx.ModelProto | DeferredTensors:
        """The proto as a plain save writes it: large new tensors from their arrays."""
        return self.deferred if self.deferred else self.model


def _upgrade(
    model: onnx.ModelProto,
    options: PipelineOptions,
    source: int,
    main: BodyColumns | None = None,
) -> tuple[StepEntry, ConverterTypes]:
    """Upgrades ``model`` in place from opset ``source``: the pipeline's upgrade step.

    The steps that follow are those of the options without the upgrade; the types the
    converter inferred go to the neighbourhood's inference. ``main``: the main graph's
    columns, when read already.

    Raises:
        WholeModelNeeded: the proto upgrade cannot do what the onnx-ir upgrade does.
    """
    target = options.upgrade_target
    start = time.perf_counter()
    types = upgrade_proto(model, source, target.opset, main)
    seconds = time.perf_counter() - start
    notes = OpsetNotes(target.notes(source))
    return StepEntry(UPGRADE_STEP, seconds, Stage.PIPELINE, True, notes), types


def _sort(
    model: onnx.ModelProto, record: RunRecord, main: BodyColumns | None = None
) -> list[str]:
    """Sorts the graphs of ``model`` that are out of order, as the record's first step.

    ``main``: the main graph's columns, when read already. Returns the graphs sorted.
    """
    start = time.perf_counter()
    unsorted = sort_model_graphs(model, main)
    record.add_sort(unsorted, time.perf_counter() - start)
    return unsorted


def _out_of_reach(index: GraphIndex, chosen: Collection[int]) -> str | None:
    """Why the passes would act on, or read, more than the ``chosen`` nodes, or None.

    A node holding subgraphs among them (the passes would change it) is named before a
    mask reader (the diagonal rules read its data side's shape chain).
    """
    if index.holders.intersection(chosen):
        return "a node holding subgraphs is in an EyeLike's neighbourhood"
    if any(index.op_types[p] in READS_PAST_OPS for p in chosen):
        # The diagonal rules match Mul(data, mask) -> ReduceSum and read the data side's
        # shape chain: more than the neighbourhood holds.
        return "an EyeLike is used as a mask (Mul), which the diagonal rules look around"
    return None


def _extract(
    model: onnx.ModelProto,
    options: PipelineOptions,
    source_path: str | None,
    record: RunRecord,
    converted: ConverterTypes | None,
) -> tuple[GraphIndex, list[int], Neighbourhood]:
    """The scan, the chosen nodes and the small onnx-ir model holding them.

    A main graph the scan finds out of order is sorted (a step of ``record``) and scanned
    again.

    Raises:
        WholeModelNeeded: the neighbourhood cannot stand for the model.
    """
    base_dir = "" if source_path is None else os.path.dirname(source_path)
    index = scan_model(model, _identity_dtypes(options))
    if index.unsorted and not record.sorted_graphs:
        _sort(model, record)
        index = scan_model(model, _identity_dtypes(options))
    for position in index.eyelike:
        check_eyelike_proto(model.graph.node[position], "main")
    if index.obstacle is not None:
        raise WholeModelNeeded(*index.obstacle)
    core = core_nodes(index)
    reason = _out_of_reach(index, core)
    if reason is not None and reason == _out_of_reach(index, choose_nodes(index, (), core)):
        # The inference below only decides which slices of the widest neighbourhood join
        # the core: where both name the same way out, every neighbourhood between them
        # does, and the inference (on a model of many undeclared values, the costliest
        # work before the whole-model path) is not run for one that is given up.
        raise WholeModelNeeded(FallbackKind.OUT_OF_REACH, reason)
    inferred, baked_in = infer_undeclared_inputs(model, index, converted)
    chosen = choose_nodes(index, inferred.keys(), core)
    if (reason := _out_of_reach(index, chosen)) is not None:
        raise WholeModelNeeded(FallbackKind.OUT_OF_REACH, reason)
    try:
        hood = build_neighbourhood(model, index, chosen, base_dir, inferred, baked_in)
        check_structure(hood.model)  # what a load checks, where onnx-ir reads the model
    except (EyefoldError, UnicodeDecodeError, ValueError, ir.serde.SerdeError) as error:
        # The whole-model path meets the same problem and names it as a load does.
        raise WholeModelNeeded(
            FallbackKind.INDIVISIBLE_GRAPH,
            f"the neighbourhood cannot be read ({type(error).__name__})",
        ) from None
    if source_path is not None and index.external_locations:
        check_external_data(hood.model, source_path)  # the rest is checked when saved
    return index, chosen, hood


def _neighbourhood(
    model: onnx.ModelProto,
    options: PipelineOptions,
    record: RunRecord,
    source_path: str | None,
    with_stats: bool,
    converted: ConverterTypes | None,
) -> ProtoRun:
    """Runs the steps on the EyeLike neighbourhood and splices the result into ``model``.

    ``converted``: the types of the opset upgrade just done on the proto, if any.

    Raises:
        WholeModelNeeded: the neighbourhood cannot stand for the model (``model`` is
            unchanged by this function, and ``record`` holds none of its steps).
    """
    base_dir = "" if source_path is None else os.path.dirname(source_path)
    start = time.perf_counter()
    index, chosen, hood = _extract(model, options, source_path, record, converted)
    before = proto_stats(model, index.op_types, index.domains) if with_stats else None
    seconds = time.perf_counter() - start
    steps = RunRecord(
        opset_before=record.opset_before, ir_version_before=record.ir_version_before
    )
    run_steps(hood.model, pipeline_steps(options), steps)  # kept only once spliced
    added = hood.new_tensor_bytes()
    if added > SPLICED_TENSOR_LIMIT_BYTES:
        raise WholeModelNeeded(
            FallbackKind.WRITE_BACK,
            f"{added} bytes of new tensors are written from their arrays",
        )
    start = time.perf_counter()
    initializers = len(model.graph.initializer)
    try:
        deferred = splice(model, index, hood)
    except SpliceError as error:
        raise WholeModelNeeded(
            FallbackKind.WRITE_BACK, f"the result cannot be spliced back ({error})"
        ) from None
    after = None
    if before is not None:
        replaced = [op_label(index.domains[p], index.op_types[p]) for p in chosen]
        written = [op_label(n.domain, n.op_type) for n in hood.written_nodes()]
        added_initializers = len(model.graph.initializer) - initializers
        after = stats_after(model, before, replaced, written, added_initializers)
    seconds += time.perf_counter() - start
    # The neighbourhood's steps count only now that its result is in the model.
    record.add(StepEntry(NEIGHBOURHOOD_STEP, seconds, Stage.ROUTE))
    record.steps.extend(steps.steps)
    record.opset_after = steps.opset_after
    record.ir_version_after = steps.ir_version_after
    record.route["neighbourhood"] = {"nodes": len(chosen), "of": len(model.graph.node)}
    files = [os.path.abspath(os.path.join(base_dir, n)) for n in index.external_locations]
    return ProtoRun(
        record,
        before,
        after,
        sorted(set(files)),
        proto=model,
        data_elsewhere=index.external_elsewhere,
        deferred=deferred,
    )


def _whole_model(
    model: onnx.ModelProto,
    options: PipelineOptions,
    record: RunRecord,
    source_path: str | None,
    kind: FallbackKind,
    reason: str,
    with_stats: bool,
) -> ProtoRun:
    """Deserializes everything (checked as a file load is, when read from a file).

    ``kind`` and ``reason``: why the file path handed the model over. Only a write-back
    comes after the neighbourhood's steps ran: their objects are collected first, before
    the whole model takes their place in memory.
    """
    if kind is FallbackKind.WRITE_BACK:
        gc.collect()
    check_model_eyelikes(model)
    if source_path is None:
        working = model_from_memory(model)
    else:
        working = model_from_proto(model, source_path)
    before = model_stats(working, None) if with_stats else None
    files = external_data_files(working)
    if not record.sorted_graphs:
        sort_first(working, record)
    record.add(StepEntry(f"{WHOLE_MODEL_STEP}: {reason}", 0.0, Stage.ROUTE))
    run_steps(working, pipeline_steps(options), record)
    record.route["whole_model"] = reason
    after = model_stats(working, None) if with_stats else None
    return ProtoRun(record, before, after, files, working)


def optimize_proto(
    model: onnx.ModelProto,
    options: PipelineOptions,
    *,
    record: RunRecord | None = None,
    source_path: str | None = None,
    with_stats: bool = False,
) -> ProtoRun:
    """Optimizes ``model`` in place where it can, else on a whole-model copy.

    Args:
        model: the model; changed in place on the neighbourhood path, and by an opset
            upgrade done on the proto (the whole-model path may then follow). Otherwise
            the result is a new model and ``model`` is left as it was.
        options: the run's options.
        record: the run's record, to append the steps to (a new one if None); the caller
            builds the report from it when the whole run is done.
        source_path: the file ``model`` was read from, if any: its external data is read
            (lazily) from that folder, and the whole-model path checks the model as
            loading the file does (:func:`eyefold.model_files.load.model_from_proto`).
        with_stats: also count the ops and initializers before and after (the command
            line's table; a library call does without the walks that can take).

    Returns:
        What the run did: its record, the data files the model as given reads, the stats
        before and after (if asked for), and the result, which :attr:`ProtoRun.model`
        serializes on first use: ``model`` itself on the neighbourhood path (its large
        new tensors written then), else the onnx-ir model in :attr:`ProtoRun.whole_model`.
    """
    record = RunRecord() if record is None else record
    opset = default_opset({o.domain: o.version for o in model.opset_import})
    record.opset_before = opset
    record.ir_version_before = model.ir_version
    if not options.upgrade and (invalid := unregistered_op(model)) is not None:
        record.warnings.append(f"{invalid}; kept at that opset (--no-upgrade)")
    # Whether an upgrade is due is decided here only: when it is, the upgrade on the
    # proto starts from ``source``, the model's opset.
    due = options.upgrade and opset is not None and opset < options.upgrade_target.opset
    source = opset if due else None
    given = None  # the counts of the model as given, when an upgrade comes first
    handed_over: tuple[FallbackKind, str] | None = None  # the kind and reason, if any
    try:
        if options.input_shapes:
            raise WholeModelNeeded(
                FallbackKind.WHOLE_MODEL_OPTION, "input shapes are pinned on the whole model"
            )
        with cyclic_gc_paused():  # walks of every node, and a neighbourhood's objects
            converted = None
            if source is not None:
                # An upgrade changes every node: the counts before it, the order check
                # onnx's converter and checker need, and the upgrade share one read of
                # the main graph's columns.
                main = BodyColumns.of(model.graph)
                if with_stats:
                    given = proto_stats(model, main.op_types, main.domains)
                resorted = "main" in _sort(model, record, main)  # then read before it
                step, converted = _upgrade(model, options, source, None if resorted else main)
                del main  # stale now: the collector need not walk it when it resumes
                record.add(step)
                # Done on the proto: the pipeline's own upgrade step has nothing to do.
                options = dataclasses.replace(options, upgrade=False)
            full_path = None if source_path is None else os.path.abspath(source_path)
            run = _neighbourhood(model, options, record, full_path, with_stats, converted)
    except WholeModelNeeded as needed:
        # The traceback, which holds the neighbourhood, ends here.
        handed_over = needed.kind, needed.reason
    if handed_over is not None:
        kind, reason = handed_over
        run = _whole_model(model, options, record, source_path, kind, reason, with_stats)
    if given is not None:
        run.before = given
    return run
