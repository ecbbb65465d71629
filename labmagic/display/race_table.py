"""How a :class:`labmagic.benchmark.race.BenchResult` looks: HTML and plain text.

Both renderings carry the same facts in the same order: the GPU and timer named in a header line (or, without a GPU,
the statement that nothing was measured and which spec the prediction uses), then the table(s), then a footer. A
measurement has one table per shape, whose marks the footer lists, one per line: ``*`` allocator retries during the
calls, ``!`` faster than the physical floor (suspicious, not a win), and in the note, ``host-bound`` where one eager
call's host time exceeds its device time. Beside the device's ``median ms`` stand the host's figures of one eager
call (:func:`labmagic.timing.time_host`): ``host ms``, from the call to its return, and ``isolated ms``, to the end
of its work. The ``peak mem``, ``sdpa`` and host columns appear only when some row has a value there (a race that
never calls SDPA has no ``sdpa`` column). The HTML table shows fewer columns (:func:`html_columns`) so that it fits
the book's text column; the full set follows it, folded in ``<details>``. The text keeps the full set: a log has no
width.
A prediction (no GPU) has one compact table: a row per variant, a column per shape, each cell the floor
in ms or, where the variant would not run there, its status; what is the same on every row (the
variants that need a GPU, an error repeated at every shape) is said once, below the table.
The plain text reads well in a papermill log, a terminal and a diff, so it has no colours and fixed
column widths. :func:`render_markdown` is ``labmagic bench``'s layout: one pipe table per shape with the columns a
reader of a kernel benchmark looks for first (:data:`MARKDOWN_COLUMNS`), measured or predicted alike.
"""

from __future__ import annotations

import base64
import html

from ..benchmark import roofline
from ..timing.noise import includes_one
from .markdown import md_table, text

MEASURED_COLUMNS = ["variant", "backend", "status", "median ms", "host ms", "isolated ms", "95% CI ms", "min-max ms",
                    "TFLOP/s", "GB/s", "% SOL", "% ceiling", "vs ref", "floor ms", "peak mem", "sdpa", "note"]
#: Left out of the HTML table by default (each still in the folded "all columns" table): the floor is in the line
#: above the table, % SOL repeats % ceiling against the spec sheet, and the interval and spread are the widest cells
#: (the interval's verdict is in ``vs ref``'s mark).
HTML_FOLDED_COLUMNS = ("95% CI ms", "min-max ms", "% SOL", "floor ms")
#: Marks a ``vs ref`` whose 95% interval holds 1.00: this run cannot tell the variant from the reference.
SAME_AS_REF = "≈"
#: The note of a row whose host time exceeds its device time (:func:`labmagic.store.schema.host_bound`).
HOST_BOUND = "host-bound"
#: What the marks in a measured table mean: (mark, meaning), one line or list item each.
MARKS = [("*", "allocator retries during the calls"),
         ("!", "faster than the physical floor (suspicious)"),
         ("vs ref", "reference time / variant time"),
         (SAME_AS_REF, "vs ref's 95% interval holds 1.00: no difference from the reference in this run"),
         ("host ms", "one eager call, from the Python call to its return (the GPU not awaited); median of a few"),
         ("isolated ms", "one eager call from the call to the end of its work (synchronized before and after)"),
         (HOST_BOUND, "host ms above median ms: in an eager loop the host sets the pace (a CUDA graph, or fewer "
                      "launches, removes it)")]
#: The prediction's leading columns; one column per shape follows, each cell the floor in ms or the status.
PREDICTED_COLUMNS = ["variant", "backend", "status"]


def _num(value, digits: int = 3) -> str:
    if value is None or value != value:
        return "-"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}" if magnitude < 100 else f"{value:.0f}"


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _status(row) -> str:
    return {"oom": "OOM", "needs_gpu": "needs GPU", "predicted": "not measured"}.get(row.status, row.status)


def _note(row) -> str:
    if row.error:
        return row.error
    return ""


