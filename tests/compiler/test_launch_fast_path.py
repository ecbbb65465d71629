"""The launch's fast path (issue #14, item 1): once a call has passed, a bad call with the same kinds of arguments is
still refused with the full check's own error, a changed layout is checked afresh, and a fault still names the cell
that launched. The checks need no GPU: a CPU tensor that answers as a CUDA one stands in for it."""

from __future__ import annotations

import collections
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import labmagic
from labmagic.compiler import faults
from labmagic.errors import ArgumentError, LabError, NoGPUError

BODY = """\
extern "C" __global__ void axpy4(const float4* x, float4* y, float alpha, int n4, bool accumulate,
                                 unsigned int* hits, unsigned char tag) {}
"""


class CudaStandIn(torch.Tensor):
    """A CPU tensor that says it lives on cuda:0, for checking without a GPU (never launched). labmagic knows torch
    tensors by their type's module, and reads a subclass directly where it turns ``__torch_function__`` off, as
    ``nn.Parameter`` does: so does this one."""

    __module__ = "torch.labmagic_stand_in"
    __torch_function__ = torch._C._disabled_torch_function_impl
    is_cuda = property(lambda self: True)
    device = property(lambda self: torch.device("cuda", 0))


def cuda_like(tensor: torch.Tensor) -> CudaStandIn:
    return tensor.as_subclass(CudaStandIn)


@pytest.fixture
def axpy4():
    return labmagic.compile_cuda(BODY).kernels["axpy4"]  # a fresh kernel: nothing remembered from other tests


def good_args(n4: int = 4):
    x, y = cuda_like(torch.randn(4 * n4)), cuda_like(torch.randn(4 * n4))
    return [x, y, 0.5, n4, True, cuda_like(torch.zeros(2, dtype=torch.int32)), 7]


def full_check_error(kernel, args) -> LabError:
    """The error the full check raises (what every call raised before the fast path existed)."""
    with pytest.raises(LabError) as info:
        kernel._check_all(tuple(args))
    return info.value


