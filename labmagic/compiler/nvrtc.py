"""CUDA C++ to CUBIN through NVRTC, with no GPU needed, cached in memory and on disk.

NVRTC is driven through ``cuda.bindings.nvrtc`` (cuda-python) rather than a wrapper, so every option
a kernel author knows from nvcc's device side (``-use_fast_math``, ``-DTILE=32``,
``--maxrregcount=64``, ...) passes through unchanged. ``--ptxas-options=-v`` is always on: its log is
the compiler's own resource report (registers, shared memory, stack frame, spills), which is what the
notebook prints under each cell.

The cache (:mod:`labmagic.compiler.cache`) is keyed by the source, the options, the architecture, the name
expressions and NVRTC's version; a hit in memory costs a hash and a dict lookup, a hit on disk a file read.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time

from ..errors import CompileError
from ..runtime import target_arch
from . import cache
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
) -> CompileResult:
    """Compile ``source`` to CUBIN for ``arch`` (default: this GPU's, else ``sm_90``).

    ``name_expressions`` instantiate templates (``"gemm<float, 64>"``); kernels declared without
    ``extern "C"`` get their own name added automatically so that their mangled symbol is found.
    ``first_line`` is the line number the source's first line has for the reader (2 in a
    ``%%cuda_kernel`` cell, whose first line is the magic): compiler messages match what they see.
    """
    arch = arch or target_arch()
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise CompileError(f"--arch {arch!r} is not a real architecture such as sm_80, sm_90 or sm_90a")
    options = tuple(options)
    if lineinfo and "-lineinfo" not in options and "--generate-line-info" not in options:
        options = ("-lineinfo", *options)
    exprs = list(dict.fromkeys(name_expressions))
    for kernel in parse_kernels(source):
        if not kernel.extern_c and not kernel.template_params and kernel.name not in exprs:
            exprs.append(kernel.name)
    exprs_t = tuple(exprs)
    key = cache.cache_key(source, arch, options, exprs_t, nvrtc_version())
    if use_cache:
        hit = cache.lookup(key)
        if hit is not None:
            return hit
    start = time.perf_counter()
    result = _nvrtc_compile(source, arch, options, exprs_t, key, first_line)
    result = dataclasses.replace(result, seconds=time.perf_counter() - start)
    if use_cache:
        cache.store(result, nvrtc_version())
    return result


def _check(result, what: str):
    from cuda.bindings import nvrtc

    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, text = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"NVRTC {what} failed: {text.decode()}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def _nvrtc_compile(source, arch, options, exprs, key, first_line) -> CompileResult:
    from cuda.bindings import nvrtc

    prefix = f'#line {first_line} "{SOURCE_NAME}"\n'
    prog = _check(nvrtc.nvrtcCreateProgram((prefix + source).encode(), SOURCE_NAME.encode(), 0, [], []), "create")
    try:
        for expr in exprs:
            _check(nvrtc.nvrtcAddNameExpression(prog, expr.encode()), f"name expression {expr!r}")
        opts = [f"-arch={arch}", "--ptxas-options=-v", "--std=c++17"]
        opts += [f"-I{d}" for d in include_dirs()]
        opts += list(options)
        err, = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log = _program_log(prog)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(_headline(log), detail=annotate_log(log, source, first_line))
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "CUBIN size")
        cubin = bytearray(size)
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "CUBIN")
        ptx = None
        err, ptx_size = nvrtc.nvrtcGetPTXSize(prog)
        if err == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            buf = bytearray(ptx_size)
            nvrtc.nvrtcGetPTX(prog, buf)
            ptx = bytes(buf).rstrip(b"\0").decode(errors="replace")
        lowered = {}
        for expr in exprs:
            name = _check(nvrtc.nvrtcGetLoweredName(prog, expr.encode()), f"lowered name of {expr!r}")
            lowered[expr] = name.decode() if isinstance(name, bytes) else str(name)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return CompileResult(
        source=source, arch=arch, options=options, cubin=bytes(cubin), ptx=ptx, log=log,
        lowered=lowered, resources=parse_ptxas_log(log), key=key, first_line=first_line,
    )


def _program_log(prog) -> str:
    from cuda.bindings import nvrtc

    size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
    buf = bytearray(size)
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return bytes(buf).rstrip(b"\0").decode(errors="replace")


_DIAG = re.compile(rf"^{SOURCE_NAME}\((\d+)\): (error|warning|catastrophic error)[^:]*: (.*)$", re.M)


def _headline(log: str) -> str:
    """One line for the reader: the first error with its line, and how many there were."""
    errors = [m for m in _DIAG.finditer(log) if "error" in m.group(2)]
    if not errors:
        fallback = log.strip().splitlines()[0] if log.strip() else ""
        first = next((line for line in log.splitlines() if "error" in line), fallback)
        return f"compile failed: {first.strip()}"
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"line {first.group(1)}: {first.group(3).strip()}{more}"


def annotate_log(log: str, source: str, first_line: int = 1) -> str:
    """The compiler log with each ``cell(N)`` diagnostic followed by the cell's line N and a marker.

    NVRTC already quotes the line for most errors; we add it where it does not and keep the log's
    own caret lines, dropping the noise of the final summary and of an empty log.
    """
    lines = source.splitlines()
    out: list[str] = []
    log_lines = log.strip("\n").splitlines()
    for i, text in enumerate(log_lines):
        if text.strip().endswith('detected in the compilation of "cell".') or text.strip() == "Compilation terminated.":
            continue
        if text.startswith("ptxas info") or text.startswith("ptxas         ."):
            continue
        out.append(text)
        match = _DIAG.match(text)
        if match:
            number = int(match.group(1))
            quoted = i + 1 < len(log_lines) and log_lines[i + 1].strip() and not _DIAG.match(log_lines[i + 1])
            index = number - first_line
            if not quoted and 0 <= index < len(lines):
                out.append(f"  {number:>4} | {lines[index]}")
    return "\n".join(line for line in out).strip("\n")
