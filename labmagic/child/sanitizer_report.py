"""compute-sanitizer's report, parsed: one :class:`Finding` per kind of error and place, with the cell line each
points at (the sanitizer prints ``at vecadd+0x90 in cell:5``; :func:`attach_sources` quotes line 5 of the cell)."""

from __future__ import annotations

import dataclasses
import os
import re

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
#: A failed ``cuGetProcAddress`` is a library asking the driver whether it has an entry point (the CUDA runtime,
#: torch and Triton probe for newer versions of driver functions): the answer "no" is not an error of the code
#: under test. The sanitizer counts each one in its summary; the parser drops them and takes them off the count.
_PROBES = re.compile(r"^Program hit .* on CUDA API call to cuGetProcAddress")


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
    sanitizer's summary states (None when it printed no summary, e.g. the process was killed), less the driver
    entry-point probes it counted (``_PROBES``).

    A report is a headline at the base indentation followed by indented lines (location, thread,
    address, backtrace); both the current ``at kernel+0x90 in cell:5`` and the older
    ``at 0x90 in cell:5:kernel`` location forms are read.
    """
    findings: dict[tuple, Finding] = {}
    order: list[tuple] = []
    current: Finding | None = None
    errors = None
    probes = 0  # failed cuGetProcAddress calls: see _PROBES

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
        if base and _PROBES.match(body):
            close()
            probes += 1
            continue
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
    return [findings[k] for k in order], (max(0, errors - probes) if errors is not None else None)


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