def _cells(result, row) -> dict[str, str]:
    """The row's cell under each of :data:`MEASURED_COLUMNS`."""
    median = _num(row.ms_median, 4)
    if row.ms_median is not None:
        median += "*" if row.alloc_retries else ""
        median += "!" if row.below_floor else ""
    spread = f"{_num(row.ms_min, 4)}-{_num(row.ms_max, 4)}" if row.ms_min is not None else "-"
    interval = (f"{_num(row.ms_ci_low, 4)}-{_num(row.ms_ci_high, 4)}" if row.ms_ci_low is not None else "-")
    vs_ref = f"{row.vs_ref:.2f}x" if row.vs_ref else "-"
    if row.vs_ref and includes_one(row.vs_ref_low, row.vs_ref_high):
        vs_ref += f" {SAME_AS_REF}"
    note = _note(row)
    if row.host_bound:
        note = HOST_BOUND + ("; " + note if note else "")
    if row.alloc_retries:
        note = (note + "; " if note else "") + f"{row.alloc_retries} allocator retries"
    if row.below_floor:
        note = (note + "; " if note else "") + "faster than the floor: check the kernel and nbytes/flops"
    else:
        roof = roofline.measured_roof(result.ceilings, row.dtype)
        ahead = roofline.ceiling_passed(row.ceiling_pct, bool(roof and roof.memory_bound(row.flops, row.nbytes)))
        note = (note + "; " if note and ahead else note) + ahead
    return dict(zip(MEASURED_COLUMNS, [
        row.variant, row.backend, _status(row), median, _num(row.host_ms, 4), _num(row.isolated_ms, 4), interval,
        spread, _num(row.tflops), _num(row.gbps),
        _num(row.sol_pct), _num(row.ceiling_pct), vs_ref, _num(row.predicted_ms, 4),
        _bytes(row.peak_mem_bytes), row.sdpa_backend, note]))


def measured_columns(result) -> list[str]:
    """:data:`MEASURED_COLUMNS` less ``sdpa`` where no row called SDPA, and ``peak mem``, ``95% CI ms`` and the host
    columns where no row has one."""
    rows = result.rows
    empty = set()
    if all(r.sdpa_backend in ("-", "", None) for r in rows):
        empty.add("sdpa")
    if all(r.peak_mem_bytes is None for r in rows):
        empty.add("peak mem")
    if all(r.ms_ci_low is None for r in rows):
        empty.add("95% CI ms")
    if all(r.host_ms is None for r in rows):
        empty.update(("host ms", "isolated ms"))
    return [c for c in MEASURED_COLUMNS if c not in empty]


def html_columns(result) -> list[str]:
    """The HTML table's default columns: :func:`measured_columns` less :data:`HTML_FOLDED_COLUMNS`, except that
    without measured ceilings (every ``% ceiling`` is ``-``) ``% SOL`` stands in for ``% ceiling``."""
    folded = set(HTML_FOLDED_COLUMNS)
    if all(r.ceiling_pct is None for r in result.rows):
        folded = (folded - {"% SOL"}) | {"% ceiling"}
    return [c for c in measured_columns(result) if c not in folded]


def header(result) -> str:
    if not result.measured:
        spec = result.spec.name if result.spec else "?"
        return (f"{result.chapter}: nothing was measured (no GPU). Prediction for {spec}: the floor is the "
                f"time to move the bytes at spec bandwidth or do the FLOPs at spec peak, whichever is longer.")
    ceil = (f"measured ceilings: {result.ceilings.copy_gbps:.0f} GB/s copy, "
            f"{result.ceilings.bandwidth_gbps:.0f} GB/s best memory pattern" if result.ceilings
            else "no measured ceilings (labmagic calibrate)")
    spec = f"spec: {result.spec.name}" if result.spec else "spec: unknown GPU"
    return f"{result.chapter} on {result.device} | timer: {result.timer} | {spec} | {ceil}"


def _by_shape(result):
    for shape in result.shapes:
        yield shape, [r for r in result.rows if r.shape == shape]


def _floor_line(rows) -> str:
    for r in rows:
        if r.predicted_ms:
            return f"floor {_num(r.predicted_ms, 4)} ms"
    return ""


# -- a prediction (no GPU): one table, variants by shapes ----------------------------------------

#: Statuses under which a variant would run on the GPU: its cell shows the floor it aims at.
_AIMS_AT_FLOOR = ("predicted", "needs_gpu")


