"""The Python kernel DSLs beside CUDA C, Triton and Pallas, and the open-source peers the races time beside the book's
kernels: which are installed, which can run here, and why not.

Each DSL is an optional install (``pip install 'labmagic[helion]'``, ``.[dsls]`` for all); the peers (``torchao``,
``gemlite``: the int8 linears serving stacks call; ``flashinfer``, ``fa3`` (FlashAttention 3's Hopper forward) and
``fa4`` (FlashAttention 4's CuTeDSL forward, sm_90 and later): attention; ``quack`` and ``liger``, the memory-bound
kernels people deploy) are one extra, ``.[peers]``, which CI does not
install. A chapter writes its variants for a DSL, or over a peer's API, in a ``%%dsl NAME`` cell
(:mod:`labmagic.magics.dsl_magic`).
Where the DSL cannot run, the cell is skipped and each variant it names becomes an :func:`unavailable` stand-in that
raises the reason: a race records :class:`DSLUnavailable` (not installed, or it fails to import) as a ``skipped`` row
and :class:`NoGPUError` as ``needs_gpu``, never as a failed chapter.

Without a GPU:

- ``gluon`` (``triton.experimental.gluon``): no interpreter, so its rows read ``needs_gpu``; its cells are
  skipped, except a ``%%dsl gluon --compile`` cell, which runs to compile its kernels for the GPU (their compile
  panels, :func:`labmagic.triton_panel`) and guards its launches with :func:`labmagic.has_gpu`;
- ``helion``: runs eagerly in PyTorch on the CPU (:func:`environment`);
- the peers need a GPU (torchao's int8 kernels and FA3's are CUDA; gemlite's and Liger's Triton is not written
  for Triton's interpreter; FlashInfer compiles with nvcc; quack is CuTeDSL, sm_90 and later, like ``cutedsl``);
- ``tilelang`` and ``cutedsl`` (``cutlass.cute``): need a GPU (both compile without one, but their variants here
  compile when first launched). TileLang builds with nvcc: :func:`environment` points ``CUDA_HOME`` at a toolkit.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import LabError, NoGPUError
from .runtime import gpu_arch, has_gpu
from .tools import locate


class DSLUnavailable(LabError):
    """This DSL is not installed, or cannot run on this machine: the variant's row is ``skipped``, with why."""


@dataclass(frozen=True)
class DSL:
    name: str          #: the key: ``%%dsl gluon``, the pip extra ``labmagic[gluon]``
    module: str        #: what a cell imports
    dist: str          #: the distribution whose version goes with the rows
    interpret: bool    #: runs on a machine without a GPU (an interpreter or eager mode)
    min_arch: int = 80  #: the oldest compute capability (major * 10 + minor) its variants here compile for
    compiles: bool = False  #: compiles its kernels for a GPU that this machine does not have (``%%dsl --compile``)
    #: loggers that report every compile at INFO into the cell's output; labmagic keeps them at WARNING
    loggers: tuple[str, ...] = ()
    #: sets what the DSL reads from the environment once, at import; run before anything imports it (finding a
    #: submodule imports its parent package) and kept for the session
    prepare: Callable[[], None] | None = None
    #: the pip extra that installs it (default: its name); the peers share ``peers``
    extra: str = ""
    #: a library whose kernels a race times beside the book's (a peer), rather than a language to write kernels in
    peer: bool = False
    #: how tables and prose name it ("FA3"); its name where empty
    title: str = ""

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.dist)
        except importlib.metadata.PackageNotFoundError:
            return "-"


def _point_at_toolkit() -> None:
    """TileLang builds its kernels with nvcc and reads ``CUDA_HOME`` once, at import; its own search follows
    ``which nvcc``, which a wrapper script misleads. Where ``CUDA_HOME`` is unset, point it at the toolkit that holds
    the ``nvcc`` labmagic finds (kept for the session: every later compile needs the same toolkit)."""
    if os.environ.get("CUDA_HOME"):
        return
    nvcc = locate("nvcc")
    if nvcc:
        home = Path(nvcc).resolve().parent.parent
        if (home / "include" / "cuda.h").is_file():
            os.environ["CUDA_HOME"] = str(home)


def _prepare_tilelang() -> None:
    """TileLang: the toolkit (:func:`_point_at_toolkit`), and no warning from the progress bar it imports: under a
    Jupyter kernel without ipywidgets, ``tqdm.auto`` warns "IProgress not found" into the cell's output, about a
    widget the book never shows (TileLang's autotuner is not used)."""
    _point_at_toolkit()
    warnings.filterwarnings("ignore", message="IProgress not found")


def _dump_outside_the_book() -> None:
    """CuTeDSL writes the PTX and CUBIN that a compile keeps (``--keep-ptx``, ``--keep-cubin``: a compile panel's
    inputs) into ``CUTE_DSL_DUMP_DIR``, by default the working directory, which for a chapter is ``book/``. Where
    it is unset, point it at a temporary folder (kept for the session: CuTeDSL reads it when it is imported)."""
    if not os.environ.get("CUTE_DSL_DUMP_DIR"):
        os.environ["CUTE_DSL_DUMP_DIR"] = tempfile.mkdtemp(prefix="labmagic-cutedsl-")


