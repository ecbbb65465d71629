"""How a ``%sanitize`` result looks: compute-sanitizer's findings with their cell lines, as plain text and HTML."""

from __future__ import annotations

import html


def finding_lines(f) -> list[str]:
    count = f" (x{f.count})" if f.count > 1 else ""
    lines = [f"{f.severity.upper()}: {f.kind}{count}"]
    if f.kernel or f.line is not None:
        lines.append(f"  {f.where}")
    if f.source_line:
        lines.append(f"  {f.line:>4} | {f.source_line}")
    if f.thread:
        lines.append(f"  first seen: thread ({f.thread}) in block ({f.block})")
    lines.extend(f"  {d}" for d in f.details[:3])
    return lines


def sanitize_text(result) -> str:
    head = f"compute-sanitizer {result.tool}: {result.chapter} / {result.variant} at {result.shape}"
    if result.clean:
        return f"{head}: clean (0 errors)"
    device = [f for f in result.findings if f.severity != "api"]
    api = [f for f in result.findings if f.severity == "api"]
    n = result.errors if result.errors is not None else len(device)
    lines = [f"{head}: {n} error(s) in {len(device)} place(s)"]
    for f in device + api:
        lines.extend(finding_lines(f))
    if result.child_error and not device:
        lines.append(f"the variant did not finish: {result.child_error}")
    if result.errors is None:
        lines.append("(no sanitizer summary: the run was cut short; see .log)")
    return "\n".join(lines)


def sanitize_html(result) -> str:
    text = sanitize_text(result)
    color = "#1b7a1b" if result.clean else "#b00020"
    first, _, rest = text.partition("\n")
    return (f"<div class='labmagic-sanitize'><p style='color:{color};font-weight:bold'>{html.escape(first)}</p>"
            + (f"<pre>{html.escape(rest)}</pre>" if rest else "") + "</div>")
