"""Compile a ``@triton.jit`` or ``@gluon.jit`` kernel for a GPU architecture without launching it, and without a GPU.

``triton.compile`` runs the whole pipeline on the CPU: Python AST -> TTIR -> TTGIR (layouts, pipelining
for ``num_stages``) -> LLVM IR -> PTX -> CUBIN (Triton's bundled ``ptxas``). Only *loading* the CUBIN needs
the driver, and that is also where Triton reads the register and spill counts (``CompiledKernel.n_regs``
stays unset until then). So the resource report here comes from re-running the same ``ptxas`` with the
same flags Triton used and ``-v`` (deterministic: the same PTX and flags give the same code), parsed by
:func:`labmagic.compiler.resources.parse_ptxas_log`, the parser of the CUDA path.

Under ``TRITON_INTERPRET=1`` (labmagic's setting on a machine without a GPU) ``@triton.jit`` yields an
interpreter function; its Python function is wrapped in a fresh ``triton.JITFunction`` for compiling.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import re
import subprocess
import tempfile
from typing import Any

from ..errors import CompileError, LabError, ToolMissingError
from ..runtime import target_arch
from .resources import Resources, parse_ptxas_log

#: The stages a panel can show, in pipeline order.
IR_STAGES = ("ttir", "ttgir", "llir", "ptx")


@dataclasses.dataclass
class TritonCompile:
    """One compile of a Triton kernel: its IRs, CUBIN and the compiler's resource report."""

    name: str
    arch: str  # sm_90: the occupancy rules' key (Triton compiles capability 90 as sm_90a)
    irs: dict[str, str]  # IR_STAGES present, as text
    cubin: bytes
    shared: int  # bytes of shared memory Triton allocates per block (passed as dynamic smem at launch)
    num_warps: int
    num_stages: int
    signature: dict[str, str]
    constexprs: dict[str, Any]
    resources: Resources | None
    ptxas_log: str
    source: str  # the kernel's Python source
    first_line: int  # its first line's number in its file (SASS line markers use the file's numbers)


def parse_signature(signature) -> dict[str, str]:
    """``"x: *fp32, y: *fp32, n: i32"`` (or a dict) -> ``{"x": "*fp32", ...}``."""
    if isinstance(signature, dict):
        return {str(k): str(v) for k, v in signature.items()}
    out = {}
    for part in filter(None, (p.strip() for p in str(signature).split(","))):
        name, sep, kind = part.partition(":")
        if not sep or not name.strip() or not kind.strip():
            raise LabError(f"signature entry {part!r} is not 'name: type' (e.g. 'x: *fp32, n: i32')")
        out[name.strip()] = kind.strip()
    return out


def is_gluon(kernel) -> bool:
    """A ``@gluon.jit`` kernel (Triton's lower-level dialect: the layouts, shared memory and barriers are the
    programmer's). It has no interpreter, so it stays a JIT function under ``TRITON_INTERPRET=1`` too."""
    try:
        from triton.experimental.gluon._runtime import GluonJITFunction
    except ImportError:  # a Triton without Gluon (before 3.4)
        return False
    return isinstance(kernel, GluonJITFunction)


def python_function(kernel):
    """The Python function behind ``@triton.jit`` (a JITFunction, or the interpreter's wrapper)."""
    fn = kernel
    while hasattr(fn, "fn") and not inspect.isfunction(fn):
        fn = fn.fn
    if not inspect.isfunction(fn):
        raise LabError(f"{kernel!r} is not a @triton.jit kernel")
    return fn


def capability_of(arch: str | int | None) -> int:
    """``"sm_90a"``, ``"sm_90"``, ``90`` or None (this GPU's, else sm_90) -> 90."""
    arch = arch if arch is not None else target_arch()
    m = re.fullmatch(r"(?:sm_)?(\d+)[af]?", str(arch))
    if not m:
        raise LabError(f"architecture {arch!r} is not like sm_90 or 90")
    return int(m.group(1))


def _signature_from_args(names: list[str], args, constexprs: dict) -> dict[str, str]:
    from triton.runtime.jit import mangle_type

    if isinstance(args, dict):
        values = args
    else:
        runtime = [n for n in names if n not in constexprs]
        if len(args) != len(runtime):
            raise LabError(f"{len(args)} example arguments for {len(runtime)} parameters ({', '.join(runtime)})")
        values = dict(zip(runtime, args))
    return {name: mangle_type(value) for name, value in values.items()}


