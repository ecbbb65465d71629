"""Where a number came from: the machine, the software, the commit, and the exact variant source.

A row in ``results/`` is only worth keeping if a reader can tell, months later, which GPU, driver and
library versions produced it and whether the kernel has changed since. :func:`source_hash` therefore
hashes not only the variant's own Python but what it calls: the CUDA source of ``%%cuda_kernel``
kernels (their ``__labmagic_source__``), Triton kernels' source, and helper functions, two levels
deep, so that editing a kernel changes the hash of every variant that launches it.
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import functools
import hashlib
import importlib.metadata
import inspect
import os
import subprocess
import types

from ..runtime import gpu_name
from ..store.schema import PROVENANCE_FIELDS

#: The columns :func:`collect` fills: the schema's provenance columns.
FIELDS = PROVENANCE_FIELDS


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


@functools.cache
def driver_version() -> str:
    """The NVIDIA driver (``580.95.05``) via NVML, else the CUDA driver API version (``13.0``), else ``-``."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() == 0:
            buf = ctypes.create_string_buffer(96)
            if nvml.nvmlSystemGetDriverVersion(buf, 96) == 0:
                return buf.value.decode()
    except (OSError, AttributeError):
        pass
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if cuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return f"cuda-{version.value // 1000}.{version.value % 1000 // 10}"
    except OSError:
        pass
    return "-"


def git_commit() -> str:
    """HEAD of the checkout, with ``-dirty`` when tracked files differ from it (asked anew each run:
    a notebook session outlives commits). A copy of the tree without ``.git`` (a remote GPU host fed
    by rsync) can name its commit in ``LABMAGIC_GIT_COMMIT``."""
    from ..paths import repo_root

    if os.environ.get("LABMAGIC_GIT_COMMIT"):
        return os.environ["LABMAGIC_GIT_COMMIT"]
    root = str(repo_root())
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        if not head:
            return "-"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "-"


def collect() -> dict[str, str]:
    """Provenance of a run on this machine (one dict, the same for every row of the run)."""
    try:
        import torch

        cuda = torch.version.cuda or "-"
    except ImportError:
        cuda = "-"
    return {
        "gpu": gpu_name() or "cpu",
        "driver": driver_version(),
        "cuda": cuda,
        "torch": _version("torch"),
        "triton": _version("triton"),
        "jax": _version("jax"),
        "git_commit": git_commit(),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def own_text(obj) -> str | None:
    """The source text that defines ``obj`` itself, or None when it has none we can read."""
    # CUDA kernels from %%cuda_kernel, and modules from labmagic.compile_cuda when they carry it too.
    src = getattr(obj, "__labmagic_source__", None)
    if isinstance(src, str):
        return src
    kernels = getattr(obj, "kernels", None)  # a labmagic.compile_cuda module: its kernels carry the source
    if isinstance(kernels, dict) and kernels:
        texts = {getattr(k, "__labmagic_source__", None) for k in kernels.values()} - {None}
        if texts:
            return "\n".join(sorted(texts))
    src = getattr(obj, "src", None)  # triton.JITFunction keeps its Python source here
    if isinstance(src, str):
        return src
    if isinstance(obj, functools.partial):
        return (own_text(obj.func) or "") + repr(obj.args) + repr(sorted(obj.keywords))
    target = getattr(obj, "fn", None) if not inspect.isroutine(obj) else obj
    target = inspect.unwrap(target) if target is not None else None
    if inspect.isroutine(target):
        try:
            return inspect.getsource(target)
        except (OSError, TypeError):
            code = getattr(target, "__code__", None)
            return repr((code.co_code, code.co_consts)) if code else None
    return None


def referenced(obj) -> list:
    """Objects a function's code names, through its globals and closure (nested code included)."""
    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *obj.keywords.values()]
    fn = obj if inspect.isfunction(obj) else getattr(obj, "fn", None)
    fn = inspect.unwrap(fn) if inspect.isfunction(fn) else None
    if fn is None:
        return []
    names, stack = [], [fn.__code__]
    while stack:
        code = stack.pop()
        names.extend(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    found = [fn.__globals__[n] for n in dict.fromkeys(names) if n in fn.__globals__]
    for cell in fn.__closure__ or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:
            pass
    return [o for o in found if not isinstance(o, (types.ModuleType, type))]


def source_hash(fn, depth: int = 2) -> str:
    """12 hex digits of sha256 over ``fn``'s source and that of what it references, ``depth`` levels deep.

    Referenced objects contribute if they carry source: ``__labmagic_source__`` (CUDA kernels), ``.src``
    (Triton), or Python source (functions); modules, classes and plain data are ignored, so the hash
    moves when code moves and not when a global number changes.
    """
    digest = hashlib.sha256()
    seen: set[int] = set()

    def visit(obj, level: int) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        text = own_text(obj)
        if text is None:
            return
        digest.update(text.encode())
        if level < depth:
            for ref in referenced(obj):
                visit(ref, level + 1)

    visit(fn, 0)
    if not seen or digest.digest() == hashlib.sha256().digest():
        digest.update(repr(fn).encode())
    return digest.hexdigest()[:12]


def chapter_fingerprint(chapter: str) -> str:
    """The source hash of ``book/<chapter>.ipynb`` as it is on disk now (its code cells and the headers and kernel
    files they use: :func:`labmagic.store.fingerprint.chapter_hash`), which every row of a race carries, so that a
    row stays current exactly while its chapter still hashes the same, whether or not the sweep it came from
    finished; '' for a race whose chapter is not a notebook of the book (a script's, a test's)."""
    from ..errors import LabError
    from ..paths import book_dir
    from ..store.fingerprint import chapter_hash

    notebook = book_dir() / f"{chapter}.ipynb"
    try:
        return chapter_hash(notebook) if notebook.is_file() else ""
    except LabError:  # a notebook that is not one: its races cannot be running, but a row must not fail for it
        return ""
