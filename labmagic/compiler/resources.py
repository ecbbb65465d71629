"""The compiler's own resource report, parsed from ``ptxas -v`` output.

Per kernel: registers per thread, static shared memory, stack frame, spill stores and loads,
barriers and constant memory. These are the numbers that decide occupancy and expose spills, so the
notebook prints them under every compiled cell.
"""

from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Resources:
    symbol: str
    arch: str = ""
    registers: int = 0
    smem_static: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0
    cmem: int = 0
    #: Read from a CUBIN (``cuobjdump``), not reported by ptxas: spill bytes and barriers are not known then.
    from_cubin: bool = False

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores or self.spill_loads)


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas_log(log: str) -> dict[str, Resources]:
    """Map each entry function's symbol to its Resources.

    ptxas prints, per entry: ``Compiling entry function 'k' for 'sm_90'``, ``Function properties for
    k`` followed by the stack/spill line, then ``Used N registers, used B barriers, S bytes smem, ...``.
    Function properties of non-entry device functions (noinline callees) are ignored.
    """
    out: dict[str, Resources] = {}
    entry = arch = props_for = None
    fields: dict[str, int] = {}
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entry, arch, fields, props_for = m.group(1), m.group(2), {}, None
            continue
        if m := _PROPS.search(line):
            props_for = m.group(1)
            continue
        if entry is None:
            continue
        if (m := _FRAME.search(line)) and props_for == entry:
            fields.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
            continue
        if m := _USED.search(line):
            fields["registers"] = int(m.group(1))
            if b := _BARRIERS.search(line):
                fields["barriers"] = int(b.group(1))
            if s := _SMEM.search(line):
                fields["smem_static"] = int(s.group(1))
            if c := _CMEM.search(line):
                fields["cmem"] = int(c.group(1))
            out[entry] = Resources(symbol=entry, arch=arch or "", **fields)
            entry = None
    return out
