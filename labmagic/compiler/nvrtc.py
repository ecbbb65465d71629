"""CUDA C++ to CUBIN through NVRTC, with no GPU needed, cached in memory and on disk.

NVRTC is driven through ``cuda.bindings.nvrtc`` (cuda-python) rather than a wrapper, so every option
a kernel author knows from nvcc's device side (``-use_fast_math``, ``-DTILE=32``,
``--maxrregcount=64``, ...) passes through unchanged. ``--ptxas-options=-v`` is always on: its log is
the compiler's own resource report (registers, shared memory, stack frame, spills), which is what the
notebook prints under each cell.

The cache (:mod:`labmagic.compiler.cache`) is keyed by the source, the options, the architecture, the name
expressions and NVRTC's version; a hit in memory costs a hash and a dict lookup, a hit on disk a file read. A miss
runs NVRTC in a child process with a time and a memory limit (:mod:`labmagic.compiler.sandbox`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time

from ..errors import CompileError
from ..paths import book_dir
from ..runtime import target_arch
from . import cache, sandbox, type_probe
from .compile_result import CompileResult
from .resources import parse_ptxas_log
from .signature import parse_kernels

#: Name NVRTC gives the source; compiler messages read ``cell(LINE): error: ...``.
SOURCE_NAME = "cell"


@functools.cache
def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


@functools.cache
def include_dirs() -> tuple[str, ...]:
    """Header folders for cuda_fp16.h, cuda_bf16.h, mma.h, cuda/pipeline, cooperative_groups.h.

    Wheels first (nvidia-cuda-runtime, -crt, -cccl), then a toolkit under CUDA_HOME or /usr/local/cuda,
    so the same cell compiles on a laptop with only pip packages and on a GPU box with a full toolkit.
    """
    dirs: list[str] = []
    # TEMP (issue 48, dropped when labmagic/compiler's own header support lands): the book's shared device
    # headers, so a cell can say #include <lab/vec.cuh>. The compile cache key does not cover them yet.
    book_include = book_dir() / "include"
    if book_include.is_dir():
        dirs.append(str(book_include))
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        for lib in ("cudart", "cccl"):
            try:
                found = find_nvidia_header_directory(lib)
            except Exception:  # pathfinder raises for libraries it cannot place
                found = None
            if found:
                dirs.append(str(found))
    except ImportError:
        pass
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            for sub in ("include", "include/cccl"):
                candidate = os.path.join(home, sub)
                if os.path.isdir(candidate):
                    dirs.append(candidate)
    return tuple(dict.fromkeys(dirs))


def compile(  # noqa: A001  (the verb is the point)
    source: str,
    arch: str | None = None,
    options: tuple[str, ...] | list[str] = (),
    name_expressions: tuple[str, ...] | list[str] = (),
    lineinfo: bool = True,
    first_line: int = 1,
    use_cache: bool = True,
    type_probes: tuple[str, ...] | list[str] = (),
    timeout_s: float | None = None,
    memory_gb: float | None = None,
) -> CompileResult:
    """Compile ``source`` to CUBIN for ``arch`` (default: this GPU's, else ``sm_90``).

    ``name_expressions`` instantiate templates (``"gemm<float, 64>"``); every other kernel gets its qualified
    name (``ns::kernel``) added automatically so that its symbol is found, and is dropped again where NVRTC
    does not know it (a kernel under ``#if 0``). ``first_line`` is the line number the source's first line has
    for the reader (2 in a ``%%cuda_kernel`` cell, whose first line is the magic): compiler messages match
    what they see. ``type_probes`` are parameter types as written (``real``, ``ns::index_t``) that NVRTC is
    asked to spell out; ``result.types`` maps each one it resolved to its canonical type (:mod:`.type_probe`).
    NVRTC runs in a child process stopped at ``timeout_s`` seconds or ``memory_gb`` GiB (:mod:`.sandbox`).
    """
    arch = arch or target_arch()
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise CompileError(f"--arch {arch!r} is not a real architecture such as sm_80, sm_90 or sm_90a")
    options = tuple(options)
    if lineinfo and "-lineinfo" not in options and "--generate-line-info" not in options:
        options = ("-lineinfo", *options)
    required = list(dict.fromkeys(name_expressions))
    kernels = [k.qualified_name for k in parse_kernels(source)
               if not k.template_params and k.qualified_name not in required]
    probes = [type_probe.expression(t) for t in dict.fromkeys(type_probes)]
    key = cache.cache_key(source, arch, options, (*required, *kernels, *probes), nvrtc_version())
    if use_cache:
        hit = cache.lookup(key)
        if hit is not None:
            return hit
    limits = sandbox.limits(timeout_s, memory_gb)
    start = time.perf_counter()
    program = _Program(source, arch, options, first_line, limits)
    result = dataclasses.replace(_compile_known(program, required, kernels, probes), key=key,
                                 seconds=time.perf_counter() - start)
    if use_cache:
        cache.store(result, nvrtc_version())
    return result


@dataclasses.dataclass(frozen=True)
class _Program:
    source: str
    arch: str
    options: tuple[str, ...]
    first_line: int
    limits: tuple[float, float]

    def run(self, expressions: list[str], probes: bool) -> dict:
        """NVRTC's reply for this program with ``expressions`` (and the type probe's declaration)."""
        text = f'#line {self.first_line} "{SOURCE_NAME}"\n{self.source}{type_probe.DECLARATION if probes else ""}'
        options = [f"-arch={self.arch}", "--ptxas-options=-v", "--std=c++17"]
        options += [f"-I{d}" for d in include_dirs()]
        options += list(self.options)
        request = {"source": text, "name": SOURCE_NAME, "options": options, "expressions": expressions}
        return sandbox.run(request, *self.limits)


def _compile_known(program: _Program, required: list[str], kernels: list[str], probes: list[str]) -> CompileResult:
    """Compile with every expression NVRTC can place.

    The kernels the scanner found and the type probes are guesses from the text: one NVRTC rejects (a kernel
    under ``#if 0``, a type it cannot name from the end of the program) is dropped and the compile runs again. A
    name expression the user gave is no guess: NVRTC rejecting it is the error. Where the source itself does not
    compile, the error comes from a compile without the guesses NVRTC rejected, so they do not clutter the log.
    """
    for _ in range(4):
        reply = program.run([*required, *kernels, *probes], bool(probes))
        if reply.get("api_error"):
            raise CompileError(f"NVRTC failed: {reply['api_error']}")
        if reply["ok"]:
            return _result(program, reply, required + kernels, probes)
        rejected = name_map_errors(reply["log"])
        broken = not _only_name_map_errors(reply["log"])
        guesses = [e for e in (*kernels, *probes) if e in rejected]
        if not guesses and (not broken or not probes):
            break
        kernels = [k for k in kernels if k not in rejected]
        probes = [] if broken else [p for p in probes if p not in rejected]
    raise _compile_error(reply["log"], program, {e: m for e, m in rejected.items() if e in required})


def _result(program: _Program, reply: dict, kernels: list[str], probes: list[str]) -> CompileResult:
    types = {}
    for expr in probes:
        canonical = type_probe.canonical_type(reply["lowered"][expr])
        if canonical is not None:
            types[type_probe.written_type(expr)] = canonical
    return CompileResult(
        source=program.source, arch=program.arch, options=program.options, cubin=reply["cubin"], ptx=reply["ptx"],
        log=reply["log"], lowered={e: reply["lowered"][e] for e in kernels}, resources=parse_ptxas_log(reply["log"]),
        key="", first_line=program.first_line, types=types,
    )


def _compile_error(log: str, program: _Program, rejected: dict[str, str]) -> CompileError:
    detail = annotate_log(log, program.source, program.first_line)
    if rejected and _only_name_map_errors(log):
        expr, message = next(iter(rejected.items()))
        more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
        return CompileError(f"name expression {expr!r}: {message.strip()}{more}", detail=detail)
    return CompileError(_headline(log), detail=detail)


#: The file NVRTC compiles the name expressions in; its messages quote an expression, never the user's files.
NAME_MAP = "__nv_name_map"
_HEADER = re.compile(r"^(?P<file>\S.*?)\((?P<line>\d+)\): (?P<severity>catastrophic error|error|warning|note|remark)"
                     r"(?P<code>[^:]*): (?P<message>.*)$")
_PRAGMA = re.compile(r"^\s*#pragma nv_mangled_name (.*?)\s*$")


def _diagnostics(log: str) -> list[re.Match]:
    return [m for m in map(_HEADER.match, log.splitlines()) if m]


def _only_name_map_errors(log: str) -> bool:
    errors = [m for m in _diagnostics(log) if "error" in m["severity"]]
    return bool(errors) and all(m["file"] == NAME_MAP for m in errors) and "nvrtc: error" not in log


def name_map_errors(log: str) -> dict[str, str]:
    """Each name expression NVRTC rejected, with its first message (NVRTC quotes the expression under it)."""
    lines = log.splitlines()
    rejected: dict[str, str] = {}
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if m and m["file"] == NAME_MAP and "error" in m["severity"]:
            quoted = next((p.group(1) for p in map(_PRAGMA.match, lines[i + 1 : i + 3]) if p), None)
            if quoted is not None:
                rejected.setdefault(quoted, m["message"])
    return rejected


def _quotable(file: str) -> bool:
    """Whether log lines quoted from ``file`` may be shown: the cell's own, and the expressions we added."""
    return file in (SOURCE_NAME, NAME_MAP)


def _readable(file: str) -> bool:
    """Whether the messages about ``file`` may be shown as they are: the cell, our additions, the CUDA headers.

    Any other file is whatever an ``#include`` named (``/etc/passwd``, a key): its messages quote its words
    (``identifier "..." is undefined``), and an error shown in a notebook lands in logs and executed copies.
    """
    if _quotable(file) or file == type_probe.SOURCE_NAME:
        return True
    real = os.path.realpath(file)
    return any(real.startswith(os.path.realpath(d) + os.sep) for d in include_dirs())


def _message(m: re.Match) -> str:
    """A diagnostic's message, with its quoted words left out where it is about a file we may not show."""
    return m["message"] if _readable(m["file"]) else re.sub(r'"[^"]*"', '"..."', m["message"])


def _headline(log: str) -> str:
    """One line for the reader: the first error with its line, and how many there were."""
    errors = [m for m in _diagnostics(log) if "error" in m["severity"]]
    in_cell = [m for m in errors if m["file"] == SOURCE_NAME]
    if in_cell:
        first = in_cell[0]
        more = f" (and {len(in_cell) - 1} more)" if len(in_cell) > 1 else ""
        return f"line {first['line']}: {first['message'].strip()}{more}"
    if errors:
        first = errors[0]
        return f"compile failed: {first['file']}({first['line']}): {first['severity']}: {_message(first).strip()}"
    fallback = log.strip().splitlines()[0] if log.strip() else ""
    first_line = next((line for line in log.splitlines() if "error" in line), fallback)
    return f"compile failed: {first_line.strip()}"


_NOISE = ('detected in the compilation of "cell".', "Compilation terminated.")


def annotate_log(log: str, source: str, first_line: int = 1) -> str:
    """The compiler log with each ``cell(N)`` diagnostic followed by the cell's line N and a marker.

    NVRTC already quotes the line for most errors; we add it where it does not and keep the log's
    own caret lines, dropping the noise of the final summary and of an empty log. Only the cell's lines are
    quoted: a diagnostic about another file keeps its place and message (its quoted words left out unless the
    file is a CUDA header), never that file's lines.
    """
    lines = source.splitlines()
    out: list[str] = []
    log_lines = log.strip("\n").splitlines()
    hidden = withheld = False
    for i, text in enumerate(log_lines):
        if text.strip().endswith(_NOISE[0]) or text.strip() == _NOISE[1]:
            continue
        if text.startswith("ptxas info") or text.startswith("ptxas         ."):
            continue
        match = _HEADER.match(text)
        if match:
            hidden = not _quotable(match["file"])
            if hidden:
                shown = _message(match)
                withheld = withheld or shown != match["message"]
                out.append(f"{match['file']}({match['line']}): {match['severity']}{match['code']}: {shown}")
                continue
        elif hidden:
            withheld = withheld or bool(text.strip())
            continue
        out.append(text)
        if match and match["file"] == SOURCE_NAME:
            number = int(match["line"])
            quoted = i + 1 < len(log_lines) and log_lines[i + 1].strip() and not _HEADER.match(log_lines[i + 1])
            index = number - first_line
            if not quoted and 0 <= index < len(lines):
                out.append(f"  {number:>4} | {lines[index]}")
    if withheld:
        out.append("(lines and quoted words of files other than the cell are not shown)")
    return "\n".join(out).strip("\n")
