"""The compile panel of a CUBIN that another compiler built: TileLang (through nvcc), CuTeDSL (its MLIR pipeline).

Such a DSL hands over the CUBIN but no ``ptxas -v`` report, so the per-kernel numbers come from the CUBIN itself:
``cuobjdump --dump-resource-usage`` for registers, shared memory and stack, the disassembler for the SASS
(:mod:`.sass`). The result is the :class:`~labmagic.analysis.panel.Panel` that ``%%cuda_kernel --panel`` shows,
so a DSL's kernel reads like a CUDA C kernel: registers, occupancy at its launch shape, the instruction mix
(HGMMA, UTMALDG...), and the local-memory instructions that betray spills. No GPU is needed.
"""

from __future__ import annotations

import dataclasses
import re

from ..compiler.resources import Resources
from ..errors import LabError
from ..tools import find_tool
from . import panel, sass

#: Shared memory the system reserves in each block on sm_80 and later: the CUBIN's section counts it, the
#: compiler's report and the occupancy rules (which add it themselves) do not.
RESERVED_SMEM = 1024

_FUNCTION = re.compile(r"^\s*Function (\S+):\s*$")
_FIELDS = re.compile(r"\b(REG|STACK|SHARED|LOCAL):(\d+)")


@dataclasses.dataclass
class CubinCompile:
    """What :func:`labmagic.analysis.panel.kernel_panels` reads of a compile, for a CUBIN from elsewhere."""

    cubin: bytes
    arch: str
    resources: dict[str, Resources]
    ptx: str | None = None
    source: str = ""
    first_line: int = 1


def resource_usage(cubin: bytes, arch: str) -> dict[str, Resources]:
    """Each kernel's registers, static shared memory and stack frame, as ``cuobjdump --dump-resource-usage`` reads
    them from ``cubin``. Spill bytes are not recorded in a CUBIN: the panel's local-memory lines (``STL``/``LDL``
    in the SASS) show them."""
    proc = sass.run_on_cubin(find_tool("cuobjdump"), ["--dump-resource-usage"], cubin)
    if proc.returncode != 0:
        raise LabError(f"cuobjdump could not read the CUBIN: {(proc.stderr or proc.stdout).strip()[:300]}")
    out: dict[str, Resources] = {}
    symbol = None
    for line in proc.stdout.splitlines():
        if m := _FUNCTION.match(line):
            symbol = m.group(1)
            continue
        fields = {k: int(v) for k, v in _FIELDS.findall(line)}
        if symbol and "REG" in fields:
            shared = fields.get("SHARED", 0)
            out[symbol] = Resources(symbol=symbol, arch=arch, registers=fields["REG"],
                                    smem_static=max(0, shared - RESERVED_SMEM) if shared else 0,
                                    stack_frame=fields.get("STACK", 0) + fields.get("LOCAL", 0), from_cubin=True)
            symbol = None
    return out


def cubin_panel(cubin: bytes, arch: str = "sm_90a", *, block_size: int, dynamic_smem: int = 0,
                kernels: list[str] | None = None, source: str = "", ptx: str | None = None,
                show_sass: bool = False) -> panel.Panel:
    """The compile panel of ``cubin``'s kernels (``kernels``: the symbols to show; default all), launched with
    ``block_size`` threads and ``dynamic_smem`` bytes of dynamic shared memory per block (the launch decides both;
    a CUBIN does not say). ``arch``: what the CUBIN was built for (``sm_90a``), for the occupancy rules."""
    if not re.fullmatch(r"sm_\d+[af]?", arch):
        raise LabError(f"architecture {arch!r} is not like sm_90a")
    resources = resource_usage(cubin, arch)
    if kernels is not None:
        unknown = [k for k in kernels if k not in resources]
        if unknown:
            raise LabError(f"no kernel {', '.join(map(repr, unknown))} in this CUBIN; it has {', '.join(resources)}")
        resources = {k: resources[k] for k in kernels}
    if not resources:
        raise LabError("the CUBIN holds no kernels")
    compiled = CubinCompile(cubin=cubin, arch=arch.rstrip("af"), resources=resources, ptx=ptx, source=source)
    kernel_panels = panel.kernel_panels(compiled, block_size, dynamic_smem)
    for kp in kernel_panels:
        local = kp.mix["STL"] + kp.mix["LDL"]
        if local:  # the report's spill bytes read 0: a CUBIN does not record them
            kp.note = "; ".join(filter(None, [kp.note, f"{local} local-memory instructions (STL/LDL) in the SASS: "
                                              "spills or local arrays (a CUBIN records no spill bytes)"]))
    return panel.Panel(kernels=kernel_panels, arch=compiled.arch, show_sass=show_sass)
