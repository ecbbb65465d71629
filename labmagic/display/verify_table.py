"""How a :class:`labmagic.benchmark.verify.VerifyResult` looks: one pass/fail table, HTML and plain text.

Both carry the same facts in the same order: a header naming the chapter, the check shapes and the device, a line
saying what ``err / tol`` is, one row per variant (status, worst error as a fraction of the tolerance, the shape it
failed at, why), then a footer that says once how many variants need a GPU (rather than a note on each of their
rows) and what the verdict is. The plain text has fixed columns and no colours, so it reads well in a terminal, a
papermill log and a diff.
"""

from __future__ import annotations

import html

from ..store.schema import ERROR, MISMATCH, NEEDS_GPU

#: ``err / tol``: the worst element's ``|out - ref| / (atol + rtol * |ref|)`` (labmagic.benchmark.checks), which
#: passes at or below 1: 0.03 is well inside the tolerance, 1.4 is 40% beyond it.
COLUMNS = ["variant", "backend", "status", "err / tol", "failed at", "reason"]
_LABELS = {NEEDS_GPU: "needs GPU", MISMATCH: "MISMATCH", ERROR: "ERROR"}


def _err(value) -> str:
    if value is None or value != value:
        return "-"
    return "inf" if value == float("inf") else f"{value:.3g}"


def _cells(row) -> list[str]:
    reason = "" if row.status == NEEDS_GPU else row.reason  # said once, in the footer
    return [row.variant, row.backend, _LABELS.get(row.status, row.status), _err(row.err_over_tol), row.shape or "-",
            reason]


def header(result) -> str:
    shapes = ", ".join(result.shapes) or "none"
    return f"{result.chapter}: correctness on check shapes {shapes} ({result.dtype}) on {result.device}"


def tolerance_line(result) -> str:
    """What ``err / tol`` is, with the tolerances the rows were held to."""
    held = f" with rtol={result.rtol:g}, atol={result.atol:g}" if result.rtol is not None else ""
    return f"err / tol: the worst |out - ref| / (atol + rtol |ref|){held}; pass at or below 1"


def footer(result) -> list[str]:
    lines = list(result.notes)
    counts: dict[str, int] = {}
    for r in result.rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    gpu = counts.get(NEEDS_GPU, 0)
    if gpu:
        names = ", ".join(r.variant for r in result.rows if r.status == NEEDS_GPU)
        lines.append(f"{gpu} variant{'s' if gpu != 1 else ''} need{'s' if gpu == 1 else ''} a GPU and "
                     f"{'were' if gpu != 1 else 'was'} not checked here: {names}")
    summary = ", ".join(f"{n} {_LABELS.get(s, s)}" for s, n in counts.items())
    if result.failed:
        verdict = "FAILED"
    elif result.checked:
        verdict = "passed"
    else:
        verdict = "nothing checked (every variant needs a GPU or was skipped)"
    lines.append(f"{verdict}: {summary}" if result.rows else verdict)
    return lines


def render_text(result) -> str:
    table = [COLUMNS] + [_cells(r) for r in result.rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS) - 1)]
    out = [header(result), tolerance_line(result), ""]
    for line in table:
        cells = [c.rjust(w) if i == 3 else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths))]
        out.append("  ".join(cells + [line[-1]]).rstrip())
    out.append("")
    out.extend(footer(result))
    return "\n".join(out)


def render_html(result) -> str:
    parts = [f'<div class="labmagic-verify"><p><b>{html.escape(header(result))}</b><br/>'
             f'<small>{html.escape(tolerance_line(result))}</small></p>',
             "<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS) + "</tr></thead><tbody>"]
    for r in result.rows:
        style = ' style="color:#b00"' if r.status in (MISMATCH, ERROR) else ""
        parts.append(f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(r)) + "</tr>")
    parts.append("</tbody></table>")
    parts += [f"<p><small>{html.escape(line)}</small></p>" for line in footer(result)]
    parts.append("</div>")
    return "\n".join(parts)
