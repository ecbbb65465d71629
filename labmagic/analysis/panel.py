"""The compile panel: per kernel, what the compiler made of it, and what changed since the last rung.

``%%cuda_kernel --panel`` calls :func:`build_panel` with the cell's
:class:`~labmagic.compiler.compile_result.CompileResult`. Per kernel it gathers, all without a GPU:

- the compiler's resource report (registers, shared memory, stack, spills) from ``ptxas -v``;
- the SASS with the cell's lines interleaved (:mod:`labmagic.analysis.sass`), and the lines of the book's headers
  where code from them was not inlined into the cell; optionally the PTX;
- the static instruction mix: load/store widths, shared and local memory traffic, FMA and tensor-core
  instructions, barriers;
- theoretical occupancy on the target architecture (:mod:`labmagic.occupancy`) at the block size the
  reader launches with (``block_size``), else the kernel's ``__launch_bounds__``, else 256 (said so),
  plus a sweep over block sizes so the reader sees which launch shapes the resources allow;
- a diff against ``previous`` (the last compile of the same kernel, or another kernel via ``vs``):
  the "why did this rung help" table.

Rendering lives in :mod:`labmagic.display.panel_view`; this module only computes.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from typing import Any

from .. import occupancy as occ
from ..compiler.includes import file_sha256
from ..errors import LabError
from . import sass

#: Block size assumed for occupancy when neither the caller nor ``__launch_bounds__`` gives one.
DEFAULT_BLOCK_SIZE = 256

#: Mix rows compared by the diff (in order); width-split keys such as ``LDG.128`` are added when present.
DIFF_MIX_KEYS = ("LDG", "STG", "LDGSTS", "UTMALDG", "LDS", "LDSM", "STS", "LDL", "STL", "ATOM",
                 "FFMA", "HFMA2", "DFMA", "HMMA", "IMMA", "HGMMA", "BAR", "SHFL")


@dataclasses.dataclass
class DiffRow:
    metric: str
    before: Any
    after: Any

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def delta(self) -> str:
        """``+8``, ``-25.0`` for numbers, ``a -> b`` otherwise, empty when unchanged."""
        if not self.changed:
            return ""
        if isinstance(self.before, (int, float)) and isinstance(self.after, (int, float)):
            d = self.after - self.before
            return f"{d:+.0f}" if float(d).is_integer() else f"{d:+.1f}"
        return f"{self.before} -> {self.after}"


@dataclasses.dataclass
class KernelDiff:
    """What changed from ``before`` (a previous compile or another kernel) to ``after``."""

    before: str
    after: str
    rows: list[DiffRow]

    @property
    def changed(self) -> list[DiffRow]:
        return [r for r in self.rows if r.changed]

    def row(self, metric: str) -> DiffRow | None:
        return next((r for r in self.rows if r.metric == metric), None)


@dataclasses.dataclass
class KernelPanel:
    name: str  # what the reader wrote: the name expression, or the extern "C" name
    symbol: str  # the lowered (mangled) name in the CUBIN
    arch: str
    resources: Any  # labmagic.compiler.resources.Resources, or None when ptxas said nothing of this kernel
    instructions: list[sass.Instruction]
    mix: Counter
    block_size: int
    block_size_from: str  # "given", "__launch_bounds__" or "assumed"
    dynamic_smem: int
    occupancy: occ.Occupancy | None
    sweep: list[occ.Occupancy]
    sass_text: str
    ptx: str | None
    #: Source lines holding local-memory (LDL/STL) instructions: where spills or local arrays live.
    local_memory_lines: list[int]
    diff: KernelDiff | None = None
    #: Why part of the panel is missing (e.g. the disassembler is not installed).
    note: str = ""

    @property
    def registers(self) -> int:
        return getattr(self.resources, "registers", 0)

    @property
    def smem_static(self) -> int:
        return getattr(self.resources, "smem_static", 0)

    def metrics(self, block_size: int | None = None) -> dict[str, Any]:
        """The numbers a diff compares, by display name; occupancy at ``block_size`` (default: this
        kernel's), so two kernels are compared at the same launch shape."""
        r = self.resources
        out: dict[str, Any] = {
            "registers/thread": self.registers,
            "static smem (B)": self.smem_static,
            "stack frame (B)": getattr(r, "stack_frame", 0),
            "spill stores (B)": getattr(r, "spill_stores", 0),
            "spill loads (B)": getattr(r, "spill_loads", 0),
        }
        block = block_size or self.block_size
        here = self.occupancy if block == self.block_size else _occupancy_at(self, block)
        if here is not None:
            out[f"occupancy @{block} (%)"] = round(here.percent, 1)
            out["occupancy limiter"] = here.limiter
        out["SASS instructions"] = len(sass.trim_padding(self.instructions))
        return out


@dataclasses.dataclass
class Panel:
    """The panel of one compile: one :class:`KernelPanel` per kernel, in source order."""

    kernels: list[KernelPanel]
    arch: str
    show_sass: bool = True
    show_ptx: bool = False

    def __getitem__(self, name: str) -> KernelPanel:
        for k in self.kernels:
            if name in (k.name, k.symbol):
                return k
        raise KeyError(f"no kernel {name!r} in this panel; kernels: {', '.join(k.name for k in self.kernels)}")

    def _repr_html_(self) -> str:
        from ..display.panel_view import render_html

        return render_html(self)

    def __repr__(self) -> str:
        from ..display.panel_view import render_text

        return render_text(self)


def kernel_names(result) -> list[tuple[str, str]]:
    """(display name, symbol) of each kernel in ``result``, in the order the source declares them.

    Symbols come from the ptxas report (entry functions only); the display name is the name
    expression that produced a symbol (``tile<64>``), else the symbol itself (``extern "C"``).
    """
    by_symbol = {sym: expr for expr, sym in (getattr(result, "lowered", None) or {}).items()}
    symbols = list((getattr(result, "resources", None) or {}).keys())
    source = getattr(result, "source", "") or ""

    def position(sym: str) -> int:
        name = by_symbol.get(sym, sym)
        bare = re.split(r"[<(]", name, maxsplit=1)[0]
        m = re.search(rf"\b{re.escape(bare)}\s*\(", source)
        return m.start() if m else len(source)

    symbols.sort(key=position)
    return [(by_symbol.get(sym, sym), sym) for sym in symbols]


def kernel_panels(result, block_size: int | None = None, dynamic_smem: int = 0,
                  instructions: dict[str, list[sass.Instruction]] | None = None) -> list[KernelPanel]:
    """A :class:`KernelPanel` per kernel of ``result`` (no diff)."""
    functions, note = instructions, ""
    if functions is None:
        try:
            functions = sass.disassemble(result.cubin)
        except (RuntimeError, LabError) as exc:  # no nvdisasm/cuobjdump, or one too old for this arch
            functions, note = {}, f"no SASS: {exc}"
    names = kernel_names(result)
    if not names:  # no ptxas report: fall back to the functions in the CUBIN
        names = [(sym, sym) for sym in functions]
    arch = result.arch
    first_line = getattr(result, "first_line", 1)
    headers = header_sources(result)
    panels = []
    for name, symbol in names:
        res = (result.resources or {}).get(symbol)
        instrs = functions.get(symbol, [])
        if block_size:
            block, source = block_size, "given"
        elif (bounds := sass.launch_bounds(result.ptx, symbol)):
            block, source = bounds, "__launch_bounds__"
        else:
            block, source = DEFAULT_BLOCK_SIZE, "assumed"
        regs = getattr(res, "registers", 0)
        smem = getattr(res, "smem_static", 0) + dynamic_smem
        try:
            here = occ.occupancy(arch, block, regs, smem)
            sweep = occ.sweep(arch, regs, smem)
        except KeyError:  # an architecture without occupancy rules (sm_75, sm_100...): skip that part
            here, sweep = None, []
        panels.append(KernelPanel(
            name=name, symbol=symbol, arch=arch, resources=res, instructions=instrs,
            mix=sass.instruction_mix(instrs), block_size=block, block_size_from=source,
            dynamic_smem=dynamic_smem, occupancy=here, sweep=sweep,
            sass_text=sass.interleave(instrs, result.source, first_line, headers=headers),
            ptx=sass.kernel_ptx(result.ptx, symbol),
            local_memory_lines=sorted(set(sass.lines_with(instrs, "LDL")) | set(sass.lines_with(instrs, "STL"))),
            note=note,
        ))
    return panels


def header_sources(result) -> dict[str, tuple[str, list[str] | None]]:
    """The real path of each header ``result`` read -> (its name, its lines where they may be shown): the book's own
    headers while they still hold the text the compile read; None for any other file, whose lines stay out."""
    sources = {}
    for header in getattr(result, "headers", ()):
        lines = None
        if header.project and file_sha256(header.path) == header.sha256:
            try:
                with open(header.path, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read().splitlines()
            except OSError:
                pass
        sources[os.path.realpath(header.path)] = (header.name, lines)
    return sources


def diff(before: KernelPanel, after: KernelPanel) -> KernelDiff:
    """Registers, shared memory, spills, occupancy (both at ``after``'s block size) and the
    instruction mix, before and after."""
    mb, ma = before.metrics(after.block_size), after.metrics()
    rows = [DiffRow(key, mb.get(key), ma.get(key)) for key in dict.fromkeys([*mb, *ma])]
    keys = [k for k in DIFF_MIX_KEYS if before.mix.get(k) or after.mix.get(k)]
    widths = sorted(k for k in {*before.mix, *after.mix} if "." in k)
    for key in keys:
        rows.append(DiffRow(key, before.mix.get(key, 0), after.mix.get(key, 0)))
        rows.extend(DiffRow(w, before.mix.get(w, 0), after.mix.get(w, 0)) for w in widths if w.split(".")[0] == key)
    return KernelDiff(before=before.name, after=after.name, rows=rows)


def _occupancy_at(panel: KernelPanel, block_size: int) -> occ.Occupancy | None:
    try:
        return occ.occupancy(panel.arch, block_size, panel.registers, panel.smem_static + panel.dynamic_smem)
    except KeyError:
        return None


def _pair(kernel: KernelPanel, previous: list[KernelPanel], vs: str | None,
          fallback: str | None = None) -> KernelPanel | None:
    """The kernel of ``previous`` to compare ``kernel`` with: the one named ``vs``; else the same
    symbol; else the one named ``fallback``; else, when ``previous`` holds a single kernel, that one."""
    def named(name):
        return next((p for p in previous if name in (p.name, p.symbol) or p.name.split("<")[0] == name), None)

    if vs:
        return named(vs) or (previous[0] if len(previous) == 1 else None)
    same = next((p for p in previous if p.symbol == kernel.symbol), None)
    if same is not None:
        return same
    if fallback and (match := named(fallback)) is not None:
        return match
    return previous[0] if len(previous) == 1 else None


def build_panel(result, block_size: int | None = None, previous=None, *, vs: str | None = None,
                dynamic_smem: int = 0, show_sass: bool = True, show_ptx: bool = False) -> Panel:
    """The compile panel of ``result`` (a :class:`~labmagic.compiler.compile_result.CompileResult`).

    ``block_size``: threads per block the kernel is launched with (for occupancy). ``previous``: an
    earlier CompileResult to diff against, or ``(CompileResult, symbol)``; kernels are paired by ``vs``
    (a kernel name or symbol in ``previous``), else by symbol, else with ``symbol``, else one-to-one
    when ``previous`` has a single kernel.
    ``dynamic_smem``: bytes of dynamic shared memory per block, which the compiler cannot know.
    ``show_sass``/``show_ptx``: whether the rendering includes the disassembly and the PTX.
    Comparing a compile with itself (an unchanged cell re-run) gives a diff with no changes.
    """
    panels = kernel_panels(result, block_size, dynamic_smem)
    fallback = None
    if isinstance(previous, tuple):  # (CompileResult, symbol): the magic's history entry
        previous, fallback = previous
    if previous is not None:
        before = kernel_panels(previous, block_size, dynamic_smem)
        for kp in panels:
            match = _pair(kp, before, vs, fallback)
            if match is not None:
                kp.diff = diff(match, kp)
    return Panel(kernels=panels, arch=result.arch, show_sass=show_sass, show_ptx=show_ptx)
