"""Grade one submission, in the process that runs it (a child of the judge: :mod:`.judge_child`).

In order, stopping at the first thing that goes wrong:

1. **Rules** (:mod:`.source_rules`): the Python cells may not import another library, reach for the chapter's
   kernels or the judge, copy to the host, or build code at run time. -> ``refused``
2. **Build**: a fresh namespace, the standard imports (:data:`.submission.PREAMBLE`), then the marked cells, each
   compiled under a file name of its own (``<exercise cell 1>``) so that the torch monitor can tell the
   submission's calls from everyone else's. A cell that does not compile or raises -> ``not_graded``; no
   ``entry`` function -> ``not_graded``.
3. **Compiled code** (CUDA): the SASS of the cell's kernels must contain the instructions the exercise is about and
   nothing may spill -> ``fail``. Without a GPU a CUDA submission stops here: ``compiled``.
4. **Correctness**, on shapes and seeds drawn now: fresh inputs, outputs poisoned inside guard zones, every call
   under the torch monitor; then the first case again with new values written into the same buffers (a result kept
   from the first call shows). Wrong values, an error, a changed input -> ``fail``; torch calls, a returned input, a
   kept result, writes outside the output -> ``refused``. On a GPU the first call is also traced: foreign kernels,
   another stream, memcpys -> ``refused``.
5. **Speed**, on a GPU: timed like ``%bench`` (:class:`labmagic.timing.CudaTimer`: events, the L2 evicted before each
   call) at the bar's shape, the timed output checked again, the time held against the datasheet floor (below it:
   work skipped, ``refused``) and against the bar (``pass`` or ``fail``). Without a GPU: ``correct``, speed not
   graded.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import math
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from ..benchmark.checks import compare
from ..compiler import faults
from ..errors import CompileError, LabError
from ..runtime import device_slug, has_gpu
from . import buffers, source_rules, torch_calls
from .bars import bar_value, floor_ms
from .spec import Case, Exercise, Output
from .submission import PREAMBLE, Submission, cell_kind
from .verdict import COMPILED, CORRECT, FAIL, NOT_GRADED, PASS, REFUSED, Grade


class ContextLost(Exception):
    """The submission crashed the CUDA context: the process can grade nothing more. Carries the grade."""

    def __init__(self, grade: Grade):
        super().__init__(grade.verdict)
        self.grade = grade


class Stop(Exception):
    """Grading ends here with this status and one-line verdict."""

    def __init__(self, status: str, verdict: str, detail: str = ""):
        super().__init__(verdict)
        self.status, self.verdict, self.detail = status, verdict, detail


@dataclass
class Options:
    """How to grade: ``speed`` times on a GPU; ``progress(what)`` is told before every call (the parent's clock);
    ``slug`` names the GPU whose bar applies (default: this one's)."""

    seed: int | None = None
    speed: bool = True
    slug: str | None = None
    progress: Callable[[str], None] = field(default=lambda what: None)


def grade(exercise: Exercise, submission: Submission, shell, options: Options | None = None) -> Grade:
    """Grade ``submission`` for ``exercise`` in ``shell`` (an IPython shell with labmagic loaded)."""
    options = options or Options()
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    result = Grade(exercise=exercise.name, chapter=exercise.chapter, language=exercise.language,
                   origin=submission.origin)
    try:
        _grade(exercise, submission, shell, options, seed, result)
    except Stop as stop:
        result.status, result.verdict, result.detail = stop.status, stop.verdict, stop.detail
    except ContextLost:
        raise
    except Exception as exc:  # noqa: BLE001 - a failure of the judge itself is not the reader's pass
        result.status = NOT_GRADED
        result.verdict = f"the judge failed: {type(exc).__name__}: {exc}"
        result.detail = traceback.format_exc(limit=6)
    return result


def _grade(exercise: Exercise, submission: Submission, shell, options: Options, seed: int, result: Grade) -> None:
    gpu = has_gpu()
    refused = check_rules(submission, shell)
    if refused:
        result.checks.extend(refused)
        raise Stop(REFUSED, f"{refused[0]}")
    result.checks.append("rules: no other library, no host copies, no code built at run time")
    fn, namespace = build(exercise, submission, shell, options)
    own = own_kernel_names(namespace)
    if exercise.language == "cuda":
        result.checks.append(check_compiled(exercise, namespace))
        if not gpu:
            result.status, result.verdict = COMPILED, "compiles, spills nothing and has the instructions it needs"
            result.notes.append("correctness and speed not graded: needs a GPU (CUDA runs on one)")
            return
        if exercise.arch == "sm_90a" and not _hopper():
            raise Stop(NOT_GRADED, "this exercise needs a Hopper GPU (sm_90a: wgmma)")
    device = "cuda" if gpu else "cpu"
    result.seed = seed  # from here on, what is graded depends on the cases drawn
    rng = random.Random(seed)
    shapes = exercise.shapes(rng, gpu)
    names = input_names(exercise)
    for i, shape in enumerate(shapes):
        generator = _generator(device, rng.randrange(2**31))
        case = exercise.make_case(tuple(shape), generator, device)
        label = f"case {i + 1} of {len(shapes)} ({exercise.label(shape)}{', ' + case.note if case.note else ''})"
        outs = [buffers.allocate(spec, device) for spec in case.outputs]
        expected = exercise.reference(*case.inputs)
        options.progress(label)
        checked_call(fn, exercise, case, outs, expected, names, label)
        if i == 0:
            options.progress(f"{label}, again with new values in the same buffers")
            probe_cache(fn, exercise, case, outs, expected, names, shape, generator, device, label)
            if gpu:
                options.progress(f"{label}, traced")
                trace_first(fn, case, outs, own, label)
    result.checks.append(f"correct on {len(shapes)} cases drawn now ({'; '.join(exercise.label(s) for s in shapes)}), "
                         "outputs poisoned and guarded, no torch calls, no result kept between calls")
    if gpu:
        result.checks.append("kernels traced: its own, on the current stream, no memcpy")
    if not gpu:
        result.status, result.verdict = CORRECT, "correct on every case"
        result.notes.append("speed not graded: needs a GPU")
        return
    if not options.speed:
        result.status, result.verdict = CORRECT, "correct on every case"
        result.notes.append("speed not graded: timing was not asked for")
        return
    grade_speed(fn, exercise, options, rng, device, result)


# -- 1. rules -------------------------------------------------------------------------------------------------------

def check_rules(submission: Submission, shell) -> list[str]:
    """The rules each Python cell breaks (:mod:`.source_rules`), read from the cells as IPython runs them."""
    found = []
    for number, source in enumerate(submission.cells, 1):
        if cell_kind(source) == "python":
            found.extend(source_rules.violations(shell.transform_cell(source), f"cell {number}"))
    return found


# -- 2. build -------------------------------------------------------------------------------------------------------

def build(exercise: Exercise, submission: Submission, shell, options: Options):
    """Run the preamble and the cells in a fresh namespace; return the entry function and the namespace."""
    shell.reset(new_session=False)
    options.progress("building: the cells compile")
    run_cell(shell, PREAMBLE, "<exercise preamble>")
    for number, source in enumerate(submission.cells, 1):
        try:
            run_cell(shell, source, f"{torch_calls.CELL_PREFIX}{number}>")
        except CompileError as exc:
            first = str(exc).splitlines()[0] if str(exc) else "NVRTC rejected it"
            raise Stop(NOT_GRADED, f"cell {number} does not compile: {first}", exc.detail) from None
        except SyntaxError as exc:
            raise Stop(NOT_GRADED, f"cell {number} has a syntax error at line {exc.lineno}: "
                                   f"{exc.msg}") from None
        except LabError as exc:
            raise Stop(NOT_GRADED, f"cell {number}: {type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0] if str(exc) else ''}", exc.detail) from None
        except Exception as exc:  # noqa: BLE001 - any error in the reader's cell is reported, not raised
            if faults.is_sticky(exc):
                raise ContextLost(_crashed(exercise, submission, exc)) from None
            raise Stop(NOT_GRADED, f"cell {number} raised {type(exc).__name__}: {exc}") from None
    fn = shell.user_ns.get(exercise.entry)
    if not callable(fn):
        raise Stop(NOT_GRADED, f"the cells define no function {exercise.entry}: the exercise calls "
                               f"{exercise.signature}")
    return fn, shell.user_ns


def run_cell(shell, source: str, filename: str) -> None:
    """Run one cell as IPython would (magics included), compiled under ``filename``; its output is dropped."""
    code = shell.transform_cell(source)
    # Triton reads a kernel's source through linecache, as it does for IPython's own cells.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    compiled = compile(code, filename, "exec")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exec(compiled, shell.user_ns)  # noqa: S102 - running the reader's cell is the point


def own_kernel_names(namespace: dict) -> set[str]:
    """Names of the kernels the submission defined: the CUDA kernels and modules and the Triton functions its cells
    bound to names (a kernel kept only inside a function is not found, and counts as another library's)."""
    from ..compiler.kernel import CudaKernel, CudaModule

    names: set[str] = set()
    for value in list(namespace.values()):
        kernels = list(value.kernels.values()) if isinstance(value, CudaModule) else [value]
        cuda = [k for k in kernels if isinstance(k, CudaKernel)]
        for kernel in cuda:
            names.update({kernel.name.split("<")[0].split("::")[-1], kernel.symbol})
        if not cuda:
            fn = _triton_function(value)
            if fn is not None:
                names.add(fn.__name__)
    return names


def _triton_function(value):
    """The Python function of a Triton kernel (``@triton.jit``, possibly under ``@triton.autotune``), or None."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return None
    while value is not None and not isinstance(value, JITFunction):
        inner = getattr(value, "fn", None)
        if inner is None or inner is value or not type(value).__module__.startswith("triton"):
            return None
        value = inner
    return getattr(value, "fn", None) if value is not None else None


# -- 3. compiled code -----------------------------------------------------------------------------------------------

def check_compiled(exercise: Exercise, namespace: dict) -> str:
    """Spills and required instructions of the submission's CUDA kernels; a one-line account of their resources."""
    from ..compiler.kernel import CudaKernel

    kernels = {id(v): v for v in namespace.values() if isinstance(v, CudaKernel)}
    if not kernels:
        raise Stop(FAIL, "the cells compile no CUDA kernel (a %%cuda_kernel cell with a __global__ function)")
    report, opcodes, archs = [], set(), set()
    for kernel in kernels.values():
        res = kernel.resources
        archs.add(kernel.module.result.arch)
        if res is not None:
            if res.spills:
                raise Stop(FAIL, f"{kernel.name} spills registers to local memory ({res.spill_stores} B "
                                 f"stored, {res.spill_loads} B loaded): keep its arrays in registers")
            report.append(f"{kernel.name}: {res.registers} registers, {res.smem_static} B static shared")
    if exercise.arch and exercise.arch not in archs:
        raise Stop(NOT_GRADED, f"the kernels are compiled for {', '.join(sorted(archs))}; this exercise "
                               f"needs {exercise.arch} (`%%cuda_kernel --arch {exercise.arch}`)")
    if exercise.requires_sass:
        from ..analysis.sass import disassemble
        from ..errors import ToolMissingError

        try:
            for cubin in {id(k.module.result): k.module.result.cubin for k in kernels.values()}.values():
                opcodes.update(i.opcode for instrs in disassemble(cubin).values() for i in instrs)
        except ToolMissingError as exc:
            return f"compiled ({'; '.join(report)}); SASS not checked: {str(exc).splitlines()[0]}"
        for prefix, meaning in exercise.requires_sass:
            if not any(op.startswith(prefix) for op in opcodes):
                raise Stop(FAIL, f"the compiled kernels contain no {prefix} ({meaning}): the exercise is "
                                 "about that instruction")
        wanted = ", ".join(p for p, _ in exercise.requires_sass)
        return f"compiled, no spills ({'; '.join(report)}); SASS has {wanted}"
    return f"compiled, no spills ({'; '.join(report)})"


def _hopper() -> bool:
    from ..runtime import gpu_arch

    return (gpu_arch() or "").startswith("sm_90")


# -- 4. correctness -------------------------------------------------------------------------------------------------

def input_names(exercise: Exercise) -> list[str]:
    """The parameter names of ``exercise.signature`` (``copy(x, out)`` -> ``["x", "out"]``)."""
    inside = exercise.signature.partition("(")[2].rpartition(")")[0]
    return [p.strip().split("=")[0].strip() for p in inside.split(",") if p.strip()]


def call(fn, case: Case, outs: list) -> object:
    """One call, under the torch monitor; the device drained after it. Raises what the submission raised."""
    calls = torch_calls.TorchCalls()
    with torch_calls.monitor(calls):
        returned = fn(*case.inputs, *[o.tensor for o in outs])
    _synchronize()
    if calls.refused:
        raise Stop(REFUSED, f"{calls.describe()}")
    return returned


def checked_call(fn, exercise: Exercise, case: Case, outs: list, expected: tuple, names: list[str],
                 label: str) -> None:
    """Call once and hold the call to every rule of the contract; raise :class:`Stop` on the first breach."""
    before = buffers.snapshot(case.inputs)
    returned = guarded(lambda: call(fn, case, outs), exercise, label)
    check_returned(returned, case, outs, names)
    changed = buffers.changed_inputs(case.inputs, before, names)
    if changed:
        raise Stop(FAIL, f"{label}: the call changed its input {', '.join(changed)}: inputs are read-only")
    for out in outs:
        damage = out.guard_damage()
        if damage:
            raise Stop(REFUSED, f"{label}: {damage}")
    for out, want in zip(outs, expected):
        problem = compare_output(out.tensor, want, out.spec)
        if problem and _untouched([out]):
            problem = "not written: every element still holds the poison the judge filled it with"
        if problem:
            raise Stop(FAIL, f"{label}: `{out.spec.name}`: {problem}")


def guarded(thunk, exercise: Exercise, label: str):
    """Run the submission; what it raises becomes the grade (a crashed context ends the process's grading)."""
    try:
        return thunk()
    except Stop:
        raise
    except NotImplementedError as exc:
        raise Stop(FAIL, f"not written yet: {exercise.entry} raised NotImplementedError"
                         f"{': ' + str(exc) if str(exc) else ''}") from None
    except Exception as exc:  # noqa: BLE001 - the submission's error is its grade
        if faults.is_sticky(exc):
            raise ContextLost(Grade(exercise=exercise.name, chapter=exercise.chapter, language=exercise.language,
                                    status=NOT_GRADED, verdict=f"{label}: the call crashed the CUDA "
                                    f"context ({str(exc).splitlines()[0]}); find the faulting access with "
                                    "compute-sanitizer (%sanitize)")) from None
        text = str(exc).splitlines()[0] if str(exc) else ""
        raise Stop(FAIL, f"{label}: {type(exc).__name__}: {text}{_where(exc)}") from None


def _where(exc: BaseException) -> str:
    """`` (cell 2, line 7)``: the last frame of the traceback inside the submission's cells."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(torch_calls.CELL_PREFIX)]
    if not frames:
        return ""
    return f" ({frames[-1].filename[1:-1].removeprefix('exercise ')}, line {frames[-1].lineno})"


def check_returned(returned, case: Case, outs: list, names: list[str]) -> None:
    """The call returns nothing or its own output buffers; never (a view of) an input, never a tensor of its own."""
    if returned is None:
        return
    tensors = buffers.tensors_in(returned)
    inputs = [(n, x) for n, x in zip(names, case.inputs) if hasattr(x, "data_ptr")]
    for tensor in tensors:
        for name, x in inputs:
            if buffers.overlaps(tensor, x):
                raise Stop(REFUSED, f"returns (a view of) its input `{name}` instead of writing `"
                                    f"{outs[0].spec.name}`")
        if not any(buffers.overlaps(tensor, o.tensor) for o in outs):
            raise Stop(FAIL, "returns a tensor that is not its output buffer: write the result into `"
                             f"{'`, `'.join(o.spec.name for o in outs)}` (and return nothing or those)")
    if not tensors:
        raise Stop(FAIL, f"returns a {type(returned).__name__}: write the result into the output buffer "
                         "and return nothing or it")


def compare_output(out, want, spec: Output) -> str | None:
    """Why ``out`` does not match ``want`` under the output's tolerances, or None. With ``exact_nonfinite``, NaN and
    +/-inf in the reference must be matched exactly and only the finite rest is compared numerically."""
    import torch

    if tuple(out.shape) != tuple(want.shape):
        return f"shape {tuple(out.shape)} != expected {tuple(want.shape)}"
    got, ref = out.detach(), want.detach()
    if spec.exact_nonfinite and ref.is_floating_point():
        wild = ~torch.isfinite(ref)
        if bool(wild.any()):
            g, r = got[wild].double(), ref[wild].double()
            same = (torch.isnan(g) & torch.isnan(r)) | (g == r)
            if not bool(same.all()):
                k = int((~same).nonzero()[0])
                return (f"{int((~same).sum())} element(s) where the answer is NaN or infinite differ; the first "
                        f"holds {float(g[k]):.6g}, expected {float(r[k]):.6g}")
            got, ref = got[~wild], ref[~wild]
            if got.numel() == 0:
                return None
    checked = compare(got, ref, spec.rtol, spec.atol)
    return None if checked.ok else checked.reason


def probe_cache(fn, exercise: Exercise, case: Case, outs: list, expected: tuple, names: list[str], shape,
                generator, device: str, label: str) -> None:
    """Call again with new values written into the same input buffers and the outputs poisoned again: a submission
    that kept the first result (by shape, by address) returns it, or writes nothing."""
    fresh = exercise.make_case(tuple(shape), generator, device)
    for old, new in zip(case.inputs, fresh.inputs):
        if hasattr(old, "copy_") and hasattr(new, "shape") and old.shape == new.shape:
            old.copy_(new)
    for out in outs:
        out.poison()
    want = exercise.reference(*case.inputs)
    again = f"{label}, again with new values in the same buffers"
    try:
        checked_call(fn, exercise, case, outs, want, names, again)
    except Stop as stop:
        if stop.status == FAIL and _same_as(outs, expected):
            raise Stop(REFUSED, "caches results across calls: called again with new values in the same "
                                "buffers, it returned the first call's result") from None
        if stop.status == FAIL and _untouched(outs):
            raise Stop(REFUSED, "caches results across calls: called again with new values in the same "
                                "buffers, it wrote nothing") from None
        raise


def _same_as(outs: list, expected: tuple) -> bool:
    return all(compare_output(o.tensor, e, o.spec) is None for o, e in zip(outs, expected))


def _untouched(outs: list) -> bool:
    import torch

    for out in outs:
        probe = buffers.allocate(out.spec, str(out.tensor.device))
        if not torch.equal(out.tensor.view(-1).view(torch.uint8), probe.tensor.view(-1).view(torch.uint8)):
            return False
    return True


def trace_first(fn, case: Case, outs: list, own: set[str], label: str) -> None:
    """On a GPU: the kernels of one call, their streams and copies (:mod:`.kernel_trace`)."""
    from .kernel_trace import problems, trace_call

    for out in outs:
        out.poison()
    events = trace_call(lambda: fn(*case.inputs, *[o.tensor for o in outs]))
    refusals, _notes = problems(events, own)
    if refusals:
        raise Stop(REFUSED, f"{refusals[0]}")


# -- 5. speed -------------------------------------------------------------------------------------------------------

def grade_speed(fn, exercise: Exercise, options: Options, rng: random.Random, device: str, result: Grade) -> None:
    """Time at the bar's shape, check the timed output again, and hold the time to the floor and the bar."""
    from ..timing import CudaTimer

    slug = options.slug or device_slug()
    bar = bar_value(exercise, slug)
    shape = exercise.bar.shape
    at = exercise.label(shape)
    label = f"timed case ({at})"
    sets = []
    for _ in range(2):
        case = exercise.make_case(tuple(shape), _generator(device, rng.randrange(2**31)), device)
        sets.append((case, [buffers.allocate(spec, device) for spec in case.outputs]))
    options.progress(f"timing at {at}")
    args = [tuple(case.inputs) + tuple(o.tensor for o in outs) for case, outs in sets]
    timing = guarded(lambda: CudaTimer().time(fn, args, set_bytes=int(exercise.nbytes(*shape))), exercise, label)
    case, outs = sets[timing.output_set]
    for out, want in zip(outs, exercise.reference(*case.inputs)):
        problem = compare_output(out.tensor, want, out.spec)
        if problem:
            raise Stop(FAIL, f"{label}: the timed calls' `{out.spec.name}` is wrong: {problem}")
    judge_time(result, timing.median_ms, timing.method, at, bar, floor_ms(exercise, slug), slug)


def judge_time(result: Grade, ms: float, method: str, at: str, bar, floor: float | None, slug: str) -> None:
    """The speed part of the grade: below the datasheet floor is work skipped (refused); no bar for this GPU leaves
    speed ungraded (correct); otherwise ``pass`` at or under the bar, ``fail`` above it."""
    result.ms = ms
    if floor is not None and ms < 0.95 * floor:
        raise Stop(REFUSED, f"{ms:.4g} ms is below the datasheet floor of {floor:.4g} ms at {at}: the timed calls "
                            "skipped work (a result kept from an earlier call)")
    if bar is None:
        result.status, result.verdict = CORRECT, "correct on every case"
        result.notes.append(f"speed not graded: no bar measured for {slug} (labmagic calibrate writes the copy "
                            f"ceiling; the chapter's sweep writes its rungs); timed at {ms:.4g} ms")
        return
    result.bar_ms = bar.ms
    result.checks.append(f"timed with {method} at {at}: {ms:.4g} ms; bar {bar.text}")
    if ms <= bar.ms:
        result.status, result.verdict = PASS, f"correct, and {ms:.4g} ms at {at} meets the bar of {bar.ms:.4g} ms"
    else:
        result.status = FAIL
        # Rounded down: a time a hair over the bar must not read "100% of the speed asked for" beside "fail".
        result.verdict = (f"correct but too slow: {ms:.4g} ms at {at} against a bar of {bar.ms:.4g} ms "
                          f"({math.floor(100 * bar.ms / ms)}% of the speed asked for)")


# -- helpers --------------------------------------------------------------------------------------------------------

def _generator(device: str, seed: int):
    import torch

    return torch.Generator(device=device).manual_seed(seed)


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _shape(shape) -> str:
    return "x".join(str(int(s)) for s in shape)


def _crashed(exercise: Exercise, submission: Submission, exc: BaseException) -> Grade:
    return Grade(exercise=exercise.name, chapter=exercise.chapter, language=exercise.language,
                 origin=submission.origin, status=NOT_GRADED,
                 verdict=f"the cells crashed the CUDA context ({str(exc).splitlines()[0]})")


def prepare_once(exercise: Exercise, submission: Submission, shell, shape=None) -> tuple[Callable[[], None], dict]:
    """Build the submission and its case at ``shape`` (default: the exercise's sanitize shape) for a tool that
    watches the process (compute-sanitizer): ``(call, info)``, where ``call()`` calls it once and synchronizes, and
    ``info`` holds its kernels' names and sources, so findings can be tied to it and quote its lines even when the
    call then raises (memcheck aborts a kernel it catches, and the synchronize after it fails)."""
    from ..child.sanitizer_run import kernel_sources

    fn, namespace = build(exercise, submission, shell, Options())
    rng = random.Random(0)
    shape = tuple(shape or exercise.sanitize_shape or exercise.shapes(rng, True)[0])
    device = "cuda" if has_gpu() else "cpu"
    case = exercise.make_case(shape, _generator(device, 1), device)
    outs = [buffers.allocate(spec, device) for spec in case.outputs]

    def call() -> None:
        fn(*case.inputs, *[o.tensor for o in outs])
        _synchronize()

    return call, {"sources": kernel_sources(namespace), "kernels": sorted(own_kernel_names(namespace)),
                  "shape": _shape(shape)}
