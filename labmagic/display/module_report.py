"""The one-line-per-kernel resource report shown under a ``%%cuda_kernel`` cell.

The HTML table reads as the text does once its tags are stripped (``vecadd [sm_90] regs 12 | smem 0 B | ...``):
its cells are separated by spaces and ``|``, not only by the table's layout. It sits at the left of the output,
not centred as notebook front ends centre tables by default.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from ..compiler.binding import display_name
from .units import small_bytes

if TYPE_CHECKING:
    from ..compiler.resources import Resources


def resource_fields(res: Resources) -> list[tuple[str, str, bool]]:
    """(label, value, alarming) in reading order."""
    spill = f"{res.spill_stores} B st / {res.spill_loads} B ld"
    return [
        ("regs", str(res.registers), False),
        ("smem", small_bytes(res.smem_static), False),
        ("stack", small_bytes(res.stack_frame), False),
        ("spills", spill, res.spills),
    ]


def kernel_line(name: str, res: Resources | None) -> str:
    if res is None:
        return f"{name}: no resource report (not an entry point in this compile)"
    parts = [f"{label} {value}" for label, value, _ in resource_fields(res)]
    warn = "  << SPILLS to local memory" if res.spills else ""
    return f"{name} [{res.arch}]  " + " | ".join(parts) + warn


def module_text(module) -> str:
    if not module.kernels:
        return "compiled, but no kernel is callable: declare kernels extern \"C\" or name template instances with -n"
    names = {expression: display_name(expression) for expression in module.kernels}
    width = max(len(name) for name in names.values())
    return "\n".join(kernel_line(names[e].ljust(width), k.resources) for e, k in module.kernels.items())


def module_html(module) -> str:
    if not module.kernels:
        return f"<pre>{html.escape(module_text(module))}</pre>"
    rows = []
    for expression, kernel in module.kernels.items():
        name, res = display_name(expression), kernel.resources
        if res is None:
            rows.append(f"<tr><td><code>{html.escape(name)}</code></td> <td colspan=5>no resource report</td></tr>")
            continue
        cells = []
        for i, (label, value, alarming) in enumerate(resource_fields(res)):
            style = ' style="color:#b00020;font-weight:bold"' if alarming else ""
            sep = "| " if i else ""
            cells.append(f"<td{style}>{sep}{label} {html.escape(value)}</td>")
        rows.append(
            f"<tr><td><code>{html.escape(name)}</code></td> <td>[{html.escape(res.arch)}]</td> {' '.join(cells)}</tr>"
        )
    return (
        '<table class="labmagic-resources" '
        'style="font-family:monospace;font-size:90%;text-align:left;margin-left:0;margin-right:auto">'
        + "\n".join(rows)
        + "</table>"
    )
