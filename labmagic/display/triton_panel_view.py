"""Rendering of a Triton kernel's compile panel (:class:`labmagic.analysis.triton_panel.TritonPanel`).

The resource, occupancy, instruction-mix and diff lines are the CUDA panel's (:mod:`.panel_view`), so both
panels read the same. The IRs are long: the text form prints the first ``max_lines`` lines of each stage
asked for, the HTML form folds each in ``<details>``.
"""

from __future__ import annotations

import html

from .panel_view import diff_lines, mix_items, occupancy_line, resources_line

#: Display names of the stages.
STAGE_TITLES = {"ttir": "TTIR", "ttgir": "TTGIR", "llir": "LLVM IR", "ptx": "PTX", "sass": "SASS"}

#: Lines of one stage the HTML form holds (a long LLVM IR would make the notebook heavy).
HTML_MAX_LINES = 2000


def header(p) -> str:
    return f"== {p.label} [{p.arch}] | {p.num_warps * 32} threads/block =="


def mix_line(p) -> str:
    items = mix_items(p.mix)
    return "instruction mix (static): " + (" | ".join(
        f"{key} {count}" + (f" ({widths})" if widths else "") for key, _, count, widths in items) or "none of note")


def spill_line(p) -> str:
    if not p.spills:
        return ""
    where = ", ".join(map(str, p.kernel.local_memory_lines))
    return f"local memory: {len(p.spills)} LDL/STL instructions" + (f" at kernel lines {where}" if where else "")


def stage_lines(text: str, limit: int) -> tuple[list[str], int]:
    """The first ``limit`` lines of ``text`` and how many were left out."""
    lines = text.splitlines()
    return lines[:limit], max(0, len(lines) - limit)


def summary_lines(p) -> list[str]:
    lines = [header(p), resources_line(p.kernel), occupancy_line(p.kernel), mix_line(p)]
    lines += [line for line in (spill_line(p), p.kernel.note) if line]
    if p.comparison is not None:
        lines.extend(diff_lines(p.comparison))
    return lines


def render_text(p) -> str:
    lines = summary_lines(p)
    for stage in p.show:
        shown, left = stage_lines(p.text(stage), p.max_lines)
        lines.append(f"{STAGE_TITLES[stage]}" + (f" (first {len(shown)} lines, {left} more):" if left else ":"))
        lines += [f"  {line}" for line in shown]
    if not p.show:
        lines.append("IRs: " + ", ".join([*p.irs, "sass"]) + " (ir='ttgir,ptx,sass' shows them; .text('ptx') has all)")
    return "\n".join(lines)


def _diff_html(d) -> str:
    changed = d.changed
    head = f"<p>diff vs <code>{html.escape(d.before)}</code>: {len(changed) if changed else 'no'} change(s)</p>"
    if not changed:
        return head
    rows = "".join(f"<tr><td>{html.escape(r.metric)}</td><td>{html.escape(str(r.before))}</td>"
                   f"<td>{html.escape(str(r.after))}</td><td>{html.escape(r.delta)}</td></tr>" for r in changed)
    return (head + "<table class='labmagic-diff'><tr><th>metric</th><th>before</th><th>after</th><th>delta</th></tr>"
            f"{rows}</table>")


def render_html(p) -> str:
    parts = [f"<h4 style='margin:0.4em 0'><code>{html.escape(p.label)}</code> <small>[{html.escape(p.arch)}, "
             f"{p.num_warps * 32} threads/block]</small></h4>",
             f"<div>{html.escape(resources_line(p.kernel))}</div>",
             f"<div>{html.escape(occupancy_line(p.kernel))}</div>"]
    items = mix_items(p.mix)
    if items:
        rows = "".join(f"<tr><td><code>{html.escape(key)}</code></td><td>{count}</td><td>{html.escape(widths)}</td>"
                       f"<td>{html.escape(label)}</td></tr>" for key, label, count, widths in items)
        parts.append("<table class='labmagic-mix'><tr><th>SASS</th><th>static count</th><th>widths</th>"
                     f"<th>meaning</th></tr>{rows}</table>")
    for line in (spill_line(p), p.kernel.note):
        if line:
            parts.append(f"<div style='color:#b00020'>{html.escape(line)}</div>")
    if p.comparison is not None:
        parts.append(_diff_html(p.comparison))
    for stage in [*p.irs, "sass"]:
        shown, left = stage_lines(p.text(stage), HTML_MAX_LINES)
        more = f"\n... {left} more lines" if left else ""
        parts.append(f"<details{' open' if stage in p.show else ''}><summary>{STAGE_TITLES[stage]}</summary>"
                     f"<pre>{html.escape(chr(10).join(shown) + more)}</pre></details>")
    return ("<div class='labmagic-triton-panel' style='font-family:monospace;font-size:90%'>"
            + "".join(parts) + "</div>")
