"""CUDA C++ to CUBIN through NVRTC, with no GPU needed, cached in memory and on disk.

NVRTC is driven through ``cuda.bindings.nvrtc`` (cuda-python) rather than a wrapper, so every option
a kernel author knows from nvcc's device side (``-use_fast_math``, ``-DTILE=32``,
``--maxrregcount=64``, ...) passes through unchanged. ``--ptxas-options=-v`` is always on: its log is
the compiler's own resource report (registers, shared memory, stack frame, spills), which is what the
notebook prints under each cell.

NVRTC looks for headers in the toolkit's folders, then in the cell's own ``-I`` folders, then in the book's include
folder (:func:`labmagic.paths.book_include_dir`), so a cell may say ``#include <lab/vec.cuh>``.

The cache (:mod:`labmagic.compiler.cache`) is keyed by the source, the options, the architecture, the name
expressions, the first line's number, NVRTC's version, the include folders, and every ``#include`` with where it led
and the text of each header it read, transitively (:mod:`.includes`): an edited header is a new key. A hit in memory
costs that scan, a hash and a dict lookup; a hit on disk a file read and its checks. A miss runs NVRTC in a child
process with a time and a memory limit (:mod:`labmagic.compiler.sandbox`); a header edited while NVRTC ran leaves
that compile out of the cache.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time

from ..errors import CompileError
from ..paths import book_include_dir
from ..runtime import target_arch
from . import cache, includes, sandbox, type_probe
from .compile_log import SOURCE_NAME, Context, compile_error, name_map_errors, only_name_map_errors
from .compile_result import CompileResult
from .resources import parse_ptxas_log
from .signature import parse_kernels

#: Bumped when what the key covers changes, so that no entry written under the old rules is found.
KEY_FORMAT = 2


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
    ``-I`` folders in ``options`` come before the book's include folder; ``result.headers`` lists every header the
    compile read that is not the toolkit's. NVRTC runs in a child process stopped at ``timeout_s`` seconds or
    ``memory_gb`` GiB (:mod:`.sandbox`).
    """
    arch = arch or target_arch()
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise CompileError(f"--arch {arch!r} is not a real architecture such as sm_80, sm_90 or sm_90a")
    options = tuple(options)
    if lineinfo and "-lineinfo" not in options and "--generate-line-info" not in options:
        options = ("-lineinfo", *options)
    required = list(dict.fromkeys(name_expressions))
    plain = [k.qualified_name for k in parse_kernels(source) if not k.template_params]
    # An overloaded name is no expression NVRTC can place: each overload is named by a cast (-n '(void(*)(T))f').
    kernels = [k for k in dict.fromkeys(plain) if plain.count(k) == 1 and k not in required]
    probes = [type_probe.expression(t) for t in dict.fromkeys(type_probes)]
    search = search_path(options)
    found = includes.scan(source, search)
    inputs = _key_inputs(source, arch, options, (*required, *kernels, *probes), first_line, search, found)
    key = cache.cache_key(inputs)
    cached = use_cache and found.complete  # an include the scan cannot follow: nothing vouches for a cached CUBIN
    if cached:
        hit = cache.lookup(key)
        if hit is not None:
            return hit
    limits = sandbox.limits(timeout_s, memory_gb)
    start = time.perf_counter()
    program = _Program(source, arch, options, first_line, limits, search, found)
    result = dataclasses.replace(_compile_known(program, required, kernels, probes), key=key,
                                 seconds=time.perf_counter() - start)
    if cached and includes.scan(source, search).trail == found.trail:  # no header changed while NVRTC read them
        cache.store(result, inputs)
    return result


def search_path(options: tuple[str, ...]) -> includes.SearchPath:
    """Where NVRTC looks for this compile's headers: the toolkit's folders, the ``-I`` folders of ``options``, the
    book's include folder, in that order; the cell's quoted includes from the working directory first."""
    own, pre = includes.include_options(options)
    book = _book_include_dir()
    project = (str(book),) if book is not None else ()
    toolkit = include_dirs()
    return includes.SearchPath(cwd=os.getcwd(), dirs=(*toolkit, *own, *project), toolkit=toolkit, project=project,
                               pre_includes=tuple(pre))


_BOOK_INCLUDE: dict[tuple, object] = {}


def _book_include_dir():
    """:func:`labmagic.paths.book_include_dir`, remembered per working directory and setting while the folder is
    there (finding the repository walks the working directory's parents: a cache hit should not pay that)."""
    where = (os.getcwd(), os.environ.get("LABMAGIC_INCLUDE_DIR"), os.environ.get("LABMAGIC_ROOT"))
    known = _BOOK_INCLUDE.get(where)
    if known is None or not known.is_dir():
        known = _BOOK_INCLUDE[where] = book_include_dir()
    return known


def _key_inputs(source: str, arch: str, options: tuple[str, ...], expressions: tuple[str, ...], first_line: int,
                search: includes.SearchPath, found: includes.Includes) -> list:
    """Everything the CUBIN, its log and its line labels depend on: what :func:`.cache.cache_key` hashes."""
    folders = [os.path.join(search.cwd, d) for d in search.dirs]
    return [KEY_FORMAT, source, arch, list(options), list(expressions), nvrtc_version(), first_line, folders,
            [list(step) for step in found.trail]]


@dataclasses.dataclass(frozen=True)
class _Program:
    source: str
    arch: str
    options: tuple[str, ...]
    first_line: int
    limits: tuple[float, float]
    search: includes.SearchPath
    found: includes.Includes

    def run(self, expressions: list[str], probes: bool) -> dict:
        """NVRTC's reply for this program with ``expressions`` (and the type probe's declaration)."""
        text = f'#line {self.first_line} "{SOURCE_NAME}"\n{self.source}{type_probe.DECLARATION if probes else ""}'
        options = [f"-arch={self.arch}", "--ptxas-options=-v", "--std=c++17"]
        options += [f"-I{d}" for d in self.search.toolkit]
        options += list(self.options)
        options += [f"-I{d}" for d in self.search.project]
        request = {"source": text, "name": SOURCE_NAME, "options": options, "expressions": expressions,
                   "cwd": self.search.cwd}
        return sandbox.run(request, *self.limits)

    @property
    def context(self) -> Context:
        return Context(self.source, self.first_line, self.search, self.found)


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
        broken = not only_name_map_errors(reply["log"])
        guesses = [e for e in (*kernels, *probes) if e in rejected]
        if not guesses and (not broken or not probes):
            break
        kernels = [k for k in kernels if k not in rejected]
        probes = [] if broken else [p for p in probes if p not in rejected]
    raise compile_error(reply["log"], program.context, {e: m for e, m in rejected.items() if e in required})


def _result(program: _Program, reply: dict, kernels: list[str], probes: list[str]) -> CompileResult:
    types = {}
    for expr in probes:
        canonical = type_probe.canonical_type(reply["lowered"][expr])
        if canonical is not None:
            types[type_probe.written_type(expr)] = canonical
    return CompileResult(
        source=program.source, arch=program.arch, options=program.options, cubin=reply["cubin"], ptx=reply["ptx"],
        log=reply["log"], lowered={e: reply["lowered"][e] for e in kernels}, resources=parse_ptxas_log(reply["log"]),
        key="", first_line=program.first_line, types=types, headers=program.found.headers,
    )
