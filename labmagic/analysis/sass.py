"""SASS from a CUBIN: disassembly, source lines interleaved, and the instruction mix that matters.

The machine code is the ground truth of a kernel: whether the compiler vectorised the loads
(``LDG.E.128`` moves four times the bytes per instruction of ``LDG.E``), whether the FMAs became
tensor-core ``HMMA``/``HGMMA``, whether registers spilled to local memory (``LDL``/``STL``). None of
that needs a GPU: NVRTC's CUBIN goes through ``nvdisasm`` (from the ``nvidia-cuda-nvdisasm`` wheel or
a toolkit), which with ``-gi`` prints ``//## File "cell", line N`` markers from ``-lineinfo``, so each
instruction can be tied to the line of the cell that produced it.

Counts here are *static* (instructions in the code), not executed ones: a 128-bit load in a loop body
counts once. That is what a diff between two rungs needs ("the loads became 128-bit"); how often they
ran is Nsight Compute's job (:mod:`labmagic.child.ncu_run`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import subprocess
import tempfile
from collections import Counter

from ..compiler.ptx import kernel_ptx, launch_bounds  # noqa: F401  (re-exported: sass.kernel_ptx, ...)
from ..errors import ToolMissingError
from ..tools import find_tool  # noqa: F401  (re-exported: sass.find_tool)


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One SASS instruction. ``opcode`` keeps its modifiers (``LDG.E.128``); ``line`` is the source
    line from ``-lineinfo`` (None without it); ``inlined_at`` the call site line of an inlined callee."""

    offset: int
    opcode: str
    operands: str
    predicate: str = ""
    file: str | None = None
    line: int | None = None
    inlined_at: int | None = None

    @property
    def base(self) -> str:
        """The opcode without modifiers: ``LDG`` for ``LDG.E.128``."""
        return self.opcode.split(".", 1)[0]

    @property
    def text(self) -> str:
        pred = f"{self.predicate} " if self.predicate else ""
        return f"{pred}{self.opcode} {self.operands}".rstrip()


