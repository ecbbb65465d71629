"""The direct launch's argument buffer, read back the way cuLaunchKernel reads it: through the array of pointers,
one slot per argument, each of its C type's size (the GPU test in test_launch_fast_path runs real kernels)."""

from __future__ import annotations

import ctypes
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from labmagic.compiler.direct_launch import DirectLaunch, slot_code

# One argument of each kind the fast check hands over, in an order that needs padding between slots.
EXAMPLE = (np.int8(-5), 0x7F00_1234_5678, np.float16(0.5), np.int32(-7), np.bool_(True), np.float64(2.5),
           np.uint16(0x3F81), np.float32(1.25), np.uint64(2**63 + 9), np.int16(-300))
CTYPES = (ctypes.c_int8, ctypes.c_uint64, ctypes.c_uint16, ctypes.c_int32, ctypes.c_bool, ctypes.c_double,
          ctypes.c_uint16, ctypes.c_float, ctypes.c_uint64, ctypes.c_int16)


class Driver:
    """Stands where cuLaunchKernel is called: reads each argument through the pointer array as the driver would."""

    def __init__(self):
        self.calls = []

    def __call__(self, function, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        values = [ctypes.cast(pointers[i], ctypes.POINTER(kind)).contents.value for i, kind in enumerate(CTYPES)]
        self.calls.append(((function, gx, gy, gz, bx, by, bz, smem, stream, extra), values))


def _expected(example):
    out = []
    for value in example:
        if isinstance(value, np.float16):
            out.append(int(value.view(np.uint16)))  # read back as its bits
        elif isinstance(value, (np.floating, np.bool_)):
            out.append(value.item())
        else:
            out.append(int(value))
    return out


def test_every_argument_lands_in_its_own_slot_with_its_own_size():
    assert [slot_code(v) for v in EXAMPLE] == ["b", "Q", "e", "i", "?", "d", "H", "f", "Q", "h"]
    driver = Driver()
    launch = DirectLaunch(SimpleNamespace(ptr=0xABC), EXAMPLE, launch=driver)
    launch(EXAMPLE, (3, 2, 1), (128, 1, 1), 4096, 77)
    second = (np.int8(127), 16, np.float16(-2.0), np.int32(2**31 - 1), np.bool_(False), np.float64(-1e300),
              np.uint16(0), np.float32(-0.0), np.uint64(0), np.int16(32767))
    launch(second, (1, 1, 1), (1, 1, 1), 0, 0)
    assert driver.calls[0] == ((0xABC, 3, 2, 1, 128, 1, 1, 4096, 77, 0), _expected(EXAMPLE))
    assert driver.calls[1] == ((0xABC, 1, 1, 1, 1, 1, 1, 0, 0, 0), _expected(second))


def test_each_thread_packs_into_a_buffer_of_its_own():
    seen = {}

    def record(*args):
        seen.setdefault(threading.get_ident(), set()).add(args[9])  # the pointer array's address

    launch = DirectLaunch(SimpleNamespace(ptr=1), EXAMPLE, launch=record)
    launch(EXAMPLE, (1, 1, 1), (1, 1, 1), 0, 0)
    worker = threading.Thread(target=launch, args=(EXAMPLE, (1, 1, 1), (1, 1, 1), 0, 0))
    worker.start()
    worker.join()
    assert len(seen) == 2 and len(set().union(*seen.values())) == 2


def test_an_argument_without_a_slot_is_refused_so_that_cupy_launches_it():
    assert slot_code(np.complex64(1)) is None and slot_code(b"struct") is None
    with pytest.raises(TypeError):
        DirectLaunch(SimpleNamespace(ptr=1), (np.complex64(1),), launch=print)


SPILL = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void spill(double* out, signed char c, short s, int i, long long q, unsigned long long u,
                                 float f, double d, __half h, bool b, const float* p, __nv_bfloat16 w) {
    out[0] = c; out[1] = s; out[2] = i; out[3] = (double)q; out[4] = (double)(u >> 32); out[5] = f;
    out[6] = d; out[7] = __half2float(h); out[8] = b ? 1.0 : -1.0; out[9] = p[1]; out[10] = __bfloat162float(w);
}"""


@pytest.mark.gpu
def test_every_scalar_kind_reaches_a_real_kernel_through_the_direct_launch():
    import torch

    import labmagic

    spill = labmagic.compile_cuda(SPILL).kernels["spill"]
    data = torch.tensor([0.0, 42.5], device="cuda")
    for k in range(4):  # the first call takes the full check (and CuPy's launch), the rest the direct one
        args = (-5 - k, -300 + k, 70000 * (k + 1), -(2**40) - k, (7 + k) << 32, 1.25 * k, -2.5e10 + k, 0.5 + k,
                k % 2 == 0, data, 1.5 + k)
        out = torch.full((11,), float("nan"), dtype=torch.float64, device="cuda")
        spill(out, *args, grid=1, block=1)
        torch.cuda.synchronize()
        assert out.tolist() == [-5 - k, -300 + k, 70000 * (k + 1), float(-(2**40) - k), 7 + k, 1.25 * k,
                                -2.5e10 + k, 0.5 + k, 1.0 if k % 2 == 0 else -1.0, 42.5, 1.5 + k]
    assert spill._direct, "fast-checked calls of plain scalars and tensors must take the direct launch"
