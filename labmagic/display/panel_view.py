"""Rendering of the compile panel (:class:`labmagic.analysis.panel.Panel`) as HTML and as plain text.

The text form is what a papermill log, a terminal and a git diff of an executed notebook show, so it
is complete on its own: resources, occupancy with its limiter, the instruction mix, the diff and the
SASS. The HTML form holds the same content, with the long parts (SASS, PTX) folded in ``<details>``; its parts
are separated by line breaks in the source, so its text with the tags stripped does not run together, and its
tables sit at the left (``_LEFT``), not centred as notebook front ends centre tables by default.
"""

from __future__ import annotations

import html

from ..analysis.sass import MIX_LABELS
from .units import small_bytes

_WIDTH_KEYS = ("LDG", "STG", "LDS", "STS", "LDL", "STL")


def mix_items(mix) -> list[tuple[str, str, int, str]]:
    """(key, meaning, count, widths) per category present: widths like ``2x128-bit, 1x32-bit``."""
    items = []
    for key, label in MIX_LABELS.items():
        count = mix.get(key, 0)
        if not count:
            continue
        widths = ""
        if key in _WIDTH_KEYS:
            parts = sorted(((int(k.split(".")[1]), v) for k, v in mix.items() if k.startswith(key + ".")), reverse=True)
            widths = ", ".join(f"{v}x{w}-bit" for w, v in parts)
        items.append((key, label, count, widths))
    return items


def resources_line(k) -> str:
    r = k.resources
    if r is None:
        return "no ptxas resource report for this kernel"
    spills = f"spills {r.spill_stores} B st / {r.spill_loads} B ld"
    if r.spill_stores or r.spill_loads:
        spills += "  << SPILLS"
    tail = "spills and barriers: not recorded in a CUBIN" if r.from_cubin else f"{spills} | barriers {r.barriers}"
    return (f"regs {r.registers} | smem {small_bytes(r.smem_static)}"
            + (f" + {small_bytes(k.dynamic_smem)} dynamic" if k.dynamic_smem else "")
            + f" | stack {small_bytes(r.stack_frame)} | {tail}")


def occupancy_line(k) -> str:
    if k.occupancy is None:
        return f"occupancy: no rules for {k.arch}"
    how = {"given": "", "__launch_bounds__": " (from __launch_bounds__)",
           "assumed": " (block size assumed; pass the launch's block size)"}[k.block_size_from]
    return f"occupancy: {k.occupancy.summary()}{how}"


def sweep_line(k) -> str:
    cells = []
    for o in k.sweep:
        if o.blocks_per_sm == 0:
            cells.append(f"{o.block_size}: cannot launch")
        else:
            cells.append(f"{o.block_size}: {o.percent:.0f}%" + (f" ({o.limiter})" if o.limiters else ""))
    return "by block size: " + " | ".join(cells)


def _fmt(value) -> str:
    return "-" if value is None else str(value)


def diff_lines(d) -> list[str]:
    changed = d.changed
    head = f"diff vs {d.before}: " + (f"{len(changed)} changed" if changed else "no change")
    if not changed:
        return [head]
    width = max(len(r.metric) for r in changed)
    lines = [head, f"  {'':<{width}}  {'before':>10}  {'after':>10}  {'delta':>8}"]
    for r in changed:
        lines.append(f"  {r.metric:<{width}}  {_fmt(r.before):>10}  {_fmt(r.after):>10}  {r.delta:>8}")
    same = [r.metric for r in d.rows if not r.changed]
    if same:
        lines.append("  unchanged: " + ", ".join(same))
    return lines


def kernel_text(k, show_sass: bool, show_ptx: bool) -> str:
    lines = [f"== {k.name} [{k.arch}]" + (f"  ({k.symbol})" if k.symbol != k.name else "") + " ==",
             resources_line(k), occupancy_line(k)]
    if k.sweep:
        lines.append(sweep_line(k))
    items = mix_items(k.mix)
    lines.append("instruction mix (static): " + (" | ".join(
        f"{key} {count}" + (f" ({widths})" if widths else "") for key, _, count, widths in items) or "none of note"))
    if k.note:
        lines.append(k.note)
    if k.local_memory_lines:
        lines.append("local memory (LDL/STL) at cell lines: " + ", ".join(map(str, k.local_memory_lines)))
    if k.diff is not None:
        lines.extend(diff_lines(k.diff))
    if show_sass:
        lines.append("SASS (cell lines interleaved):")
        lines.append(k.sass_text or "  (no SASS for this kernel)")
    if show_ptx:
        lines.append("PTX:")
        lines.append(k.ptx or "  (no PTX kept for this compile)")
    return "\n".join(lines)


