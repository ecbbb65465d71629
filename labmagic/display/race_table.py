"""How a :class:`labmagic.benchmark.race.BenchResult` looks: one table per shape, HTML and plain text.

Both renderings carry the same facts in the same order: the GPU and timer named in a header line
(or, without a GPU, the statement that nothing was measured and which spec the prediction uses), then
per shape a table whose marks are explained in a footer: ``*`` allocator retries during the calls,
``!`` faster than the physical floor (suspicious, not a win). The plain text reads well in a papermill
log, a terminal and a diff, so it has no colours and fixed column widths.
"""

from __future__ import annotations

import base64
import html

MEASURED_COLUMNS = ["variant", "backend", "status", "median ms", "min-max ms", "TFLOP/s", "GB/s", "% SOL",
                    "% ceiling", "vs ref", "floor ms", "peak mem", "sdpa", "note"]
PREDICTED_COLUMNS = ["variant", "backend", "status", "floor ms", "GB/s at floor", "TFLOP/s at floor", "note"]


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


def _cells(result, row) -> list[str]:
    if not result.measured:
        floor = row.predicted_ms
        # The floor's own throughput: what a perfect kernel would reach on the target.
        gbps = row.nbytes / (floor * 1e-3) / 1e9 if floor and row.nbytes else None
        tflops = row.flops / (floor * 1e-3) / 1e12 if floor and row.flops else None
        return [row.variant, row.backend, _status(row), _num(floor, 4), _num(gbps), _num(tflops), _note(row)]
    median = _num(row.ms_median, 4)
    if row.ms_median is not None:
        median += "*" if row.alloc_retries else ""
        median += "!" if row.below_floor else ""
    spread = f"{_num(row.ms_min, 4)}-{_num(row.ms_max, 4)}" if row.ms_min is not None else "-"
    vs_ref = f"{row.vs_ref:.2f}x" if row.vs_ref else "-"
    note = _note(row)
    if row.alloc_retries:
        note = (note + "; " if note else "") + f"{row.alloc_retries} allocator retries"
    if row.below_floor:
        note = (note + "; " if note else "") + "faster than the floor: check the kernel and nbytes/flops"
    return [row.variant, row.backend, _status(row), median, spread, _num(row.tflops), _num(row.gbps),
            _num(row.sol_pct), _num(row.ceiling_pct), vs_ref, _num(row.predicted_ms, 4),
            _bytes(row.peak_mem_bytes), row.sdpa_backend, note]


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


def _footer(result) -> list[str]:
    lines = list(result.notes)
    if result.measured:
        lines.append("* allocator retries during the calls   ! faster than the physical floor (suspicious)   "
                     "vs ref: reference time / variant time")
    return lines


def _by_shape(result):
    for shape in result.shapes:
        yield shape, [r for r in result.rows if r.shape == shape]


def _floor_line(rows) -> str:
    for r in rows:
        if r.predicted_ms:
            return f"floor {_num(r.predicted_ms, 4)} ms"
    return ""


def render_text(result) -> str:
    """Fixed-width tables, one per shape."""
    columns = MEASURED_COLUMNS if result.measured else PREDICTED_COLUMNS
    out = [header(result)]
    for shape, rows in _by_shape(result):
        table = [columns] + [_cells(result, r) for r in rows]
        widths = [max(len(line[i]) for line in table) for i in range(len(columns) - 1)]
        out.append("")
        out.append(f"shape {shape} ({rows[0].dtype})  {_floor_line(rows)}".rstrip())
        for line in table:
            cells = [c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
            out.append("  ".join(cells + [line[-1]]).rstrip())
    footer = _footer(result)
    if footer:
        out.append("")
        out.extend(footer)
    return "\n".join(out)


def render_html(result) -> str:
    """One HTML table per shape, then the plot (when something was measured)."""
    columns = MEASURED_COLUMNS if result.measured else PREDICTED_COLUMNS
    parts = [f'<div class="labmagic-bench"><p><b>{html.escape(header(result))}</b></p>']
    for shape, rows in _by_shape(result):
        parts.append(f"<p>shape <code>{html.escape(shape)}</code> ({html.escape(rows[0].dtype)}) "
                     f"{html.escape(_floor_line(rows))}</p>")
        parts.append('<table><thead><tr>' + "".join(f"<th>{html.escape(c)}</th>" for c in columns)
                     + "</tr></thead><tbody>")
        for r in rows:
            style = ' style="color:#b00"' if r.status not in ("ok", "predicted") else ""
            parts.append(f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(result, r)) + "</tr>")
        parts.append("</tbody></table>")
    for line in _footer(result):
        parts.append(f"<p><small>{html.escape(line)}</small></p>")
    if result.png:
        data = base64.b64encode(result.png).decode()
        parts.append(f'<img alt="{html.escape(result.chapter)} plots" src="data:image/png;base64,{data}"/>')
    parts.append("</div>")
    return "\n".join(parts)