_FUNC = re.compile(r"^//-+ \.text\.(\S+)\s+-+\s*$")
_LINE = re.compile(r'^\s*//## File "([^"]*)", line (\d+)(?: inlined at "([^"]*)", line (\d+))?')
_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:\{\s*)?(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
# cuobjdump -sass prints ``        /*0040*/                   LDC R9, c[0x0][RZ] ;`` too, under ``Function : name``.
_CUOBJ_FUNC = re.compile(r"^\s*Function : (\S+)\s*$")


def parse_disassembly(text: str) -> dict[str, list[Instruction]]:
    """Parse ``nvdisasm -c [-g|-gi]`` (or ``cuobjdump -sass``) output into instructions per function.

    Line markers apply to every following instruction until the next marker, which is how nvdisasm
    prints them (a marker only when the line changes). For an inlined callee we keep both the callee's
    line and the line it was inlined at, so interleaving can show the call site the reader wrote.
    """
    functions: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    file = line = inlined = None
    for raw in text.splitlines():
        m = _FUNC.match(raw) or _CUOBJ_FUNC.match(raw)
        if m:
            current = functions.setdefault(m.group(1), [])
            file = line = inlined = None
            continue
        if current is None:
            continue
        m = _LINE.match(raw)
        if m:
            file, line = m.group(1), int(m.group(2))
            inlined = int(m.group(4)) if m.group(4) else None
            continue
        m = _INSTR.match(raw)
        if m:
            current.append(Instruction(
                offset=int(m.group(1), 16), opcode=m.group(3), operands=m.group(4).strip(),
                predicate=(m.group(2) or "").strip(), file=file, line=line, inlined_at=inlined,
            ))
    return functions


_DISASSEMBLED: dict[str, dict[str, list[Instruction]]] = {}


def disassemble(cubin: bytes) -> dict[str, list[Instruction]]:
    """SASS per function of a CUBIN, with line info where the CUBIN has it (``-lineinfo``).

    ``nvdisasm -gi -c`` is preferred (source lines, inlining); ``cuobjdump -sass`` is the fallback when
    only it is installed (no source lines then). Memoized by the CUBIN's hash: re-running an unchanged
    ``%%cuda_kernel --panel`` cell must stay as cheap as the compile cache makes it.
    """
    key = hashlib.sha256(cubin).hexdigest()
    if key not in _DISASSEMBLED:
        _DISASSEMBLED[key] = _disassemble_uncached(cubin)
    return {name: list(instrs) for name, instrs in _DISASSEMBLED[key].items()}


def _disassemble_uncached(cubin: bytes) -> dict[str, list[Instruction]]:
    try:
        tool, args = find_tool("nvdisasm"), ["-gi", "-c"]
    except ToolMissingError:
        tool, args = find_tool("cuobjdump"), ["-sass"]
    proc = run_on_cubin(tool, args, cubin)
    if proc.returncode != 0:
        raise RuntimeError(f"{os.path.basename(tool)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return parse_disassembly(proc.stdout)


def run_on_cubin(tool: str, args: list[str], cubin: bytes) -> subprocess.CompletedProcess:
    """``tool *args FILE`` on ``cubin`` written to a temporary file (the binary utilities read files only)."""
    with tempfile.TemporaryDirectory(prefix="labmagic-cubin-") as folder:
        path = os.path.join(folder, "kernel.cubin")
        with open(path, "wb") as fh:
            fh.write(cubin)
        return subprocess.run([tool, *args, path], capture_output=True, text=True, cwd=folder)


def source_line_of(instr: Instruction) -> int | None:
    """The line of the *reader's* code: the call site for an inlined callee from a header (cuda_fp16.h,
    mma.h), the instruction's own line otherwise."""
    if instr.inlined_at is not None and instr.file and os.path.basename(instr.file) != "cell":
        return instr.inlined_at
    return instr.line


def interleave(instructions: list[Instruction], source: str | None = None, first_line: int = 1,
               drop_padding: bool = True, headers: dict[str, tuple[str, list[str] | None]] | None = None) -> str:
    """SASS as text, with the source line printed above each run of instructions it produced.

    ``first_line`` is the line number of the source's first line (2 in a ``%%cuda_kernel`` cell), the
    same convention the compiler's line markers use. ``headers`` maps the real path of each header the cell read to
    the name the reader knows it by (``lab/vec.cuh``) and its lines, where they may be shown (the book's own
    headers), else None: code from a header that was not inlined into the cell is labelled by that name. The ``NOP``
    padding after the final ``EXIT``/``BRA`` self-loop is dropped: it is alignment, not code.
    """
    lines = source.splitlines() if source else []
    out: list[str] = []
    last = object()
    for instr in trim_padding(instructions) if drop_padding else instructions:
        where = (instr.file, instr.line, instr.inlined_at)
        if instr.line is not None and where != last:
            header = (headers or {}).get(os.path.realpath(instr.file)) if instr.file else None
            label = f"{header[0] if header else os.path.basename(instr.file or '')}:{instr.line}"
            if instr.inlined_at is not None:
                label += f" (inlined at line {instr.inlined_at})"
            text = ""
            own = source_line_of(instr)
            if os.path.basename(instr.file or "cell") == "cell" or own != instr.line:
                index = (own or 0) - first_line
                if 0 <= index < len(lines):
                    text = lines[index].strip()
            elif header and header[1] is not None and 0 < instr.line <= len(header[1]):
                text = header[1][instr.line - 1].strip()
            out.append(f"  // {label}: {text}" if text else f"  // {label}")
            last = where
        out.append(f"  /*{instr.offset:04x}*/  {instr.text} ;")
    return "\n".join(out)


def trim_padding(instructions: list[Instruction]) -> list[Instruction]:
    """Drop the trailing ``NOP`` run the assembler adds to align the function's end."""
    end = len(instructions)
    while end and instructions[end - 1].base == "NOP":
        end -= 1
    return instructions[:end]


# --- instruction mix -------------------------------------------------------------------------------

_SIZE_MODS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128, "256": 256}

#: Mix categories, in display order, with what each tells the reader.
MIX_LABELS = {
    "LDG": "global loads",
    "STG": "global stores",
    "LDGSTS": "async global->shared copies (cp.async)",
    "UTMALDG": "TMA loads",
    "LDS": "shared loads",
    "LDSM": "shared matrix loads (ldmatrix)",
    "STS": "shared stores",
    "LDL": "local loads (spills or local arrays)",
    "STL": "local stores (spills or local arrays)",
    "ATOM": "atomics",
    "FFMA": "fp32 FMA",
    "FADD": "fp32 add",
    "FMUL": "fp32 mul",
    "HFMA2": "fp16x2 FMA",
    "DFMA": "fp64 FMA",
    "HMMA": "tensor core MMA (mma.sync)",
    "IMMA": "integer tensor core MMA",
    "HGMMA": "Hopper warpgroup MMA (wgmma)",
    "BAR": "barriers (__syncthreads)",
    "SHFL": "warp shuffles",
}


def access_width(instr: Instruction) -> int:
    """Bits moved per thread by a load/store: ``.128`` -> 128, ``.64`` -> 64, ``.U8`` -> 8, else 32."""
    for mod in instr.opcode.split(".")[1:]:
        if mod in _SIZE_MODS:
            return _SIZE_MODS[mod]
    return 32


def _category(instr: Instruction) -> str | None:
    base = instr.base
    if base in ("ATOM", "ATOMG", "ATOMS", "RED", "REDG"):
        return "ATOM"
    if base in ("UTMALDG", "UBLKCP"):
        return "UTMALDG"
    if base in ("HFMA2", "HFMA2.MMA"):
        return "HFMA2"
    return base if base in MIX_LABELS else None


def instruction_mix(instructions: list[Instruction]) -> Counter:
    """Static counts of the instructions that explain performance.

    Keys are the :data:`MIX_LABELS` categories; loads and stores to global, shared and local memory
    are also split by width (``LDG.128``, ``LDG.32``, ``STS.64`` ...), because the width is what
    vectorisation changes. ``FFMA`` counts include the ``FFMA.FTZ``/``.RN`` variants.
    """
    mix: Counter = Counter()
    for instr in instructions:
        cat = _category(instr)
        if cat is None:
            continue
        mix[cat] += 1
        if cat in ("LDG", "STG", "LDS", "STS", "LDL", "STL"):
            mix[f"{cat}.{access_width(instr)}"] += 1
    return mix


def spill_instructions(instructions: list[Instruction]) -> list[Instruction]:
    """``LDL``/``STL``: local memory, i.e. register spills or arrays the compiler could not keep in
    registers. Both cost DRAM/L1 traffic per thread; the ptxas report says which."""
    return [i for i in instructions if i.base in ("LDL", "STL")]


def lines_with(instructions: list[Instruction], category: str) -> list[int]:
    """Source lines (sorted, unique) whose code contains ``category`` (e.g. ``"STL"``): where to look."""
    return sorted({source_line_of(i) for i in instructions if _category(i) == category and source_line_of(i)})
