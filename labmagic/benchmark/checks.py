"""Is a variant's output right? Compared against the reference, strictly, before and after timing.

A fast wrong kernel is the most common "result" in GPU tutorials, so the rules are deliberately
unforgiving:

- values must satisfy ``|out - ref| <= atol + rtol * |ref|`` element-wise (numpy's ``allclose`` rule),
  with tolerances chosen by dtype (:data:`TOLERANCES`); how close a variant came is said in the same terms,
  ``err_over_tol``, the worst element's ``|out - ref| / (atol + rtol * |ref|)``, which passes at or below 1 (a
  relative error ``|out - ref| / |ref|`` is no such measure: near a zero of the reference it is huge for an
  output that passes with room to spare, which is what ``atol`` is for);
- NaN or inf in the output never passes, whatever the reference says;
- an all-zero output never passes: zeros are what an unlaunched kernel or a zero-filled buffer leaves;
- an *unwritten* output never passes: before a variant runs, :func:`poison_allocator` fills the
  allocator's free blocks with all-ones bytes (NaN in every float format) so that an element the
  kernel forgot to write reads as NaN instead of as a stale, possibly correct, earlier result;
- an output on the host when the reference's is on the GPU never passes (:func:`placement_problem`).

Outputs may be torch tensors, CuPy arrays or JAX arrays; they are converted to torch through DLPack,
which shares memory instead of copying. A variant with several outputs (attention's ``(O, lse)``) returns a tuple
or list: each part is compared with the reference's part under the same rules, and a mismatch names the part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: (rtol, atol) by dtype key. fp32 leaves room for a different summation order, not for TF32.
TOLERANCES = {
    "fp64": (1e-7, 1e-9),
    "fp32": (1e-4, 1e-5),
    "tf32": (1e-2, 1e-3),
    "fp16": (1e-3, 1e-3),
    "bf16": (1.6e-2, 1e-3),
    "fp8": (1.25e-1, 1e-2),
    "int8": (0.0, 0.0),
}


def tolerances(dtype, rtol=None, atol=None) -> tuple[float, float]:
    """The race's tolerances, defaulting by dtype (exact for integers and unknown dtypes)."""
    from .roofline import dtype_key

    default = TOLERANCES.get(dtype_key(dtype), (0.0, 0.0))
    return (default[0] if rtol is None else float(rtol), default[1] if atol is None else float(atol))


@dataclass(frozen=True)
class CheckResult:
    """A comparison's verdict: ``err_over_tol`` is the worst element's ``|out - ref| / (atol + rtol * |ref|)``
    (at or below 1 passes; inf for NaN/inf in the output, or any error where both tolerances are 0)."""

    ok: bool
    max_abs_err: float = 0.0
    err_over_tol: float = 0.0
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


def to_torch(x):
    """A torch view of a torch tensor, CuPy/JAX array (DLPack) or numpy array."""
    import torch

    if isinstance(x, torch.Tensor):
        return x
    if hasattr(x, "__dlpack__"):
        try:
            return torch.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError):
            pass
    import numpy as np

    return torch.from_numpy(np.asarray(x))


def placement_problem(out_device, ref_device) -> str:
    """Why an output on ``out_device`` does not count against a reference on ``ref_device`` ('' when it does).

    A variant that hands back a host tensor on a GPU run computed on the CPU, or copied its result to the
    host inside the timed call: either way it is not the GPU kernel its row would time. Moving it to the
    reference's device before comparing would hide exactly that, so it is a mismatch with this reason.
    """
    import torch

    out_device, ref_device = torch.device(out_device), torch.device(ref_device)
    if out_device.type == "cpu" and ref_device.type != "cpu":
        return (f"output is on the host ({out_device}) but the reference's is on {ref_device}: "
                "the variant must return its result on the device")
    return ""


def compare(out, ref, rtol: float, atol: float) -> CheckResult:
    """Check ``out`` against ``ref`` under the module's rules; never raises for a wrong output. Tuples (and lists)
    are compared part by part: the worst errors are kept, and the first failing part is named in the reason."""
    if isinstance(ref, (tuple, list)):
        return _compare_parts(out, ref, rtol, atol)
    return _compare_one(out, ref, rtol, atol)


