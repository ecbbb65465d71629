"""compute-sanitizer on one variant of a chapter's race: the findings, with the cell line of each.

An out-of-bounds write usually does not crash: it corrupts a neighbour and the check passes or fails
for the wrong reason. memcheck finds it, racecheck finds shared-memory races (a missing
``__syncthreads``), initcheck finds reads of memory nobody wrote, synccheck finds barriers that not
every thread reaches. Like Nsight Compute, the sanitizer must launch the process, so the variant runs
in a child (:mod:`labmagic.child` ``--mode sanitize``).

With ``-lineinfo`` (on by default for ``%%cuda_kernel``) every report carries the source location,
``at vecadd+0x90 in cell:5``: the cell's own line number, because NVRTC compiles each cell under the
name ``cell`` with a ``#line`` directive. The child also reports the source of every CUDA cell it
compiled, so the finding can quote the line itself.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess

from .errors import LabError
from .profile import child_command, child_env, child_record, log_tail, require_gpu
from .tools import find_nsight_tool

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
_PREFIX = re.compile(r"^=+ ?")
_LOC_NEW = re.compile(r"\bat (?P<func>.+?)\+(?P<off>0x[0-9a-fA-F]+)(?: in (?P<file>[^\s]+?):(?P<line>\d+))?(?=\s|$)")
_LOC_OLD = re.compile(r"\bat (?P<off>0x[0-9a-fA-F]+) in (?P<file>[^\s]+?):(?P<line>\d+):(?P<func>\S+)")
_THREAD = re.compile(r"by thread \((?P<thread>[^)]*)\) in block \((?P<block>[^)]*)\)")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_HAZARDS = re.compile(r"\[(\d+) hazards?\]")
_NOISE = ("COMPUTE-SANITIZER", "Saved host backtrace", "Host Frame", "Device Frame")
#: Consequences of a device error seen by the host, not errors of their own.
_API = ("Program hit ", "Target application returned")


#: memcheck knows allocations by cudaMalloc: a caching allocator hands out slices of larger blocks, so
#: a write one element past a tensor lands inside the block and goes unseen. Under the sanitizer each
#: tensor gets its own cudaMalloc (torch, and JAX's "platform" allocator).
UNPOOLED = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}


class SanitizerError(LabError, RuntimeError):
    """compute-sanitizer could not run the variant at all."""


def find_sanitizer() -> str:
    return find_nsight_tool("compute-sanitizer", "LABMAGIC_COMPUTE_SANITIZER")


@dataclasses.dataclass
class Finding:
    """One kind of error at one place; repeats (one report per faulting thread) are merged in ``count``."""

    tool: str
    kind: str  # the report's headline: "Invalid __global__ write of size 4 bytes"
    #: "error"; "warning" (racecheck's hazards it deems benign); "api": a CUDA call that failed as a
    #: consequence (``Program hit cudaErrorLaunchFailure ...``), shown after the device findings.
    severity: str = "error"
    kernel: str | None = None
    offset: str | None = None
    file: str | None = None
    line: int | None = None
    thread: str | None = None
    block: str | None = None
    details: list[str] = dataclasses.field(default_factory=list)
    count: int = 1
    source_line: str | None = None  # the text of ``line`` when the cell's source is known

    @property
    def where(self) -> str:
        place = f"{self.file}:{self.line}" if self.line is not None else "(no line info: compile with -lineinfo)"
        kernel = f"{self.kernel}" + (f"+{self.offset}" if self.offset else "") if self.kernel else "?"
        return f"{kernel} at {place}"

    def key(self) -> tuple:
        return (self.tool, self.kind, self.kernel, self.file, self.line)


def _strip(line: str) -> tuple[int, str] | None:
    """(indent, text) of a sanitizer line, or None for lines that are not the sanitizer's."""
    if not line.startswith("="):
        return None
    text = _PREFIX.sub("", line, count=1)
    return len(text) - len(text.lstrip(" ")), text.strip()


def parse_output(text: str, tool: str = "memcheck") -> tuple[list[Finding], int | None]:
    """Findings (merged by kind and place, in order of first appearance) and the number of errors the
    sanitizer's summary states (None when it printed no summary, e.g. the process was killed).

    A report is a headline at the base indentation followed by indented lines (location, thread,
    address, backtrace); both the current ``at kernel+0x90 in cell:5`` and the older
    ``at 0x90 in cell:5:kernel`` location forms are read.
    """
    findings: dict[tuple, Finding] = {}
    order: list[tuple] = []
    current: Finding | None = None
    errors = None

    def close():
        nonlocal current
        if current is None:
            return
        k = current.key()
        if k in findings:
            findings[k].count += current.count
        else:
            findings[k] = current
            order.append(k)
        current = None

    for raw in text.splitlines():
        parsed = _strip(raw)
        if parsed is None:
            continue
        indent, body = parsed
        if not body:
            close()
            continue
        if m := _SUMMARY.search(body):
            close()
            errors = int(m.group(1))
            continue
        if m := _RACE_SUMMARY.search(body):
            close()
            errors = int(m.group(2))
            continue
        if body.startswith(_NOISE):
            continue
        base = indent <= 0
        if base and not body.lower().startswith("and "):
            close()
            severity = ("warning" if body.lower().startswith("warning")
                        else "api" if body.startswith(_API) else "error")
            kind = re.sub(r"^(Error|Warning|ERROR|WARNING): ", "", body)
            current = Finding(tool=tool, kind=_headline(kind), severity=severity)
            _locate(current, body)
            continue
        if current is None:
            continue
        if current.kernel is None:
            _locate(current, body)
        if (m := _THREAD.search(body)) and current.thread is None:
            current.thread, current.block = m.group("thread"), m.group("block")
            continue
        if m := _HAZARDS.search(body):
            current.count = int(m.group(1))
        if not body.startswith("at ") and not body.startswith("by thread"):
            current.details.append(body)
    close()
    return [findings[k] for k in order], errors