#: The DSLs the book knows. A new one is an entry here and a ``%%dsl`` cell in a chapter, not a new harness.
DSLS: dict[str, DSL] = {d.name: d for d in (
    DSL("gluon", "triton.experimental.gluon", "triton", interpret=False, compiles=True),
    DSL("helion", "helion", "helion", interpret=True),
    DSL("tilelang", "tilelang", "tilelang", interpret=False, loggers=("tilelang",), prepare=_prepare_tilelang),
    DSL("cutedsl", "cutlass.cute", "nvidia-cutlass-dsl", interpret=False, min_arch=90,
        prepare=_dump_outside_the_book),
    DSL("torchao", "torchao", "torchao", interpret=False, extra="peers", peer=True),
    DSL("gemlite", "gemlite", "gemlite", interpret=False, extra="peers", peer=True),
    DSL("flashinfer", "flashinfer", "flashinfer-python", interpret=False, extra="peers", peer=True,
        title="FlashInfer"),
    DSL("quack", "quack", "quack-kernels", interpret=False, min_arch=90, extra="peers", peer=True,
        prepare=_dump_outside_the_book),
    DSL("liger", "liger_kernel", "liger-kernel", interpret=False, extra="peers", peer=True, title="Liger"),
    DSL("fa3", "fa3_fwd_interface", "fa3-fwd", interpret=False, min_arch=90, extra="peers", peer=True,
        title="FA3"),
    DSL("fa4", "flash_attn.cute", "flash-attn-4", interpret=False, min_arch=90, extra="peers", peer=True,
        prepare=_dump_outside_the_book, title="FA4"),
)}


def get(name: str) -> DSL:
    try:
        return DSLS[name]
    except KeyError:
        raise LabError(f"unknown DSL {name!r}; labmagic knows {', '.join(DSLS)}") from None


def _prepare(dsl: DSL) -> None:
    if dsl.prepare is not None:
        dsl.prepare()


def _importable(dsl: DSL) -> bool:
    _prepare(dsl)
    try:
        return importlib.util.find_spec(dsl.module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken install
        return False


def why_not(name: str) -> LabError | None:
    """Why the DSL's variants cannot run here, as the error their stand-ins raise (None: they can run).

    Not installed, or installed but failing to import against this torch or triton (a version mismatch), is
    :class:`DSLUnavailable` (a ``skipped`` row); installed but with no interpreter on a machine without a GPU, or a
    GPU older than the DSL's ``min_arch``, is :class:`~labmagic.NoGPUError` (``needs_gpu``, as a CUDA variant's
    row reads there). The DSL is imported, in its :func:`environment`, only when it could run."""
    dsl = get(name)
    if not _importable(dsl):
        return DSLUnavailable(f"{name} is not installed (pip install 'labmagic[{dsl.extra or name}]')")
    if not has_gpu() and not dsl.interpret:
        return NoGPUError(f"{name} runs on a GPU only: its variants need one" if dsl.peer
                          else f"{name} has no interpreter: its variants need a GPU")
    digits = re.sub(r"\D", "", gpu_arch() or "")
    if digits and int(digits) < dsl.min_arch:
        return NoGPUError(f"{name}'s variants here need sm_{dsl.min_arch} or newer; this GPU is {gpu_arch()}")
    return _import_error(dsl)


def compiles_here(name: str) -> bool:
    """Whether a ``%%dsl NAME --compile`` cell runs on this machine to compile its kernels without launching them:
    there is no GPU, and the DSL is installed, imports, and compiles for a GPU it does not see (Gluon: the whole
    pipeline down to the CUBIN runs on the CPU)."""
    dsl = get(name)
    return dsl.compiles and not has_gpu() and _importable(dsl) and _import_error(dsl) is None


def _import_error(dsl: DSL) -> DSLUnavailable | None:
    with environment(dsl.name):
        try:
            importlib.import_module(dsl.module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the reason for the skipped rows
            text = str(exc).strip().splitlines()
            return DSLUnavailable(f"{dsl.name} {dsl.version()} does not import here: {type(exc).__name__}: "
                                  f"{text[0] if text else ''}"[:300])
    for logger in dsl.loggers:  # after the import, which sets their level
        logging.getLogger(logger).setLevel(logging.WARNING)
    return None


def header(name: str, compile_only: bool = False) -> str:
    """The line a ``%%dsl`` cell prints first: which version of the DSL runs, and how (what its rows came from)."""
    dsl = get(name)
    how = " (compile only: no GPU here)" if compile_only else "" if has_gpu() else " (eager, on the CPU)"
    return f"{name} {dsl.version()}{how}"


@contextlib.contextmanager
def environment(name: str):
    """The environment a DSL's cell runs in. First what the DSL reads once at import (its ``prepare``), kept for
    the session. Then, for the cell only, Helion without a GPU: ``HELION_INTERPRET=1`` (its kernels run eagerly in
    PyTorch), which Helion refuses beside labmagic's ``TRITON_INTERPRET=1``; Helion reads both when a kernel is
    decorated, so Triton's interpreter is switched off for the cell."""
    _prepare(get(name))
    changes = {"HELION_INTERPRET": "1", "TRITON_INTERPRET": None} if name == "helion" and not has_gpu() else {}
    saved = {key: os.environ.get(key) for key in changes}
    try:
        for key, value in changes.items():
            _set_env(key, value)
        yield
    finally:
        for key, value in saved.items():
            _set_env(key, value)


def _set_env(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def unavailable(error: LabError, variant: str):
    """A stand-in for a variant whose DSL cannot run here: calling it raises ``error``'s kind, naming the variant."""

    def stand_in(*args, **kwargs):
        raise type(error)(f"{variant}: {error}")

    stand_in.__name__ = stand_in.__qualname__ = variant
    stand_in.__doc__ = f"{variant} is skipped here: {error}."
    stand_in.labmagic_stand_in = True
    return stand_in


def is_stand_in(value) -> bool:
    """Whether ``value`` is an :func:`unavailable` stand-in rather than a variant."""
    return getattr(value, "labmagic_stand_in", False) is True
