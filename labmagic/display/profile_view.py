"""How a ``%ncu`` result looks: each kernel's Nsight Compute summary, as plain text (papermill logs, terminals,
``labmagic profile``) and HTML."""

from __future__ import annotations

import html
from pathlib import Path

from ..paths import repo_root


def _si(value, unit: str, digits: int = 3) -> str:
    if value is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def _time(seconds) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.2f} us"


def _pct(value) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _count(value) -> str:
    return "-" if value is None else _si(value, "").strip()


def shown_path(path) -> str:
    """``path`` relative to the checkout when it lies inside it (a published log then names no machine's
    folders), else as given."""
    path = Path(path)
    if path.is_absolute():
        root = repo_root()
        for candidate in (path, path.resolve()):
            if candidate.is_relative_to(root):
                return candidate.relative_to(root).as_posix()
    return str(path)


def kernel_lines(k) -> list[str]:
    lines = [f"kernel {k.name}" + (f"  grid {k.grid} block {k.block}" if k.grid else "")]
    lines.append(f"  duration {_time(k.duration_s)} | SM {_pct(k.sm_pct)} | memory {_pct(k.memory_pct)} | "
                 f"DRAM {_pct(k.dram_pct)} of peak")
    lines.append(f"  DRAM read {_si(k.dram_read, 'B')}, written {_si(k.dram_write, 'B')} | "
                 f"L1 hit {_pct(k.l1_hit_pct)} | L2 hit {_pct(k.l2_hit_pct)}")
    limiter = k.occupancy_limiter
    regs = k.registers
    lines.append(f"  occupancy achieved {_pct(k.achieved_occupancy_pct)} / theoretical "
                 f"{_pct(k.theoretical_occupancy_pct)}" + (f" (limiter: {limiter})" if limiter else "")
                 + (f" | {int(regs)} registers/thread" if regs is not None else ""))
    stalls = k.stalls()
    conflicts = k.bank_conflicts
    lines.append("  top stalls: " + (", ".join(f"{r} {v:.2f}" for r, v in stalls) or "-")
                 + f" | shared bank conflicts {_count(conflicts)}")
    mix = k.instruction_mix()
    if mix:
        lines.append("  executed: " + ", ".join(
            f"{name} {value:g}" if "bytes/thread" in name else f"{name} {_count(value)}"
            for name, value in mix.items()))
    return lines


def traffic_line(result) -> str | None:
    """Measured DRAM bytes per call against the chapter's prediction: extra traffic shows here."""
    measured = result.dram_bytes
    if measured is None:
        return None
    text = f"DRAM traffic per call: {_si(measured, 'B', 4)}"
    if result.nbytes:
        text += f" measured vs {_si(result.nbytes, 'B', 4)} predicted ({100 * (measured / result.nbytes - 1):+.1f}%)"
    return text


def profile_text(result) -> str:
    head = f"ncu: {result.chapter} / {result.variant} at {result.shape}"
    if result.iters > 1:
        head += f" ({result.iters} calls profiled)"
    lines = [head]
    if (t := traffic_line(result)):
        lines.append(t)
    for k in result.kernels:
        lines.extend(kernel_lines(k))
    if result.report:
        lines.append(f"full report: {shown_path(result.report)}")
    return "\n".join(lines)


def profile_html(result) -> str:
    rows = []
    for k in result.kernels:
        stalls = ", ".join(f"{r} {v:.2f}" for r, v in k.stalls()) or "-"
        mix = ", ".join(f"{n} {v:g}" if "bytes/thread" in n else f"{n} {_count(v)}"
                        for n, v in k.instruction_mix().items()) or "-"
        cells = [k.name, _time(k.duration_s), _pct(k.sm_pct), _pct(k.memory_pct), _pct(k.dram_pct),
                 _si(k.dram_read, "B"), _si(k.dram_write, "B"), _pct(k.l1_hit_pct), _pct(k.l2_hit_pct),
                 f"{_pct(k.achieved_occupancy_pct)} / {_pct(k.theoretical_occupancy_pct)} "
                 f"({k.occupancy_limiter or '-'})",
                 "-" if k.registers is None else str(int(k.registers)), stalls, _count(k.bank_conflicts), mix]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    header = ["kernel", "duration", "SM % SOL", "memory % SOL", "DRAM % SOL", "DRAM read", "DRAM write", "L1 hit",
              "L2 hit", "occupancy achieved / theoretical (limiter)", "regs", "top stalls", "bank conflicts",
              "executed"]
    traffic = traffic_line(result)
    return ("<div class='labmagic-ncu' style='font-size:90%'>"
            f"<p><b>ncu</b>: {html.escape(result.chapter)} / <code>{html.escape(result.variant)}</code> at "
            f"{html.escape(result.shape)}</p>"
            + (f"<p>{html.escape(traffic)}</p>" if traffic else "")
            + "<table><tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>" + "".join(rows) + "</table>"
            + (f"<p style='font-size:85%'>full report: <code>{html.escape(shown_path(result.report))}</code></p>"
               if result.report else "")
            + "</div>")