def _headline(body: str) -> str:
    """The headline without its location (racecheck puts ``at k+0x.. in cell:12`` on the same line)."""
    cut = _LOC_NEW.search(body) or _LOC_OLD.search(body)
    return body[:cut.start()].rstrip(" :") if cut and cut.start() > 0 else body


def _locate(finding: Finding, text: str) -> None:
    m = _LOC_OLD.search(text) or _LOC_NEW.search(text)
    if not m:
        return
    finding.kernel, finding.offset = m.group("func").strip(), m.group("off")
    if m.group("file"):
        finding.file, finding.line = os.path.basename(m.group("file")), int(m.group("line"))


def attach_sources(findings: list[Finding], sources: dict[str, tuple[str, int]]) -> None:
    """Quote each finding's line from ``sources`` (kernel symbol or name -> (cell source, first line))."""
    for f in findings:
        if f.line is None or not f.kernel:
            continue
        bare = re.sub(r"^(?:void\s+)?", "", f.kernel).split("(")[0].split("<")[0].strip()
        entry = sources.get(f.kernel) or sources.get(bare)
        if entry is None:
            entry = next((v for k, v in sources.items() if k.split("<")[0] == bare), None)
        if entry is None:
            continue
        source, first_line = entry
        lines = source.splitlines()
        index = f.line - first_line
        if 0 <= index < len(lines):
            f.source_line = lines[index].strip()


def kernel_sources(namespace: dict) -> dict[str, tuple[str, int]]:
    """Symbol and name -> (cell source, first line) of every compiled CUDA kernel in a namespace."""
    out: dict[str, tuple[str, int]] = {}
    for value in list(namespace.values()):
        module = getattr(value, "module", None)
        result = getattr(module, "result", None)
        source = getattr(result, "source", None)
        if not isinstance(source, str):
            continue
        entry = (source, getattr(result, "first_line", 1))
        for attr in ("symbol", "name"):
            name = getattr(value, attr, None)
            if isinstance(name, str):
                out[name] = entry
    return out


@dataclasses.dataclass
class SanitizeResult:
    chapter: str
    variant: str
    shape: str
    tool: str
    findings: list[Finding]
    errors: int | None  # the sanitizer's own count
    exit_code: int = 0
    child_error: str | None = None
    log: str = ""

    @property
    def clean(self) -> bool:
        return not self.findings and not self.errors and self.child_error is None and self.errors is not None

    def _repr_html_(self) -> str:
        from .display.explain import sanitize_html

        return sanitize_html(self)

    def __repr__(self) -> str:
        from .display.explain import sanitize_text

        return sanitize_text(self)


def sanitizer_command(sanitizer: str, tool: str, child: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    # racecheck's default "analysis" report names each race once with both accesses' lines.
    cmd = [sanitizer, "--tool", tool, "--print-limit", "100", "--target-processes", "all"]
    return [*cmd, *extra, *child]


def sanitize_variant(chapter: str, variant: str, shape: str | None = None, *, tool: str = "memcheck",
                     params: dict | None = None, extra: tuple[str, ...] = (), timeout: float | None = 1800,
                     ) -> SanitizeResult:
    """Run ``variant`` once at ``shape`` (default: the race's largest check shape, odd-sized) under
    compute-sanitizer's ``tool``; return its findings with their cell lines."""
    if tool not in TOOLS:
        raise LabError(f"--tool must be one of {', '.join(TOOLS)}, not {tool!r}")
    require_gpu("%sanitize")
    sanitizer = find_sanitizer()
    child = child_command(chapter, variant, shape, "sanitize", 1, params)
    if shape is None:
        child += ["--check-shape"]  # the race's largest check shape: odd sizes catch guard bugs
    from .paths import repo_root

    cmd = sanitizer_command(sanitizer, tool, child, extra)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=repo_root(),
                          env=child_env(**UNPOOLED))
    log = proc.stdout + "\n" + proc.stderr
    record = child_record(proc.stdout)
    if not record and "LABMAGIC" not in log and proc.returncode != 0 and "=========" not in log:
        raise SanitizerError(f"compute-sanitizer failed (exit code {proc.returncode})", detail=log_tail(log))
    findings, errors = parse_output(log, tool)
    attach_sources(findings, {k: tuple(v) for k, v in (record.get("sources") or {}).items()})
    return SanitizeResult(chapter=record.get("chapter", str(chapter)), variant=variant,
                          shape=record.get("shape", shape or ""), tool=tool, findings=findings, errors=errors,
                          exit_code=proc.returncode,
                          child_error=None if record.get("ok", False) else (record.get("error") or "the child died"),
                          log=log)


# --- CLI: labmagic sanitize CHAPTER ----------------------------------------------------------------

def add_arguments(parser) -> None:
    from .profile import add_chapter_arguments

    add_chapter_arguments(parser, "check")
    parser.add_argument("--tool", choices=TOOLS, default="memcheck", help="compute-sanitizer tool")
    parser.add_argument("--shape", help="shape to run: 4096, 31x17x29 (default: the race's largest check shape)")


def run(args) -> int:
    from .profile import chapter_variants

    require_gpu("labmagic sanitize")
    find_sanitizer()
    params, variants = chapter_variants(args)
    dirty = 0
    for variant in variants:
        result = sanitize_variant(args.chapter, variant, args.shape, tool=args.tool, params=params)
        print(repr(result) + "\n")
        dirty += not result.clean
    return 1 if dirty else 0