def compile_triton(kernel, signature=None, constexprs: dict | None = None, *, args=None, num_warps: int = 4,
                   num_stages: int = 3, arch: str | int | None = None, aligned=None) -> TritonCompile:
    """Compile ``kernel`` (``@triton.jit`` or ``@gluon.jit``) for ``arch`` (default: this GPU's, else sm_90)
    without launching it. A Gluon kernel's TTGIR is its own layouts, as written; it has no TTIR.

    ``signature``: ``"x: *fp32, n: i32"`` or a dict, or ``args``: example arguments (tensors, ints) whose
    types Triton's own ``mangle_type`` names. ``constexprs``: values of the ``tl.constexpr`` parameters.
    ``aligned``: parameters to treat as divisible by 16, as Triton's launcher does for 16-byte aligned
    tensors and integers that are multiples of 16 (default: every pointer, plus the integer ``args`` that are
    multiples of 16). A masked ``n`` not known to be a multiple of 16 keeps loads scalar (``LDG.E``).
    """
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import get_ptxas
    except ImportError as exc:
        raise ToolMissingError(f"Triton with its NVIDIA backend is needed to compile a Triton kernel: {exc}") from exc
    fn = python_function(kernel)
    gluon = is_gluon(kernel)
    jit = kernel if gluon else triton.JITFunction(fn)
    constexprs = dict(constexprs or {})
    unknown = [k for k in constexprs if k not in jit.arg_names]
    if unknown:
        raise LabError(f"{fn.__name__} has no parameter {', '.join(unknown)}; parameters: {', '.join(jit.arg_names)}")
    sig = parse_signature(signature) if signature is not None else (
        _signature_from_args(jit.arg_names, args, constexprs) if args is not None else {})
    for name in constexprs:
        sig[name] = "constexpr"
    missing = [n for n in jit.arg_names if n not in sig]
    if missing:
        raise LabError(f"no type for {', '.join(missing)} of {fn.__name__}: give signature='{missing[0]}: i32, ...' "
                       "or example args, and constexprs for tl.constexpr parameters")
    sig = {n: sig[n] for n in jit.arg_names}  # parameter order, as Triton expects
    if aligned is None:
        values = dict(args) if isinstance(args, dict) else dict(
            zip([n for n in jit.arg_names if n not in constexprs], args or ()))
        aligned = [n for n, t in sig.items() if t.startswith("*")
                   or (t[:1] in "iu" and isinstance(values.get(n), int) and values[n] % 16 == 0)]
    attrs = {(jit.arg_names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    capability = capability_of(arch)
    if gluon:
        from triton.experimental.gluon._runtime import GluonASTSource as Source
    else:
        Source = triton.compiler.ASTSource
    source = Source(fn=jit, signature=sig, constexprs=constexprs, attrs=attrs)
    try:
        # The code generator must not see TRITON_INTERPRET=1: with it, constexpr helpers return raw values
        # and indexing such as ``rm[:, None]`` fails inside Triton. The scope restores the reader's setting.
        # Triton's code generator imports gluon, whose import asserts Triton's own @jit helpers are JITFunctions
        # unless interpreting: import it under the reader's setting first.
        import triton.compiler.code_generator  # noqa: F401

        with triton.knobs.runtime.scope(), _language_restored(), _helpers_compiled():
            triton.knobs.runtime.interpret = False
            compiled = triton.compile(source, target=GPUTarget("cuda", capability, 32),
                                      options={"num_warps": num_warps, "num_stages": num_stages})
    except Exception as exc:  # noqa: BLE001  (CompilationError, PTXASError, MLIR failures: all one line)
        # CompilationError reads "at L:C:", the source with a caret, then the reason: put the reason first.
        lines = [line for line in str(exc).strip().splitlines() if line.strip()] or [""]
        raise CompileError(f"Triton could not compile {fn.__name__} for sm_{capability}: "
                           f"{type(exc).__name__}: {lines[-1].strip()}", detail="\n".join(lines[:-1])) from exc
    meta = compiled.metadata
    log, resources = ptxas_report(get_ptxas(capability).path, compiled.asm["ptx"], meta.name,
                                  f"sm_{capability}a" if capability >= 90 else f"sm_{capability}",
                                  meta.enable_fp_fusion)
    lines, first_line = inspect.getsourcelines(fn)
    return TritonCompile(
        name=meta.name, arch=f"sm_{capability}", irs={k: compiled.asm[k] for k in IR_STAGES if k in compiled.asm},
        cubin=compiled.asm["cubin"], shared=meta.shared, num_warps=num_warps, num_stages=num_stages, signature=sig,
        constexprs=constexprs, resources=resources, ptxas_log=log, source="".join(lines), first_line=first_line)


@contextlib.contextmanager
def _language_restored():
    """Undo what the interpreter patches into ``triton.language`` during the compile.

    Under TRITON_INTERPRET=1 Triton's own ``@jit`` helpers (``tl.zeros``, ``tl.cdiv``...) are interpreter
    functions; if the code generator ever calls one (one that :func:`_helpers_compiled` did not swap), the
    interpreter patches ``triton.language`` for good, which would break every later compile and launch in the
    session. This keeps the session usable whatever the compile does.
    """
    import triton.language as tl

    owners = [tl, tl.core, tl.tensor, tl.math, tl.core.tensor_descriptor_base]
    _undo_leaked_patches(tl, owners)
    saved = [dict(vars(owner)) for owner in owners]
    try:
        yield
    finally:
        for owner, before in zip(owners, saved):
            for name in [n for n in vars(owner) if n not in before]:
                delattr(owner, name)
            for name, value in before.items():
                if vars(owner).get(name, value) is not value:
                    setattr(owner, name, value)


def _from_interpreter(value) -> bool:
    func = value.func if isinstance(value, functools.partial) else value
    return getattr(func, "__module__", None) == "triton.runtime.interpreter"


def _undo_leaked_patches(tl, owners) -> None:
    """Put back what an interpreted kernel left patched in ``triton.language`` (Triton 3.6).

    A kernel run patches the language and restores it when the kernel returns, but a library helper it calls
    (``tl.max``, ``tl.sum``: interpreter functions too) patches ``triton.language.core`` again and never restores it,
    so ``tl.core.program_id`` stays a lambda over the interpreter's builder and every later compile fails
    ("'ir.value' object has no attribute 'dtype'"). A builtin's patch keeps the original as its ``member`` default;
    the others (``range``, ``multiple_of``...) are the same objects ``triton.language`` re-exports, which the kernel's
    own scope did restore.
    """
    for owner in owners:
        for name, value in list(vars(owner).items()):
            if not _from_interpreter(value):
                continue
            original = (getattr(value, "__kwdefaults__", None) or {}).get("member")
            if original is None and owner is tl.core and not _from_interpreter(getattr(tl, name, value)):
                original = getattr(tl, name)
            if original is not None:
                setattr(owner, name, original)


#: The JIT function compiled in place of each interpreter helper, made once a session: id -> (helper, JIT function);
#: the helper is kept, so its id cannot be reused by another object.
_HELPERS: dict[int, tuple[Any, Any]] = {}


@contextlib.contextmanager
def _helpers_compiled():
    """Triton's own ``@jit`` helpers as JIT functions for the duration of a compile.

    Under TRITON_INTERPRET=1 the helpers in ``triton.language`` (``tl.zeros``, ``tl.max``, ``tl.cdiv``, the
    reductions' combine functions) were made interpreter functions when Triton was imported, and the code
    generator refuses to call those ("Unsupported function referenced"). Each is swapped for a JIT function of
    the same Python function, so a kernel that uses them (any matmul or softmax, and Gluon's reductions) compiles
    as it would on a GPU machine; the interpreter's own are put back afterwards.
    """
    import sys

    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # no interpreter in this Triton: nothing to swap
        yield
        return
    import triton

    swapped = []
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("triton.language"):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, InterpretedFunction):
                if id(value) not in _HELPERS:
                    _HELPERS[id(value)] = (value, triton.JITFunction(value.fn))
                swapped.append((module, attr, value))
                setattr(module, attr, _HELPERS[id(value)][1])
    try:
        yield
    finally:
        for module, attr, value in swapped:
            setattr(module, attr, value)


def ptxas_report(ptxas: str, ptx: str, symbol: str, gpu_name: str, fp_fusion: bool) -> tuple[str, Resources | None]:
    """``ptxas -v`` on ``ptx`` with the flags Triton's ``make_cubin`` passes: (log, the kernel's Resources)."""
    with tempfile.TemporaryDirectory(prefix="labmagic-triton-") as folder:
        src = os.path.join(folder, "kernel.ptx")
        with open(src, "w") as fh:
            fh.write(ptx)
        cmd = [ptxas, "-lineinfo", *([] if fp_fusion else ["--fmad=false"]), "-v", "--regAllocOptLevel=2",
               f"--gpu-name={gpu_name}", src, "-o", os.path.join(folder, "kernel.cubin")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stderr + proc.stdout
    if proc.returncode != 0:
        return log, None
    return log, parse_ptxas_log(log).get(symbol)
