"""Wrong values must not reach a kernel: bool, typedef'd and macro'd pointer types, 64-bit and 16-bit scalars, launch
shapes (issue #13, items 5 and 7). Every check here happens before the launch, so none needs a GPU."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import labmagic
from labmagic.errors import ArgumentError

TYPEDEFS = """\
#include <cuda_fp16.h>
typedef float real;
#define WIDE double
using index_type = int;
namespace acc { typedef double acc_t; __global__ void sum_into(const real* x, acc_t* total, index_type n) {} }
extern "C" __global__ void axpy(real a, const real* x, WIDE* y, index_type n) {}
typedef __half storage;
extern "C" __global__ void halves(storage* h, unsigned short* bits) {}
"""


@pytest.fixture(scope="module")
def typedefs():
    return labmagic.compile_cuda(TYPEDEFS)


def test_typedef_and_macro_pointer_types_are_checked(typedefs):
    axpy = typedefs.kernels["axpy"]
    x32, x64 = torch.zeros(4), torch.zeros(4, dtype=torch.float64)
    with pytest.raises(ArgumentError, match=r"^axpy: argument 'x' \(const real\*\) needs float32 data, got float64$"):
        axpy.check_args((1.0, x64, x64, 4))
    with pytest.raises(ArgumentError, match=r"^axpy: argument 'y' \(WIDE\*\) needs float64 data, got float32$"):
        axpy.check_args((1.0, x32, x32, 4))
    with pytest.raises(ArgumentError, match=r"argument 'n' \(index_type\) needs an int, got float 4.0"):
        axpy.check_args((1.0, x32, x64, 4.0))
    with pytest.raises(ArgumentError, match=r"argument 'h' \(storage\*\) needs float16 data, got float32"):
        typedefs.kernels["halves"].check_args((x32, torch.zeros(4, dtype=torch.uint16)))
    # A typedef inside a namespace is found from the kernel's own namespace.
    with pytest.raises(ArgumentError, match=r"argument 'total' \(acc_t\*\) needs float64 data, got float32"):
        typedefs.kernels["acc::sum_into"].check_args((x32, x32, 4))
    assert typedefs.result.types["real"] == "float" and typedefs.result.types["WIDE"] == "double"


def test_a_type_nvrtc_cannot_name_is_refused_not_unchecked():
    body = '#define ELEMENT float\nextern "C" __global__ void fill(ELEMENT* out) {}\n#undef ELEMENT\n'
    fill = labmagic.compile_cuda(body).kernels["fill"]
    with pytest.raises(ArgumentError, match=r"^fill: argument 'out' \(ELEMENT\*\): labmagic cannot tell what type "
                                            r"'ELEMENT' is"):
        fill.check_args((torch.zeros(4, dtype=torch.float64),))


@pytest.fixture(scope="module")
def scalars():
    body = """\
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void scalars(bool flag, unsigned long count, __half h, half h2, __nv_bfloat16 b, long int l) {}
"""
    return labmagic.compile_cuda(body).kernels["scalars"]


def test_bool_takes_only_truth_values(scalars):
    good = (1, 0.5, 0.5, 0.5, -3)
    for value in (True, np.bool_(False), 0, 1):
        assert scalars.check_args((value, *good))[0] == ("val", np.bool_(bool(value)))
    for value in ("false", None, 1.0, 2):
        with pytest.raises(ArgumentError, match=rf"^scalars: argument 'flag' \(bool\) needs True or False, got "
                                                rf"{type(value).__name__}"):
            scalars.check_args((value, *good))


def test_unsigned_long_and_16_bit_floats_by_value(scalars):
    values = [v for _, v in scalars.check_args((True, 2**64 - 1, 1.5, 0.1, 1.0, -(2**63)))]
    assert values[1] == np.uint64(2**64 - 1) and type(values[1]) is np.uint64
    assert type(values[2]) is np.float16 and values[2] == np.float16(1.5) and values[3] == np.float16(0.1)
    assert type(values[4]) is np.uint16 and values[4] == 0x3F80  # bfloat16 1.0 travels as its 16 bits
    assert values[5] == np.int64(-(2**63))
    with pytest.raises(ArgumentError, match=r"argument 'count' \(unsigned long\): -1 does not fit in unsigned long"):
        scalars.check_args((True, -1, 1.5, 0.1, 1.0, 0))
    with pytest.raises(ArgumentError, match=r"argument 'h' \(__half\): 70000.0 does not fit in __half"):
        scalars.check_args((True, 1, 70000.0, 0.1, 1.0, 0))
    with pytest.raises(ArgumentError, match=r"argument 'b' \(__nv_bfloat16\): 1e\+39 does not fit in __nv_bfloat16"):
        scalars.check_args((True, 1, 1.0, 0.1, 1e39, 0))


def test_bfloat16_bits_round_to_nearest_even():
    from labmagic.compiler.kernel import bfloat16_bits

    assert bfloat16_bits(1.0) == 0x3F80 and bfloat16_bits(-2.0) == 0xC000 and bfloat16_bits(0.0) == 0
    assert bfloat16_bits(1 + 2**-8) == 0x3F80  # a tie: to the even neighbour, down
    assert bfloat16_bits(1 + 3 * 2**-8) == 0x3F82  # a tie: to the even neighbour, up
    assert bfloat16_bits(1 + 2**-8 + 2**-30) == 0x3F81  # above the tie: float32 first would round it down twice
    assert bfloat16_bits(math.inf) == 0x7F80 and bfloat16_bits(-math.inf) == 0xFF80
    assert bfloat16_bits(3.396e38) == 0x7F7F and bfloat16_bits(3.397e38) == 0x7F80  # about half an ulp past the max: inf
    assert bfloat16_bits(math.nan) & 0x7FC0 == 0x7FC0
    assert bfloat16_bits(2.0**-133) == 0x0001  # the smallest subnormal
    # Against torch's own float32 -> bfloat16 rounding, over values that are exact in float32.
    singles = np.random.default_rng(13).standard_normal(4000).astype(np.float32) * np.float32(1e3)
    expected = torch.from_numpy(singles).to(torch.bfloat16).view(torch.int16).numpy().astype(np.uint16)
    assert [bfloat16_bits(float(v)) for v in singles] == expected.tolist()


class TestLaunchShape:
    @pytest.fixture(autouse=True)
    def _kernel(self):
        self.k = labmagic.compile_cuda('extern "C" __global__ void touch(float* a) {}').kernels["touch"]
        self.a = torch.zeros(4)

    @pytest.mark.parametrize("grid, block, message", [
        (2.0, 32, r"grid=2.0 must be an int or a tuple of 1 to 3 ints, got float"),
        (1, "32", r"block='32' must be an int or a tuple of 1 to 3 ints, got str"),
        (1, (32, 1.0), r"block=\(32, 1.0\) must be an int or a tuple of 1 to 3 ints, got tuple"),
        (True, 32, r"grid=True must be an int or a tuple of 1 to 3 ints, got bool"),
    ])
    def test_grid_and_block_must_be_ints(self, grid, block, message):
        with pytest.raises(ArgumentError, match=f"^touch: {message}$"):
            self.k(self.a, grid=grid, block=block)

    def test_smem_must_be_a_byte_count(self):
        with pytest.raises(ArgumentError, match=r"^touch: smem=1.5 must be a number of bytes"):
            self.k(self.a, grid=1, block=32, smem=1.5)


@pytest.mark.gpu
def test_typedefd_and_16_bit_scalars_reach_the_kernel():
    body = """\
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef float real;
extern "C" __global__ void unpack(real* out, bool flag, unsigned long big, __half h, __nv_bfloat16 b) {
    out[0] = flag ? 1.0f : -1.0f;
    out[1] = (float)(big >> 40);
    out[2] = __half2float(h);
    out[3] = __bfloat162float(b);
}"""
    unpack = labmagic.compile_cuda(body).kernels["unpack"]
    out = torch.zeros(4, device="cuda")
    unpack(out, False, 3 << 40, 0.1, 1 + 2**-8 + 2**-30, grid=1, block=1)
    torch.cuda.synchronize()
    assert out.tolist() == [-1.0, 3.0, float(np.float16(0.1)), 1 + 2**-7]