def _prediction(result):
    """(title, table, failed, notes): the compact prediction table as strings (its first line the column names),
    which of its lines are variants that failed on CPU, and the notes said once below it.

    A variant's cells show the floor where it would run (checked on CPU, or needing a GPU) and its status where it
    would not; two last rows give the throughput the floor implies, which says whether a shape is memory-bound.
    """
    shapes = result.shapes
    by_key = {(r.variant, r.shape): r for r in result.rows}
    floors = {}
    for r in result.rows:
        if r.predicted_ms and r.shape not in floors:
            floors[r.shape] = r
    dtypes = list(dict.fromkeys(r.dtype for r in result.rows))
    dtype_of = {}
    for r in result.rows:
        dtype_of.setdefault(r.shape, r.dtype)
    columns = shapes if len(dtypes) == 1 else [f"{s} ({dtype_of[s]})" for s in shapes]
    table, failed, needs_gpu, notes = [PREDICTED_COLUMNS + columns], [False], [], []
    for variant in dict.fromkeys(r.variant for r in result.rows):
        row_at = [by_key.get((variant, s)) for s in shapes]
        rows = [r for r in row_at if r]
        cells = ["" if r is None else _num(r.predicted_ms, 4) if r.status in _AIMS_AT_FLOOR else _status(r)
                 for r in row_at]
        table.append([variant, rows[0].backend, ", ".join(dict.fromkeys(_status(r) for r in rows))] + cells)
        failed.append(any(r.status in ("mismatch", "error", "oom") for r in rows))
        if any(r.status == "needs_gpu" for r in rows):
            needs_gpu.append(variant)
        errors = dict.fromkeys(r.error for r in rows if r.error and r.status != "needs_gpu")
        notes += [f"{variant}: {e}" for e in errors]
    # The floor's own throughput: what a perfect kernel would reach on the target.
    for name, fact in (("GB/s at floor", lambda r: r.nbytes / (r.predicted_ms * 1e-3) / 1e9 if r.nbytes else None),
                       ("TFLOP/s at floor", lambda r: r.flops / (r.predicted_ms * 1e-3) / 1e12 if r.flops else None)):
        table.append([name, "", ""] + [_num(fact(floors[s])) if s in floors else "-" for s in shapes])
        failed.append(False)
    if needs_gpu:
        notes.insert(0, "variants that need a CUDA GPU to run (this machine has none; their cells are the floor they "
                        f"would aim at): {', '.join(needs_gpu)}")
    title = f"floor ms per variant and shape ({', '.join(dtypes)}); where a variant would not run, its status"
    return title, table, failed, notes


def _text_table(table, left: int) -> list[str]:
    """Fixed-width lines: the first ``left`` columns left-aligned, the rest right-aligned."""
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return ["  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))).rstrip()
            for line in table]


