"""What this machine can run, decided once, cheaply, before any framework is imported.

GPU detection goes through the driver API (``libcuda``) directly, so importing labmagic neither
imports torch nor creates a CUDA context. The same module arranges the environment switches that
must be set before their libraries read them: ``TRITON_INTERPRET=1`` on a machine without a GPU, Triton's
FP fusion pinned on (the default it is changing), and JAX's allocator so that it does not grab most of the
GPU next to torch.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import sys

from .errors import ArgumentError, NoGPUError

#: The architecture we compile for when no GPU is present (the book's reference GPU is an H200).
DEFAULT_ARCH = "sm_90"


@functools.cache
def driver_devices() -> tuple[tuple[str, int, int, int], ...]:
    """(name, major, minor, multiprocessors) of each CUDA device the driver sees; empty without a driver or GPU."""
    if os.environ.get("LABMAGIC_FORCE_CPU") == "1":
        return ()
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return ()
    if cuda.cuInit(0) != 0:
        return ()
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return ()
    devices = []
    for ordinal in range(count.value):
        dev = ctypes.c_int(0)
        cuda.cuDeviceGet(ctypes.byref(dev), ordinal)
        name = ctypes.create_string_buffer(256)
        cuda.cuDeviceGetName(name, 256, dev)
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
        cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # COMPUTE_CAPABILITY_MINOR
        sms = ctypes.c_int(0)
        cuda.cuDeviceGetAttribute(ctypes.byref(sms), 16, dev)  # MULTIPROCESSOR_COUNT
        devices.append((name.value.decode(), major.value, minor.value, sms.value))
    return tuple(devices)


def has_gpu() -> bool:
    """True when the CUDA driver reports at least one device (``LABMAGIC_FORCE_CPU=1`` says no)."""
    return bool(driver_devices())


def require_gpu(what: str) -> None:
    """Raise :class:`~labmagic.errors.NoGPUError` naming ``what`` when this machine has no GPU."""
    if not has_gpu():
        raise NoGPUError(f"{what} needs a CUDA GPU; this machine has none (the compile panel works without one: "
                         f"%%cuda_kernel --panel)")


def require_tensor(t, name: str, dtypes: tuple, *, dim: int | None = None, align: int = 16, device=None):
    """Refuse, with a one-line :class:`~labmagic.errors.ArgumentError`, a tensor a kernel's vector path would mis-read:
    not a torch tensor, a dtype outside ``dtypes``, ``dim`` dimensions expected and not found, on another device
    type than ``device`` (``"cuda"``, ``"cpu"``), not contiguous, or a base address not ``align``-byte aligned (a
    sliced view). Returns ``t``, so a launcher can write ``x = require_tensor(x, "x", (torch.bfloat16,))``.

    A launcher calls this for every operand of every call, so an eager decode step pays it dozens of times: nothing
    is imported or built on the accepting path (about 1 us), the messages only on refusal."""
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported
    if torch is None or not isinstance(t, torch.Tensor):
        raise ArgumentError(f"{name} must be a torch tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ArgumentError(f"{name} must be {' or '.join(map(_spell, dtypes))}, got {_spell(t.dtype)}")
    if dim is not None and t.dim() != dim:
        raise ArgumentError(f"{name} must be {dim}-D, got shape {tuple(t.shape)}")
    if device is not None and t.device.type != _device_type(device):
        wanted = _device_type(device)
        raise ArgumentError(f"{name} is on {t.device}, the kernel runs on {wanted}: pass {name}.to({wanted!r})")
    if not t.is_contiguous():
        raise ArgumentError(f"{name} must be contiguous (strides {t.stride()}); pass .contiguous()")
    if align > 1 and t.data_ptr() % align:
        raise ArgumentError(f"{name} must start at a {align}-byte aligned address (a sliced view?); pass .clone()")
    return t


def _spell(dtype) -> str:
    return str(dtype).removeprefix("torch.")


@functools.lru_cache(maxsize=64)
def _device_type(device) -> str:
    """``"cuda"`` for ``"cuda"``, ``"cuda:1"`` or ``torch.device("cuda", 1)``; cached (a torch.device is hashable)."""
    import torch

    return torch.device(device).type


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for a launcher's grid on the host. ``triton.cdiv`` is a ``@constexpr_function``: called from
    Python it goes through Triton's dispatch, about 2.5 us a call against 0.03 (measured here, triton 3.6), and a
    launcher that sizes its grid with four of them spends 10 us of every eager call on division."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two at least ``n`` (0 for 0, as Triton's): ``triton.next_power_of_2`` on the host
    without Triton's dispatch (see :func:`cdiv`)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def gpu_name(index: int = 0) -> str | None:
    devices = driver_devices()
    return devices[index][0] if len(devices) > index else None


def gpu_arch(index: int = 0) -> str | None:
    """``sm_XY`` of the GPU, or None without one."""
    devices = driver_devices()
    if len(devices) <= index:
        return None
    _, major, minor, _ = devices[index]
    return f"sm_{major}{minor}"


#: Multiprocessors of the book's reference GPU (H200 SXM), used to size grids when there is no GPU.
REFERENCE_SM_COUNT = 132


def sm_count(index: int = 0) -> int:
    """Streaming multiprocessors of the GPU (the H200's 132 without one), for sizing persistent grids."""
    devices = driver_devices()
    return devices[index][3] if len(devices) > index else REFERENCE_SM_COUNT


def target_arch() -> str:
    """The architecture a compile targets unless told otherwise: the GPU's own, else DEFAULT_ARCH."""
    return gpu_arch() or os.environ.get("LABMAGIC_ARCH", DEFAULT_ARCH)


def device_slug(name: str | None = None) -> str:
    """A stable folder name for a device: ``NVIDIA H200`` -> ``nvidia-h200``; no GPU -> ``cpu``."""
    name = gpu_name() if name is None else name
    if not name:
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def torch_device() -> str:
    """The device string chapters allocate on: ``cuda`` with a GPU, ``cpu`` without."""
    return "cuda" if has_gpu() else "cpu"


#: Notes for the reader produced while configuring the environment (:func:`configure`, run when ``labmagic`` is
#: imported; ``%load_ext labmagic`` prints them). Also ``labmagic.SETUP_NOTES``.
SETUP_NOTES: list[str] = []


def configure() -> None:
    """Configure Triton and JAX for this machine (:func:`configure_triton`, :func:`configure_jax`) and keep the
    reader's notes in :data:`SETUP_NOTES`, replacing those of an earlier call."""
    SETUP_NOTES[:] = [note for note in (configure_triton(),) if note]
    configure_jax()


#: Triton's FP fusion (a * b + c as one FMA). On through Triton 3.9, whose default it is and which warns that 3.10
#: turns it off; the book's Triton kernels were compiled and measured with it on. A user's own setting wins.
TRITON_FP_FUSION = "1"


def configure_triton() -> str | None:
    """Pin Triton's FP fusion (:data:`TRITON_FP_FUSION`) and arrange its interpreter on a machine without a GPU.
    Returns a note for the reader, if any."""
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", TRITON_FP_FUSION)
    if has_gpu():
        return None
    already = "triton" in sys.modules
    if os.environ.get("TRITON_INTERPRET") == "1":
        return None if already else "no CUDA GPU: Triton kernels run in Triton's interpreter (TRITON_INTERPRET=1)."
    os.environ["TRITON_INTERPRET"] = "1"
    if already:
        return (
            "triton was imported before labmagic, so kernels it already decorated with @triton.jit will not use "
            "its CPU interpreter and will fail without a GPU: restart the kernel and run `%load_ext labmagic` "
            "(or `import labmagic`) before `import triton`."
        )
    return "no CUDA GPU: Triton kernels run in Triton's interpreter (TRITON_INTERPRET=1)."


def configure_jax() -> None:
    """Let JAX share the GPU with torch: allocate on demand instead of pre-allocating 75% of memory,
    and, where several GPUs are visible, use torch's device only.

    On a multi-GPU host JAX opens every visible GPU when its backend starts and leaves the last one
    current on the calling thread. torch then puts new ``"cuda"`` tensors on that GPU and refuses to
    export the earlier ones through DLPack ("Can't export tensors on a different CUDA device index").
    Restricting JAX to device 0 (torch's default; ``CUDA_VISIBLE_DEVICES`` picks which physical GPU
    that is) keeps both frameworks on one GPU, which zero-copy exchange needs anyway.
    """
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if not has_gpu():
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    elif len(driver_devices()) > 1:
        _restrict_jax_to_device(0)


def _restrict_jax_to_device(index: int) -> None:
    try:
        import jax
    except ImportError:
        return
    try:
        jax.config.update("jax_cuda_visible_devices", str(index))
    except Exception as exc:  # noqa: BLE001  (JAX's backend already started: too late, say why)
        print(f"labmagic: could not restrict JAX to GPU {index} ({exc}); on a multi-GPU host, import labmagic "
              "before using JAX, or set CUDA_VISIBLE_DEVICES", file=sys.stderr)


def triton_interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"