# Each: which argument is replaced, by what, and (part of) the full check's message, so no case passes vacuously.
BAD = {
    "float64 data": (0, lambda: cuda_like(torch.zeros(16, dtype=torch.float64)), r"'x' \(const float4\*\) needs float32"),
    "CPU tensor": (1, lambda: torch.zeros(16), r"'y' \(float4\*\) is a CPU torch tensor|needs a CUDA GPU"),
    "non-contiguous view": (0, lambda: cuda_like(torch.zeros(4, 8).t()), r"'x' \(const float4\*\) is not contiguous"),
    "misaligned view": (1, lambda: cuda_like(torch.zeros(20)[1:17]), r"'y' \(float4\*\) starts at an address not "
                                                                     r"aligned to 16 bytes"),
    "int out of range": (3, lambda: 2**31, r"'n4' \(int\): 2147483648 does not fit in int"),
    "bool for int": (3, lambda: True, r"'n4' \(int\) needs an int, got bool True"),
    "float for int": (3, lambda: 4.0, r"'n4' \(int\) needs an int, got float 4.0"),
    "int for bool": (4, lambda: 2, r"'accumulate' \(bool\) needs True or False, got int 2"),
    "string for bool": (4, lambda: "false", r"'accumulate' \(bool\) needs True or False, got str"),
    "float beyond float": (2, lambda: 1e39, r"'alpha' \(float\): 1e\+39 does not fit in float"),
    "tensor for float": (2, lambda: cuda_like(torch.zeros(1)), r"'alpha' \(float\) is a scalar but got a CUDA"),
    "float32 for unsigned*": (5, lambda: cuda_like(torch.zeros(2)), r"'hits' \(unsigned int\*\) needs uint32 or int32"),
    "negative for unsigned char": (6, lambda: -1, r"'tag' \(unsigned char\): -1 does not fit in unsigned char"),
    "list for a pointer": (0, lambda: [1.0] * 16, r"'x' \(const float4\*\) needs a tensor or array, got list"),
    "negative address": (0, lambda: -16, r"'x' \(const float4\*\): -16 is not a device address"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_warm_kernel_refuses_what_the_full_check_refuses(axpy4, case):
    index, make_bad, message = BAD[case]
    good = good_args()
    assert axpy4._fast_check(tuple(good)) is None  # a cold kernel: no dtype has passed the full check yet
    axpy4.check_args(tuple(good))  # warm: it has now
    assert axpy4._fast_check(tuple(good)) is not None
    bad = list(good)
    bad[index] = make_bad()
    expected = full_check_error(axpy4, bad)
    assert re.search(message, str(expected)), expected
    assert axpy4._fast_check(tuple(bad)) is None
    for call in (lambda: axpy4.check_args(tuple(bad)), lambda: axpy4(*bad, grid=1, block=32)):
        with pytest.raises(type(expected)) as info:
            call()
        assert str(info.value) == str(expected)
    assert axpy4._fast_check(tuple(good)) is not None  # and a good call after it is fast again


def test_a_warm_kernel_refuses_a_wrong_count(axpy4):
    good = good_args()
    axpy4.check_args(tuple(good))
    with pytest.raises(ArgumentError, match=r"^axpy4: missing argument 'tag' \(unsigned char\); the kernel takes"):
        axpy4(*good[:-1], grid=1, block=32)
    with pytest.raises(ArgumentError, match=r"^axpy4: 8 arguments given but the kernel takes 7"):
        axpy4(*good, 1, grid=1, block=32)


def test_fast_and_full_checks_marshal_alike(axpy4):
    axpy4.check_args(tuple(good_args()))
    for alpha, n4, flag, tag in ((0.5, 4, True, 7), (2, 1, False, 255), (-3.25, 2**31 - 1, True, 0)):
        args = good_args()  # new tensors of the dtypes that passed: the fast check takes them
        args[2:5], args[6] = (alpha, n4, flag), tag
        assert axpy4._fast_check(tuple(args)) is not None
        fast, full = axpy4.check_args(tuple(args)), axpy4._check_all(tuple(args))
        assert fast == full and [type(v) for _, v in fast] == [type(v) for _, v in full]
        assert [kind for kind, _ in fast] == ["ptr", "ptr", "val", "val", "val", "ptr", "val"]
        assert fast[0][1] == args[0].data_ptr() and type(fast[0][1]) is int
        assert (type(fast[2][1]), type(fast[3][1]), type(fast[6][1])) == (np.float32, np.int32, np.uint8)


def test_a_changed_layout_is_checked_again(axpy4):
    base = torch.zeros(40)
    args = good_args()
    layouts = [
        (1, cuda_like(base[4:20])),  # 16 bytes in: aligned for float4
        (1, cuda_like(base[1:17])),  # 4 bytes in: refused
        (5, cuda_like(torch.zeros(2, dtype=torch.uint32))),  # unsigned int* takes uint32 or int32 alike
        (5, cuda_like(torch.zeros(2, dtype=torch.int64))),  # but not int64
        (0, cuda_like(torch.zeros(16)).requires_grad_()),
        (0, cuda_like(torch.zeros(4, 4).t())),  # not contiguous
        (2, 3),  # an int where a float is taken
    ]
    for round in range(2):
        for index, value in layouts:
            trial = list(args)
            trial[index] = value
            try:
                expected = axpy4._check_all(tuple(trial))
            except ArgumentError as exc:
                assert axpy4._fast_check(tuple(trial)) is None
                with pytest.raises(ArgumentError, match=f"^{re.escape(str(exc))}$"):
                    axpy4.check_args(tuple(trial))
            else:
                assert round == 0 or axpy4._fast_check(tuple(trial)) is not None  # passed once: fast since
                assert axpy4.check_args(tuple(trial)) == expected
    # Remembered: the dtypes that passed, with the alignment each needs; a refused one is never remembered.
    assert axpy4._plans[1].masks == {torch.float32: 15}
    assert axpy4._plans[5].masks == {torch.int32: 3, torch.uint32: 3}


def test_only_plain_tensor_types_are_read_directly():
    from labmagic.compiler.fast_check import fast_tensor_type as _fast_tensor_type

    class Logged(torch.Tensor):  # a subclass with its own __torch_function__ could answer differently each time
        __module__ = "torch.labmagic_logged"

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    assert _fast_tensor_type(torch.Tensor) and _fast_tensor_type(torch.nn.Parameter) and _fast_tensor_type(CudaStandIn)
    assert not _fast_tensor_type(Logged)


def test_grid_and_block_are_not_trusted_for_being_seen_before(axpy4, monkeypatch):
    # Every call stops right after its checks, GPU or not: the stand-ins hold CPU addresses.
    monkeypatch.setattr("labmagic.compiler.kernel.has_gpu", lambda: False)
    args = good_args()
    grid = [2]
    for launch in (lambda: axpy4(*args, grid=grid, block=(32,)), lambda: axpy4(*args, grid=1, block=32)):
        with pytest.raises(NoGPUError, match="axpy4 needs a CUDA GPU"):  # every check passed
            launch()
    grid[0] = 0  # the same list, changed in place
    with pytest.raises(ArgumentError, match=r"grid=\[0\] has a dimension below 1"):
        axpy4(*args, grid=grid, block=(32,))
    with pytest.raises(ArgumentError, match=r"grid=True must be an int"):
        axpy4(*args, grid=True, block=32)  # equal to the 1 just launched, but not an int
    with pytest.raises(ArgumentError, match=r"block=\(32, 1.0\) must be an int"):
        axpy4(*args, grid=1, block=(32, 1.0))
    with pytest.raises(ArgumentError, match=r"smem=-1 must be a number of bytes"):
        axpy4(*args, grid=1, block=32, smem=-1)
    with pytest.raises(ArgumentError, match=r"block=\(32, 64\) has 2048 threads"):
        axpy4(*args, grid=1, block=(32, 64))


def test_a_fault_names_the_cell_of_each_recent_launch(shell, monkeypatch):
    monkeypatch.setattr(faults, "_fault", None)
    monkeypatch.setattr(faults, "_recent", collections.deque(maxlen=8))
    cells = []
    for name in ("first_kernel", "second_kernel"):
        cells.append(shell.ip.execution_count)  # the number the next cell runs under
        shell.run(f"from labmagic.compiler import faults as _f\n_f.record({name!r}, (2, 1, 1), (64, 1, 1), 0)")
    assert cells[1] == cells[0] + 1
    assert [faults.Launch(*t).cell for t in faults._recent] == cells
    text = str(faults.fault_error(RuntimeError("CUDA error: an illegal memory access was encountered")))
    assert "second_kernel<<<(2, 1, 1), (64, 1, 1), 0>>> (launch #" in text and f"in cell [{cells[1]}])" in text


def test_outside_ipython_a_launch_records_no_cell():
    code = ("import sys\nfrom labmagic.compiler import faults\nfaults.record('k', (1, 1, 1), (1, 1, 1), 0)\n"
            "print(faults._recent[-1], 'IPython' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "(1, 'k', (1, 1, 1), (1, 1, 1), 0, None) False"


# -- on the GPU ------------------------------------------------------------------------------------------

AXPY4 = """\
extern "C" __global__ void axpy4(const float4* x, float4* y, float alpha, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 a = x[i], b = y[i];
        y[i] = make_float4(b.x + alpha * a.x, b.y + alpha * a.y, b.z + alpha * a.z, b.w + alpha * a.w);
    }
}"""


@pytest.mark.gpu
def test_alternating_layouts_launch_correctly():
    from labmagic.compiler.kernel import _device_and_stream

    axpy4 = labmagic.compile_cuda(AXPY4).kernels["axpy4"]
    buffer = torch.randn(4 * 1000 + 8, device="cuda")
    parameter = torch.nn.Parameter(torch.randn(4 * 37, device="cuda"), requires_grad=False)
    side = torch.cuda.Stream()
    for i in range(240):
        n4 = (37, 1000, 1, 513)[i % 4]
        layout = i % 6
        if layout % 3 == 1:
            x = buffer[4:4 + 4 * n4]  # a view 16 bytes in: still aligned
        elif layout % 3 == 2 and n4 == 37:
            x = parameter
        else:
            x = torch.randn(4 * n4, device="cuda")
        y = torch.randn(4 * n4, device="cuda")
        alpha = (0.5, 3, -1.25)[i % 3]  # an int as often as a float
        expected = y + alpha * x
        args = (x, y, alpha, n4)
        if layout >= 3:
            with torch.cuda.stream(side):
                device_of, stream_of = _device_and_stream()
                assert stream_of(device_of()) == side.cuda_stream == torch.cuda.current_stream().cuda_stream
                side.wait_stream(torch.cuda.default_stream())
                axpy4(*args, grid=(n4 + 127) // 128, block=128)
            torch.cuda.default_stream().wait_stream(side)
        else:
            axpy4(*args, grid=((n4 + 127) // 128,), block=(128,))
        torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)  # the kernel may fuse into one FMA
        assert axpy4._fast_check(args) is not None  # real CUDA tensors and Parameters take the fast path
        if i % 40 == 39:  # bad calls in between are refused and leave the next good call alone
            with pytest.raises(ArgumentError, match="not aligned to 16 bytes"):
                axpy4(buffer[1:1 + 4 * n4], y, alpha, n4, grid=1, block=128)
            with pytest.raises(ArgumentError, match="is a CPU torch tensor"):
                axpy4(x.cpu(), y, alpha, n4, grid=1, block=128)
            with pytest.raises(ArgumentError, match="needs float32 data, got float16"):
                axpy4(x.half(), y, alpha, n4, grid=1, block=128)


@pytest.mark.gpu
def test_a_fault_names_the_cell_that_launched_it():
    script = textwrap.dedent('''
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "labmagic")
        def cell(code):
            return ip.run_cell(code, store_history=True)
        cell("""%%cuda_kernel
        extern "C" __global__ void fine(float* x) { x[threadIdx.x] = 1.0f; }
        extern "C" __global__ void oob_write(float* x, int n) {
            x[threadIdx.x + (1ll << 40)] = 1.0f;  // far outside any allocation
        }""")
        cell("import torch; x = torch.zeros(64, device='cuda')")
        cell("fine(x, grid=1, block=64); torch.cuda.synchronize()")
        print("FAULTING-CELL:", ip.execution_count)
        cell("oob_write(x, 64, grid=1, block=64)")
        cell("print('ANOTHER-CELL'); torch.cuda.synchronize()")
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    faulting = re.search(r"FAULTING-CELL: (\d+)", out)
    assert faulting and "ANOTHER-CELL" in out, out
    assert f"oob_write<<<(1, 1, 1), (64, 1, 1), 0>>> (launch #2 in cell [{faulting.group(1)}])" in out, out
    assert "before it: fine (#1)" in out, out


# -- the warm launch, with a stand-in driver --------------------------------------------------------------

class StandInDriver:
    """Where cuLaunchKernel would be called: records each launch (function, grid, block, smem, stream)."""

    def __init__(self):
        self.launches = []
        self.refusal: Exception | None = None  # raised instead of launching, when set

    def __call__(self, function, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        if self.refusal is not None:
            raise self.refusal
        self.launches.append((function, (gx, gy, gz), (bx, by, bz), smem, stream))


class DriverRefusal(Exception):
    pass


@pytest.fixture
def warm_axpy4(axpy4, monkeypatch):
    """axpy4 as after its first direct launch on device 0: its fast check compiled, its direct launcher made."""
    from labmagic.compiler.direct_launch import DirectLaunch

    monkeypatch.setattr("labmagic.compiler.kernel.has_gpu", lambda: False)
    args = good_args()
    with pytest.raises(NoGPUError):  # the full check passes; the call stops for want of a GPU
        axpy4(*args, grid=1, block=32)
    driver = StandInDriver()
    axpy4._direct = DirectLaunch(type("Function", (), {"ptr": 0xF00})(), axpy4._fast_check(tuple(args)),
                                 launch=driver, device=0, error=DriverRefusal)
    monkeypatch.setattr("labmagic.compiler.kernel._device_and_stream", lambda: (lambda: 0, lambda device: 0x5EA))
    monkeypatch.setattr(faults, "_fault", None)
    return axpy4, args, driver


def test_a_warm_launch_goes_straight_to_the_driver_on_the_current_stream(warm_axpy4):
    axpy4, args, driver = warm_axpy4
    axpy4(*args, grid=(3, 2), block=64)
    axpy4(*args, grid=1, block=(32, 2), smem=1024)
    assert driver.launches == [(0xF00, (3, 2, 1), (64, 1, 1), 0, 0x5EA), (0xF00, (1, 1, 1), (32, 2, 1), 1024, 0x5EA)]
    assert faults.Launch(*faults._recent[-1])[1:5] == ("axpy4", (1, 1, 1), (32, 2, 1), 1024)


def test_a_warm_kernel_still_refuses_bad_calls_and_launches_after_a_fault_are_refused(warm_axpy4, monkeypatch):
    axpy4, args, driver = warm_axpy4
    bad = list(args)
    bad[1] = cuda_like(torch.zeros(20)[1:17])
    with pytest.raises(ArgumentError, match="not aligned to 16 bytes"):
        axpy4(*bad, grid=1, block=32)
    with pytest.raises(NoGPUError):  # more dynamic shared memory than known allowed: the checked path decides
        axpy4(*args, grid=1, block=32, smem=64 * 1024)
    monkeypatch.setattr(faults, "_fault", "an illegal memory access was encountered")
    with pytest.raises(NoGPUError):  # not warm any more: the checked path (here: no GPU) answers
        axpy4(*args, grid=1, block=32)
    assert driver.launches == []


def test_a_warm_launch_on_another_device_takes_the_checked_path(warm_axpy4, monkeypatch):
    axpy4, args, driver = warm_axpy4
    monkeypatch.setattr("labmagic.compiler.kernel._device_and_stream", lambda: (lambda: 1, lambda device: 0x5EB))
    with pytest.raises(NoGPUError):
        axpy4(*args, grid=1, block=32)
    assert driver.launches == []


def test_a_driver_refusal_on_the_warm_path_names_the_launch(warm_axpy4):
    axpy4, args, driver = warm_axpy4
    driver.refusal = DriverRefusal("CUDA_ERROR_INVALID_VALUE: invalid argument")
    with pytest.raises(labmagic.LabError, match=r"axpy4<<<\(1, 1, 1\), \(32, 1, 1\), 0>>> was refused by the driver"):
        axpy4(*args, grid=1, block=32)
