"""CUDA C++ to CUBIN through NVRTC, with no GPU needed, cached in memory and on disk.

NVRTC is driven through ``cuda.bindings.nvrtc`` (cuda-python) rather than a wrapper, so every option
a kernel author knows from nvcc's device side (``-use_fast_math``, ``-DTILE=32``,
``--maxrregcount=64``, ...) passes through unchanged. ``--ptxas-options=-v`` is always on: its log is
the compiler's own resource report (registers, shared memory, stack frame, spills), which is what the
notebook prints under each cell.

The cache key is the source, the options, the architecture, the name expressions and NVRTC's version,
hashed; a hit in memory costs a hash and a dict lookup, a hit on disk a file read.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import time
from pathlib import Path

from .errors import CompileError
from .paths import atomic_write, cache_dir
from .resources import Resources, parse_ptxas_log
from .runtime import target_arch

#: Name NVRTC gives the source; compiler messages read ``cell(LINE): error: ...``.
SOURCE_NAME = "cell"


@dataclasses.dataclass(frozen=True)
class CompileResult:
    """Everything one compile produced. ``lowered`` maps each kernel's expression to its symbol."""

    source: str
    arch: str
    options: tuple[str, ...]
    cubin: bytes
    ptx: str | None
    log: str
    lowered: dict[str, str]
    resources: dict[str, Resources]
    key: str
    first_line: int = 1
    #: Where this result came from: ``compiled``, ``memory`` or ``disk``; and how long it took.
    origin: str = "compiled"
    seconds: float = 0.0

    @property
    def cubin_path(self) -> Path:
        """The CUBIN on disk (written by the cache), for tools that want a file (CuPy, nvdisasm)."""
        path = cache_dir() / f"{self.key}.cubin"
        if not path.exists():
            atomic_write(path, self.cubin)
        return path


@functools.lru_cache(maxsize=None)
def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=None)
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


_MEMORY: dict[str, CompileResult] = {}


def cache_key(source: str, arch: str, options: tuple[str, ...], name_expressions: tuple[str, ...]) -> str:
    text = json.dumps([source, arch, list(options), list(name_expressions), nvrtc_version()])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


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
    from .signature import parse_kernels

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
    key = cache_key(source, arch, options, exprs_t)
    if use_cache:
        hit = _MEMORY.get(key)
        if hit is not None:
            return dataclasses.replace(hit, origin="memory", seconds=0.0)
        start = time.perf_counter()
        hit = _load_disk(key)
        if hit is not None:
            hit = dataclasses.replace(hit, origin="disk", seconds=time.perf_counter() - start)
            _MEMORY[key] = hit
            return hit
    start = time.perf_counter()
    result = _nvrtc_compile(source, arch, options, exprs_t, key, first_line)
    result = dataclasses.replace(result, seconds=time.perf_counter() - start)
    if use_cache:
        _MEMORY[key] = result
        _store_disk(result)
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
        first = next((line for line in log.splitlines() if "error" in line), log.strip().splitlines()[0] if log.strip() else "")
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
        if text.strip().endswith("detected in the compilation of \"cell\".") or text.strip() == "Compilation terminated.":
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


def _load_disk(key: str) -> CompileResult | None:
    folder = cache_dir()
    meta_path, cubin_path = folder / f"{key}.json", folder / f"{key}.cubin"
    try:
        meta = json.loads(meta_path.read_text())
        cubin = cubin_path.read_bytes()
    except (OSError, ValueError):
        return None
    try:
        return CompileResult(
            source=meta["source"], arch=meta["arch"], options=tuple(meta["options"]), cubin=cubin,
            ptx=meta.get("ptx"), log=meta["log"], lowered=dict(meta["lowered"]),
            resources=parse_ptxas_log(meta["log"]), key=key, first_line=meta.get("first_line", 1),
        )
    except KeyError:
        return None


def _store_disk(result: CompileResult) -> None:
    folder = cache_dir()
    try:
        atomic_write(folder / f"{result.key}.cubin", result.cubin)
        meta = {
            "source": result.source, "arch": result.arch, "options": list(result.options), "ptx": result.ptx,
            "log": result.log, "lowered": result.lowered, "first_line": result.first_line,
            "nvrtc": nvrtc_version(),
        }
        atomic_write(folder / f"{result.key}.json", json.dumps(meta).encode())
    except OSError:
        pass  # a read-only home must not break compiling; the memory cache still works