def render_text(panel) -> str:
    if not panel.kernels:
        return f"compile panel [{panel.arch}]: no kernels"
    return "\n\n".join(kernel_text(k, panel.show_sass, panel.show_ptx) for k in panel.kernels)


# --- HTML ----------------------------------------------------------------------------------------

_RED = "color:#b00020;font-weight:bold"
_LEFT = "text-align:left;margin-left:0;margin-right:auto"
_GREEN = "color:#1b7a1b"


def _e(value) -> str:
    return html.escape(_fmt(value))


def _diff_html(d) -> str:
    changed = d.changed
    if not changed:
        return f"<p>diff vs <code>{_e(d.before)}</code>: no change</p>"
    rows = "".join(
        f"<tr><td>{_e(r.metric)}</td><td>{_e(r.before)}</td><td>{_e(r.after)}</td><td>{_e(r.delta)}</td></tr>"
        for r in changed)
    same = ", ".join(r.metric for r in d.rows if not r.changed)
    return (f"<p>diff vs <code>{_e(d.before)}</code>:</p>"
            f'<table class="labmagic-diff" style="{_LEFT}">'
            "<tr><th>metric</th><th>before</th><th>after</th><th>delta</th></tr>"
            f"{rows}</table>" + (f"<p style='font-size:85%'>unchanged: {html.escape(same)}</p>" if same else ""))


def kernel_html(k, show_sass: bool, show_ptx: bool) -> str:
    r = k.resources
    spill_style = _RED if r is not None and (r.spill_stores or r.spill_loads) else ""
    parts = [f"<h4 style='margin:0.4em 0'><code>{_e(k.name)}</code> <small>[{_e(k.arch)}]</small></h4>",
             f"<div style='{spill_style}'>{_e(resources_line(k))}</div>"]
    if k.occupancy is not None:
        style = _GREEN if k.occupancy.percent >= 50 else _RED
        parts.append(f"<div style='{style}'>{_e(occupancy_line(k))}</div>")
    if k.sweep:
        parts.append(f"<div style='font-size:85%'>{_e(sweep_line(k))}</div>")
    items = mix_items(k.mix)
    if items:
        rows = "".join(
            f"<tr><td><code>{_e(key)}</code></td><td>{count}</td><td>{_e(widths)}</td><td>{_e(label)}</td></tr>"
            for key, label, count, widths in items)
        parts.append(f"<table class='labmagic-mix' style='{_LEFT}'>"
                     "<tr><th>SASS</th><th>static count</th><th>widths</th>"
                     f"<th>meaning</th></tr>{rows}</table>")
    if k.note:
        parts.append(f"<div>{_e(k.note)}</div>")
    if k.local_memory_lines:
        parts.append(f"<div style='{_RED}'>local memory (LDL/STL) at cell lines: "
                     f"{_e(', '.join(map(str, k.local_memory_lines)))}</div>")
    if k.diff is not None:
        parts.append(_diff_html(k.diff))
    if show_sass:
        parts.append(f"<details><summary>SASS with cell lines</summary><pre>{html.escape(k.sass_text)}</pre></details>")
    if show_ptx and k.ptx:
        parts.append(f"<details><summary>PTX</summary><pre>{html.escape(k.ptx)}</pre></details>")
    return f"<div class='labmagic-panel-kernel' style='margin-bottom:1em;{_LEFT}'>\n" + "\n".join(parts) + "\n</div>"


def render_html(panel) -> str:
    if not panel.kernels:
        return f"<p>compile panel [{html.escape(panel.arch)}]: no kernels</p>"
    body = "\n".join(kernel_html(k, panel.show_sass, panel.show_ptx) for k in panel.kernels)
    return f"<div class='labmagic-panel' style='font-family:monospace;font-size:90%;text-align:left'>{body}</div>"