def _compare_parts(out, ref, rtol: float, atol: float) -> CheckResult:
    if not isinstance(out, (tuple, list)) or len(out) != len(ref):
        got = f"{len(out)} parts" if isinstance(out, (tuple, list)) else f"one {type(out).__name__}"
        return CheckResult(False, reason=f"the reference returns {len(ref)} outputs, the variant {got}")
    worst_abs = worst_frac = 0.0
    for i, (o, r) in enumerate(zip(out, ref)):
        part = _compare_one(o, r, rtol, atol)
        if not part:
            return CheckResult(False, part.max_abs_err, part.err_over_tol, f"output[{i}]: {part.reason}")
        worst_abs, worst_frac = max(worst_abs, part.max_abs_err), max(worst_frac, part.err_over_tol)
    return CheckResult(True, worst_abs, worst_frac)


def _over_tolerance(diff, bound) -> float:
    """The worst ``diff / bound`` of finite tensors: 0 where both are 0 (an exact match under zero tolerance), inf
    where only the bound is."""
    import torch

    return float(torch.nan_to_num(diff / bound, nan=0.0, posinf=float("inf")).max())


def _compare_one(out, ref, rtol: float, atol: float) -> CheckResult:
    import torch

    try:
        out = to_torch(out)
    except Exception as exc:  # noqa: BLE001 - an output we cannot read is a wrong output
        return CheckResult(False, reason=f"output is not an array ({type(out).__name__}): {exc}")
    ref = to_torch(ref)
    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(False, reason=f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    misplaced = placement_problem(out.device, ref.device)
    if misplaced:
        return CheckResult(False, reason=misplaced)
    if out.device != ref.device:
        out = out.to(ref.device)
    if out.numel() == 0:
        return CheckResult(True)
    floating = out.is_floating_point() or out.is_complex()
    work = torch.float64 if ref.device.type == "cpu" else torch.float32
    o, r = out.to(work), ref.to(work)
    if not bool(torch.isfinite(r).all()):
        return CheckResult(False, reason="the reference output holds NaN/inf: fix the reference or the inputs")
    finite = torch.isfinite(o)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        first = int((~finite).flatten().nonzero()[0])
        return CheckResult(False, float("inf"), float("inf"),
                           f"{bad} of {o.numel()} outputs are NaN/inf (first at flat index {first}; "
                           "NaN is also what an unwritten, poisoned element reads as)")
    diff = (o - r).abs()
    bound = atol + rtol * r.abs()
    max_abs, over = float(diff.max()), _over_tolerance(diff, bound)
    if not bool(o.any()) and (floating or bool(r.any())):
        return CheckResult(False, max_abs, over,
                           "output is all zeros (a kernel that never ran, or wrote nothing, looks like this)")
    bad_mask = diff > bound
    if bool(bad_mask.any()):
        n_bad = int(bad_mask.sum())
        i = int(bad_mask.flatten().nonzero()[0])
        worst = f" (worst {over:.3g}x the tolerance)" if math.isfinite(over) else ""
        return CheckResult(False, max_abs, over,
                           f"{n_bad} of {o.numel()} elements differ beyond rtol={rtol:g}, atol={atol:g}{worst}; first "
                           f"at flat index {i}: got {float(o.flatten()[i]):.6g}, expected {float(r.flatten()[i]):.6g}")
    return CheckResult(True, max_abs, over)


def poison_allocator(nbytes: int, device) -> None:
    """Fill free device memory that the next allocation of ``nbytes`` is likely to receive with 0xFF.

    torch's CUDA caching allocator hands a freed block of the same size class to the next request, so
    allocating, poisoning and freeing a block of the expected output size makes an unwritten output
    element read as NaN (0xFF.. is NaN in fp32/fp16/bf16, -1 for integers). On CPU, large blocks come
    from fresh zeroed pages, so unwritten elements read as zeros, which the value check catches.
    """
    import torch

    if torch.device(device).type != "cuda" or nbytes <= 0:
        return
    block = torch.empty(int(nbytes), dtype=torch.uint8, device=device)
    block.fill_(0xFF)
    del block
