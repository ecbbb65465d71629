"""The compile panel of a ``@triton.jit`` kernel: the Triton counterpart of ``%%cuda_kernel --panel``.

:func:`triton_panel` compiles the kernel for the target architecture without launching it
(:mod:`labmagic.compiler.triton_compile`, no GPU needed) and gathers what the compiler made of it:

- each IR as text (TTIR, TTGIR, LLVM IR, PTX) and the CUBIN's SASS (:mod:`.sass`);
- registers, stack and spills from ``ptxas -v``, and the shared memory Triton allocates per block;
- the static instruction mix and the local-memory (``LDL``/``STL``) instructions;
- theoretical occupancy at ``num_warps * 32`` threads per block (:mod:`labmagic.occupancy`);
- a diff against another Triton panel: :func:`labmagic.analysis.panel.diff`'s rows (registers, spills,
  occupancy, instruction counts) plus Triton's shared memory, ``num_warps``, ``num_stages`` and constexprs.

The per-kernel numbers live in a :class:`~labmagic.analysis.panel.KernelPanel`, so the CUDA panel's diff and
text pieces apply unchanged. Rendering is :mod:`labmagic.display.triton_panel_view`.
"""

from __future__ import annotations

import dataclasses

from .. import occupancy as occ
from ..compiler.triton_compile import IR_STAGES, TritonCompile, compile_triton
from ..errors import LabError
from . import panel, sass

#: What ``ir=`` may ask the rendering to show, in pipeline order.
SHOWABLE = (*IR_STAGES, "sass")


@dataclasses.dataclass
class TritonPanel:
    kernel: panel.KernelPanel
    compiled: TritonCompile
    #: Local-memory instructions in the SASS: spills, or arrays the compiler could not keep in registers.
    spills: list[sass.Instruction]
    #: What the rendering shows in full (subset of SHOWABLE); lines per IR in the text form.
    show: tuple[str, ...] = ()
    max_lines: int = 60
    comparison: panel.KernelDiff | None = None

    @property
    def name(self) -> str:
        return self.compiled.name

    @property
    def label(self) -> str:
        """``add[BLOCK=1024, warps=4, stages=3]``: what tells two compiles of one kernel apart."""
        consts = [f"{k}={v}" for k, v in self.compiled.constexprs.items()]
        return f"{self.name}[{', '.join([*consts, f'warps={self.num_warps}', f'stages={self.num_stages}'])}]"

    @property
    def arch(self) -> str:
        return self.compiled.arch

    @property
    def irs(self) -> dict[str, str]:
        return self.compiled.irs

    @property
    def num_warps(self) -> int:
        return self.compiled.num_warps

    @property
    def num_stages(self) -> int:
        return self.compiled.num_stages

    @property
    def registers(self) -> int:
        return self.kernel.registers

    @property
    def shared(self) -> int:
        """Bytes of shared memory per block (Triton allocates it all dynamically)."""
        return self.compiled.shared

    @property
    def mix(self):
        return self.kernel.mix

    def text(self, stage: str) -> str:
        """One stage as text: an IR, or ``"sass"`` (with the kernel's lines marked)."""
        if stage == "sass":
            return self.kernel.sass_text
        if stage not in self.irs:
            raise KeyError(f"no {stage!r}; stages: {', '.join([*self.irs, 'sass'])}")
        return self.irs[stage]

    def diff(self, other: TritonPanel) -> panel.KernelDiff:
        """What changed from ``other`` to this panel (occupancy both at this panel's block size)."""
        base = panel.diff(other.kernel, self.kernel)
        rows = [panel.DiffRow("num_warps", other.num_warps, self.num_warps),
                panel.DiffRow("num_stages", other.num_stages, self.num_stages)]
        consts = dict.fromkeys([*other.compiled.constexprs, *self.compiled.constexprs])
        rows += [panel.DiffRow(k, other.compiled.constexprs.get(k), self.compiled.constexprs.get(k)) for k in consts]
        rows += base.rows[:2]  # registers, static smem
        rows.append(panel.DiffRow("Triton smem (B)", other.shared, self.shared))
        rows += base.rows[2:]
        return panel.KernelDiff(before=other.label, after=self.label, rows=rows)

    def _repr_html_(self) -> str:
        from ..display.triton_panel_view import render_html

        return render_html(self)

    def __repr__(self) -> str:
        from ..display.triton_panel_view import render_text

        return render_text(self)


def panel_of(compiled: TritonCompile, show=(), max_lines: int = 60) -> TritonPanel:
    """The panel of a :class:`TritonCompile` (no diff)."""
    show = tuple(s.strip().lower() for s in (show.split(",") if isinstance(show, str) else show) if s.strip())
    unknown = [s for s in show if s not in SHOWABLE]
    if unknown:
        raise LabError(f"cannot show {', '.join(unknown)}; choose from {', '.join(SHOWABLE)}")
    note = ""
    try:
        instrs = sass.disassemble(compiled.cubin).get(compiled.name, [])
    except (RuntimeError, LabError) as exc:  # no nvdisasm/cuobjdump, or one too old for this arch
        instrs, note = [], f"no SASS: {exc}"
    if compiled.resources is None:
        note = (note + "; " if note else "") + "no ptxas -v report (registers unknown)"
    block = compiled.num_warps * 32
    try:
        here = occ.occupancy(compiled.arch, block, getattr(compiled.resources, "registers", 0), compiled.shared)
    except KeyError:  # no occupancy rules for this architecture
        here = None
    spills = sass.spill_instructions(instrs)
    kernel = panel.KernelPanel(
        name=compiled.name, symbol=compiled.name, arch=compiled.arch, resources=compiled.resources,
        instructions=instrs, mix=sass.instruction_mix(instrs), block_size=block, block_size_from="given",
        dynamic_smem=compiled.shared, occupancy=here, sweep=[],
        sass_text=sass.interleave(instrs, compiled.source, compiled.first_line), ptx=compiled.irs.get("ptx"),
        local_memory_lines=sorted({line for i in spills if (line := sass.source_line_of(i))}), note=note)
    return TritonPanel(kernel=kernel, compiled=compiled, spills=spills, show=show, max_lines=max_lines)


def triton_panel(kernel, signature=None, constexprs: dict | None = None, *, args=None, num_warps: int = 4,
                 num_stages: int = 3, arch: str | int | None = None, vs: TritonPanel | None = None,
                 ir=(), max_lines: int = 60, aligned=None) -> TritonPanel:
    """Compile ``kernel`` (a ``@triton.jit`` function) for ``arch`` without launching it and return its panel.

    ``signature``: ``"x: *fp32, y: *fp32, out: *fp32, n: i32"`` (or a dict), or ``args``: example arguments;
    ``constexprs``: ``{"BLOCK": 1024}``. ``vs``: another panel to diff against. ``ir``: stages to show in
    full, e.g. ``"ttgir,ptx,sass"`` (the text form prints ``max_lines`` lines of each).
    ``aligned``: parameters assumed divisible by 16 (default: the pointers, as for real tensors).
    """
    compiled = compile_triton(kernel, signature, constexprs, args=args, num_warps=num_warps, num_stages=num_stages,
                              arch=arch, aligned=aligned)
    result = panel_of(compiled, ir, max_lines)
    if vs is not None:
        result.comparison = result.diff(vs)
    return result