def render_text(result) -> str:
    """Fixed-width tables: one per shape when measured, one for the whole prediction when not."""
    out = [header(result)]
    if not result.measured:
        title, table, _, notes = _prediction(result)
        out += ["", title] + _text_table(table, len(PREDICTED_COLUMNS))
        footer = notes + list(result.notes)
        return "\n".join(out + ([""] + footer if footer else []))
    columns = measured_columns(result)
    for shape, rows in _by_shape(result):
        table = [columns] + [[cells[c] for c in columns] for cells in (_cells(result, r) for r in rows)]
        widths = [max(len(line[i]) for line in table) for i in range(len(columns) - 1)]
        out.append("")
        out.append(f"shape {shape} ({rows[0].dtype})  {_floor_line(rows)}".rstrip())
        for line in table:
            cells = [c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
            out.append("  ".join(cells + [line[-1]]).rstrip())
    if result.notes:
        out += [""] + list(result.notes)
    width = max(len(mark) for mark, _ in MARKS)
    out += ["", "marks:"] + [f"  {mark.ljust(width)}  {meaning}" for mark, meaning in MARKS]
    if getattr(result, "nsight_check", None) is not None:
        out += ["", repr(result.nsight_check)]
    return "\n".join(out)


def _prediction_html(result) -> list[str]:
    title, table, failed, notes = _prediction(result)
    parts = [f"<p>{html.escape(title)}</p>",
             "<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in table[0]) + "</tr></thead><tbody>"]
    for line, bad in zip(table[1:], failed[1:]):
        style = ' style="color:#b00"' if bad else ""
        parts.append(f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>")
    parts.append("</tbody></table>")
    parts += [f"<p><small>{html.escape(line)}</small></p>" for line in notes + list(result.notes)]
    return parts


def _measured_table(columns, cells, rows, attrs: str = "") -> list[str]:
    parts = [f"<table{attrs}><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns)
             + "</tr></thead><tbody>"]
    for r, row_cells in zip(rows, cells):
        style = ' style="color:#b00"' if r.status not in ("ok", "predicted") else ""
        parts.append(f"<tr{style}>" + "".join(f"<td>{html.escape(row_cells[c])}</td>" for c in columns) + "</tr>")
    parts.append("</tbody></table>")
    return parts


def _marks_html() -> str:
    items = "".join(f"<li><code>{html.escape(mark)}</code> {html.escape(meaning)}</li>" for mark, meaning in MARKS)
    return f'<ul class="labmagic-legend" style="font-size:85%">{items}</ul>'


def render_html(result) -> str:
    """One HTML table per shape (the columns that fit the book, then all of them folded), the marks as a list,
    then the plot (when something was measured); one table for a prediction."""
    everything, columns = measured_columns(result), html_columns(result)
    parts = [f'<div class="labmagic-bench"><p><b>{html.escape(header(result))}</b></p>']
    if not result.measured:
        return "\n".join(parts + _prediction_html(result) + ["</div>"])
    for shape, rows in _by_shape(result):
        parts.append(f"<p>shape <code>{html.escape(shape)}</code> ({html.escape(rows[0].dtype)}) "
                     f"{html.escape(_floor_line(rows))}</p>")
        cells = [_cells(result, r) for r in rows]
        parts += _measured_table(columns, cells, rows)
        if columns != everything:
            parts.append("<details><summary>all columns</summary>")
            parts += _measured_table(everything, cells, rows, ' class="labmagic-all-columns"')
            parts.append("</details>")
    for line in result.notes:
        parts.append(f"<p><small>{html.escape(line)}</small></p>")
    parts.append(_marks_html())
    if result.png:
        data = base64.b64encode(result.png).decode()
        parts.append(f'<img alt="{html.escape(result.chapter)} plots" src="data:image/png;base64,{data}"/>')
    if getattr(result, "nsight_check", None) is not None:
        parts.append(result.nsight_check._repr_html_())
    parts.append("</div>")
    return "\n".join(parts)


# -- labmagic bench: one Markdown table per shape ---------------------------------------------------

#: ``labmagic bench``'s columns; ``vs ref`` is headed with the race's reference (``vs torch``), and ``sdpa`` appears
#: where the race has SDPA variants.
MARKDOWN_COLUMNS = ["variant", "ms", "peak mem", "TFLOP/s", "GB/s", "vs ref", "host ms", "isolated ms", "sdpa", "note"]


def _markdown_cells(result, row) -> list[str]:
    """A row of ``result`` under :data:`MARKDOWN_COLUMNS`: where it was not timed, its status stands in ``ms``
    (``needs GPU``, ``not measured``, ``mismatch``), and its note is the first line of why (the footer says ``needs
    GPU`` once)."""
    cells = _cells(result, row)
    timed = row.ms_median is not None
    note = cells["note"] if row.status != "needs_gpu" else ""
    return [row.variant, cells["median ms"] if timed else _status(row), cells["peak mem"], cells["TFLOP/s"],
            cells["GB/s"], cells["vs ref"], cells["host ms"], cells["isolated ms"], row.sdpa_backend,
            note.splitlines()[0] if note else ""]


def render_markdown(result, ref: str, title: str = "") -> str:
    """``result`` as ``labmagic bench`` prints it: ``title`` (the race) and the header line, then per shape a line
    (shape, dtype, floor) and a pipe table of :data:`MARKDOWN_COLUMNS`, then the notes, the variants that need a GPU
    (once) and what ``host-bound`` means. Every cell goes through :func:`labmagic.display.markdown.text`."""
    heads = [f"vs {ref}" if c == "vs ref" else c for c in MARKDOWN_COLUMNS]
    sdpa = any(r.backend == "sdpa" or r.sdpa_backend not in ("-", "", None) for r in result.rows)
    keep = [i for i, c in enumerate(MARKDOWN_COLUMNS) if c != "sdpa" or sdpa]
    out = [f"## {text(title)}", ""] if title else []
    out.append(text(header(result).replace(" | ", " · ")))
    for shape, rows in _by_shape(result):
        out += ["", f"### {text(shape)} ({text(rows[0].dtype)}) {_floor_line(rows)}".rstrip(), ""]
        table = [[cells[i] for i in keep] for cells in (_markdown_cells(result, r) for r in rows)]
        out.append(md_table([heads[i] for i in keep], table))
    needs_gpu = list(dict.fromkeys(r.variant for r in result.rows if r.status == "needs_gpu"))
    footer = list(result.notes)
    if needs_gpu:
        footer.append(f"needs GPU (not run on this machine): {', '.join(needs_gpu)}")
    if any(r.host_bound for r in result.rows):
        footer.append(f"{HOST_BOUND}: {dict(MARKS)[HOST_BOUND]}")
    if footer:
        out += [""] + [f"- {text(line)}" for line in footer]
    return "\n".join(out)
