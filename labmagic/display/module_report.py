"""The one-line-per-kernel resource report shown under a ``%%cuda_kernel`` cell."""

from __future__ import annotations

import html

from ..compiler.resources import Resources
from .units import small_bytes


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
    width = max(len(name) for name in module.kernels)
    return "\n".join(kernel_line(name.ljust(width), k.resources) for name, k in module.kernels.items())


def module_html(module) -> str:
    if not module.kernels:
        return f"<pre>{html.escape(module_text(module))}</pre>"
    rows = []
    for name, kernel in module.kernels.items():
        res = kernel.resources
        if res is None:
            rows.append(f"<tr><td><code>{html.escape(name)}</code></td><td colspan=5>no resource report</td></tr>")
            continue
        cells = []
        for label, value, alarming in resource_fields(res):
            style = ' style="color:#b00020;font-weight:bold"' if alarming else ""
            cells.append(f"<td{style}>{label} {html.escape(value)}</td>")
        rows.append(
            f"<tr><td><code>{html.escape(name)}</code></td><td>{html.escape(res.arch)}</td>{''.join(cells)}</tr>"
        )
    return (
        '<table class="labmagic-resources" style="font-family:monospace;font-size:90%">'
        + "".join(rows)
        + "</table>"
    )
