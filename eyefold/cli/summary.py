"""What the command line shows a person: summary tables on stdout, progress on stderr.

``eyefold optimize`` ends with a before/after table in the style onnxsim users know (the op
counts that changed, initializers, opset, model size), one line per EyeLike, the ``--check``
verdict and a status line. ``eyefold inspect`` prints one table row per EyeLike. Colour is
used only on a terminal (and never with ``NO_COLOR`` set); progress lines for long steps go
to stderr only when it is a terminal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TextIO

from eyefold.core.model_stats import ModelStats, model_stats, op_counts
from eyefold.core.option_names import cli_spelling
from eyefold.report import NodeOutcome, Report
from eyefold.run_record import RunRecord

__all__ = [
    "INSPECT_COLUMNS",
    "ModelStats",
    "model_stats",
    "op_counts",
    "render_inspect",
    "render_optimize",
    "table",
    "use_color",
]

# Node lines shown in the optimize summary; the full list is in --report and inspect.
MAX_NODE_LINES = 20


def use_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def table(rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """Rows as aligned text columns (``right``: right-align that column)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(width) if align else cell.ljust(width)
            for cell, width, align in zip(row, widths, right, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _shape_text(dtype: str | None, shape: list[int | str | None] | None) -> str:
    if dtype is None and shape is None:
        return "?"
    dims = "?" if shape is None else ",".join("?" if d is None else str(d) for d in shape)
    return f"{dtype or '?'}[{dims}]"


def _reason(node: NodeOutcome) -> str:
    reason = node.reason
    if node.action == "folded" and node.from_inputs:
        reason += f" (bakes in the declared shape of input {', '.join(node.from_inputs)})"
    for declined in node.rules_declined:
        reason += f"; rule {declined['rule']} declined: {declined['reason']}"
    note = node.runtime_note
    if note and node.runtime_supported is not True and not node.lowered:  # lowered: said
        reason += f" [{note}]"
    return cli_spelling(reason)


def _runtime(node: NodeOutcome) -> str:
    """Whether the target runtime runs the node in the result: a legalized node does."""
    if node.legalized:
        return "yes"
    supported = node.runtime_supported
    return "-" if supported is None else ("yes" if supported else "no")


Column = tuple[str, Callable[[NodeOutcome], str], bool]

# The inspect table: (header, cell, right-aligned). RUNS: whether the target runtime runs
# the node in the result, legalized or as it is ("-" when not checked or folded away);
# shown once any node was checked. The WHY column's note says what legalization did.
INSPECT_COLUMNS: list[Column] = [
    ("NODE", lambda n: n.name or "(unnamed)", False),
    ("GRAPH", lambda n: n.graph, False),
    ("INPUT", lambda n: _shape_text(n.input_dtype, n.shape), False),
    ("OUTPUT", lambda n: n.dtype or "?", False),
    ("K", lambda n: str(n.k), True),
    ("OPSET", lambda n: "?" if n.opset is None else str(n.opset), True),
    ("BYTES", lambda n: "?" if n.bytes is None else str(n.bytes), True),
    ("ACTION", lambda n: n.action, False),
    ("RUNS", _runtime, False),
    ("WHY", _reason, False),
]


def _node_table(nodes: Sequence[NodeOutcome]) -> list[str]:
    checked = any(n.runtime_supported is not None for n in nodes)
    columns = [c for c in INSPECT_COLUMNS if checked or c[0] != "RUNS"]
    rows = [[header for header, _, _ in columns]]
    rows.extend([cell(node) for _, cell, _ in columns] for node in nodes)
    return table(rows, [align for _, _, align in columns])


def _runs_legend(report: Report) -> list[str]:
    """Which runtime the RUNS column speaks of, when it is not onnxruntime (the default)."""
    runtime = report.extra.get("runtime")
    checked = any(n.runtime_supported is not None for n in report.nodes)
    if not runtime or not checked or runtime["name"] == "onnxruntime":
        return []
    where = f"{runtime['name']} {runtime['version'] or '(not installed)'}"
    if runtime.get("measured"):
        where += f" (by the table measured with {runtime['measured']})"
    return [f"RUNS: whether {where} runs the node as it was"]


def _notes(report: Report) -> list[str]:
    """What eyefold did to the model before the steps: sorted its graphs."""
    from eyefold.core.node_order import SORTED_NOTE

    graphs = report.extra.get("sorted")
    if not graphs:
        return []
    verb = "was" if len(graphs) == 1 else "were"
    return [f"note: graph {', '.join(graphs)} {verb} {SORTED_NOTE}"]


def _loads_on(report: Report) -> list[str]:
    """The oldest onnxruntime that loads the result, when the run raised opset or IR."""
    loads_on = report.extra.get("loads_on")
    if loads_on is None:
        return []
    opset, ir_version = loads_on["opset"], loads_on["ir_version"]
    changes = [
        f"{label} {change['before']} -> {change['after']}"
        for label, change in (("opset", opset), ("IR", ir_version))
        if change["before"] != change["after"]
    ]
    oldest = loads_on["onnxruntime"]
    needs = (
        f"needs onnxruntime >= {oldest}"
        if oldest is not None
        else "newer than every onnxruntime eyefold has a figure for"
    )
    return [f"{', '.join(changes)}: {needs}"]


def _withheld(report: Report) -> list[str]:
    """One line per relaxed rule that matched an EyeLike and did not run for want of it."""
    return [
        f"note: rule {rule} matches {count} EyeLike node(s) but is relaxed (not exact for"
        " inf, NaN and -0.0): --relaxed runs it"
        for rule, count in report.extra.get("rules_withheld", {}).items()
    ]


def _counts_line(report: Report) -> str:
    counts = report.counts()
    return (
        f"EyeLike: {counts['total']} found, {counts['folded']} folded,"
        f" {counts['inferred']} inferred, {counts['kept']} kept, {counts['removed']} removed"
    )


def _identities_line(report: Report) -> list[str]:
    """The Range/Equal identities dynamo writes, counted apart from EyeLike (none: no line)."""
    identities = report.extra.get("identities")
    if not identities or not identities["found"]:
        return []
    return [
        f"Range identities (dynamo's torch.eye): {identities['found']} found,"
        f" {identities['rewritten']} rewritten"
    ]


def render_inspect(report: Report, source: str) -> str:
    """The ``eyefold inspect`` table: one row per EyeLike and what optimize would do."""
    lines = [
        f"{source}: opset {report.opset_before}"
        + (
            f" (optimize would make it {report.opset_after})"
            if report.opset_after != report.opset_before
            else ""
        ),
        *_notes(report),
        *_loads_on(report),
        *_withheld(report),
        _counts_line(report),
        *_identities_line(report),
    ]
    if report.nodes:
        lines.extend(["", *_node_table(report.nodes), *_runs_legend(report)])
    lines.extend(f"warning: {warning}" for warning in report.warnings)
    return "\n".join(lines)


def _cell(before: object, after: object, color: bool, lower_is_better: bool | None) -> str:
    """Green when the change is an improvement, bold when it is only a change."""
    text = "-" if after is None else str(after)
    if not color or before == after or not isinstance(before, int):
        return text
    better = (
        lower_is_better is not None
        and isinstance(after, int)
        and (after < before) == lower_is_better
    )
    return f"\x1b[1;32m{text}\x1b[0m" if better else f"\x1b[1m{text}\x1b[0m"


def _before_after(before: ModelStats, after: ModelStats, color: bool) -> list[str]:
    rows: list[list[str]] = [["", "before", "after"]]
    plain: list[list[str]] = [["", "before", "after"]]
    changed_ops = [
        op
        for op in sorted({*before.ops, *after.ops})
        if before.ops.get(op, 0) != after.ops.get(op, 0)
    ]
    entries: list[tuple[str, object, object, bool | None]] = [
        (op, before.ops.get(op, 0), after.ops.get(op, 0), True) for op in changed_ops
    ]
    entries += [
        ("initializers", before.initializers, after.initializers, None),
        ("opset", before.opset, after.opset, None),
        ("model bytes", before.bytes, after.bytes, True),
    ]
    for label, old, new, lower in entries:
        old_text = "-" if old is None else str(old)
        plain.append([label, old_text, "-" if new is None else str(new)])
        rows.append([label, old_text, _cell(old, new, color, lower)])
    # Align on the plain text so escape codes do not skew the columns.
    aligned = table(plain, [False, True, True])
    if not color:
        return aligned
    widths = [max(len(r[i]) for r in plain) for i in range(3)]
    return [
        f"{r[0].ljust(widths[0])}  {r[1].rjust(widths[1])}  "
        + " " * (widths[2] - len(p[2]))
        + r[2]
        for r, p in zip(rows, plain, strict=True)
    ]


def render_optimize(report: Report, record: RunRecord, *, color: bool, command: str) -> str:
    """The optimize summary: before/after table, EyeLike nodes, check, status line."""
    lines: list[str] = []
    if record.before is not None and record.after is not None:
        lines.extend(_before_after(record.before, record.after, color))
        lines.append("")
    lines.extend(_notes(report))
    lines.extend(_loads_on(report))
    lines.extend(_withheld(report))
    lines.append(_counts_line(report))
    lines.extend(_identities_line(report))
    if report.nodes:
        lines.extend("  " + line for line in _node_table(report.nodes[:MAX_NODE_LINES]))
        hidden = len(report.nodes) - MAX_NODE_LINES
        if hidden > 0:
            lines.append(f"  ... and {hidden} more (see --report or eyefold inspect)")
        lines.extend("  " + line for line in _runs_legend(report))
    lines.extend(f"warning: {warning}" for warning in report.warnings)
    if record.check is not None:
        lines.append(record.check.describe())
    if record.output is not None:
        where = record.output.path
        if record.output.data_path:
            where += f" + {os.path.basename(record.output.data_path)}"
        lines.append(f"wrote {where} ({record.output.bytes} bytes)")
    seconds = sum(s.seconds for s in report.steps)
    lines.append(f"{_status(report, record)} | Runtime: {seconds:.2f}s | Command: {command}")
    return "\n".join(lines)


def _status(report: Report, record: RunRecord) -> str:
    """``PASSED`` only after a check that passed; else what was written, and what fails.

    E.g. ``WRITTEN o.onnx, 1 EyeLike node cannot run on onnxruntime 1.32.0 (...); not
    checked (--check runs both models)``.
    """
    from eyefold.run_status import CHECK_HINT, RunStatus

    entry = report.extra.get("verdict")
    if entry is None:  # nothing written: nothing to claim
        return "NOT CHECKED"
    status = RunStatus.from_dict(entry)
    text = status.word
    if not status.checked and record.output is not None:
        text += f" {record.output.path}"
    problem = status.unrunnable_text()
    if problem:
        text += f", but {problem}" if status.checked else f", {problem}"
    if not status.checked:
        text += f"; not checked ({CHECK_HINT})" if problem else f" (not checked; {CHECK_HINT})"
    return text
