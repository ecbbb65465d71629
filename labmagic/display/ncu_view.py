"""How a ``%bench --nsight`` cross-check looks: CUDA-event and Nsight Compute medians side by side, their ratio
and a verdict per row, as plain text and HTML."""

from __future__ import annotations

import html

COLUMNS = ("variant", "shape", "events ms", "nsight ms", "ratio", "kernels/call", "verdict")


def _num(value, fmt: str = ".4g") -> str:
    return "-" if value is None else format(value, fmt)


def _cells(row) -> list[str]:
    verdict = row.verdict + (f": {row.note}" if row.note else "")
    return [row.variant, row.shape, _num(row.event_ms), _num(row.nsight_ms), _num(row.ratio, ".3f"),
            _num(row.kernels, "d"), verdict]


def title(check) -> str:
    return (f"Nsight Compute cross-check: {check.chapter} on {check.device}, median of {check.iters} calls "
            "(each call: sum of its kernels' gpu__time_duration.sum); ratio = events / nsight")


def summary(check) -> str:
    judged = [r for r in check.rows if r.judged]
    worst = check.worst_ratio
    text = (f"claim: {check.claim}; {sum(1 for r in judged if r.verdict == 'agrees')} of {len(judged)} judged "
            "rows agree")
    return text + (f"; worst ratio {worst:.3f}" if worst is not None else "")


def check_text(check) -> str:
    table = [list(COLUMNS)] + [_cells(r) for r in check.rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS) - 1)]
    lines = [title(check)]
    for line in table:
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
        lines.append("  ".join(cells + [line[-1]]).rstrip())
    lines.append(summary(check))
    lines += list(check.notes)
    if check.csv_path:
        lines.append(f"saved {check.csv_path}")
    return "\n".join(lines)


def check_html(check) -> str:
    parts = [f"<div class='labmagic-nsight'><p><b>{html.escape(title(check))}</b></p>",
             "<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS) + "</tr></thead><tbody>"]
    for row in check.rows:
        style = ' style="color:#b00"' if row.judged and row.verdict != "agrees" else ""
        parts.append(f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(row)) + "</tr>")
    parts.append("</tbody></table>")
    for line in [summary(check), *check.notes] + ([f"saved {check.csv_path}"] if check.csv_path else []):
        parts.append(f"<p><small>{html.escape(line)}</small></p>")
    parts.append("</div>")
    return "\n".join(parts)
