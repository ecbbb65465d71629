"""Overloaded kernels (issue #56, item 7): an overload named by a cast (``-n '(void(*)(float*))f'``, which NVRTC
accepts) is bound under its name and parameter types; overloads no cast names are refused in one line that says
"overloaded" and gives the casts, also beside a plain kernel. Nothing is dropped without a word."""

from __future__ import annotations

import pytest
import torch

from labmagic.compiler.kernel import CudaKernel
from labmagic.errors import LabError

OVERLOADS = """\
__global__ void fill(float* x) { x[threadIdx.x] = 1.5f; }
__global__ void fill(int* x) { x[threadIdx.x] = 7; }
"""
PLAIN = 'extern "C" __global__ void other(float* y) { y[0] = 0.0f; }\n'
NAMES = ("fill", "other", "fill_float_ptr", "fill_int_ptr")


@pytest.fixture
def clean(shell):
    shell.run(f"for _n in {NAMES!r}: globals().pop(_n, None)")
    yield shell
    shell.run(f"for _n in {NAMES!r}: globals().pop(_n, None)")


def test_overloads_named_by_casts_are_bound_under_their_parameter_types(clean, capsys):
    clean.cell_magic("cuda_kernel", "--as fills -n '(void(*)(float*))fill' -n '(void (*)(int *))fill'",
                     OVERLOADS + PLAIN)
    by_float, by_int = clean.ns["fill_float_ptr"], clean.ns["fill_int_ptr"]
    assert isinstance(by_float, CudaKernel) and isinstance(by_int, CudaKernel) and "other" in clean.ns
    assert (by_float.symbol, by_int.symbol) == ("_Z4fillPf", "_Z4fillPi")
    assert (by_float.signature, by_int.signature) == ("fill(float* x)", "fill(int* x)")
    out = capsys.readouterr().out
    assert "fill(float*) [sm_" in out and "fill(int*)   [sm_" in out  # the report names each overload
    assert clean.ns["fills"].fill_int_ptr is by_int


@pytest.mark.parametrize("line", ["", "-n '(void(*)(float*))fill'"])
@pytest.mark.parametrize("plain", [False, True])
def test_overloads_no_cast_names_are_refused_with_the_casts_to_add(clean, line, plain):
    with pytest.raises(LabError) as info:
        clean.cell_magic("cuda_kernel", line, OVERLOADS + (PLAIN if plain else ""))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("kernel fill is overloaded (fill(float* x); fill(int* x)): NVRTC binds an overload "
                              "only where a cast names it, so add ")
    assert "-n '(void(*)(int*))fill'" in message and 'extern "C" wrapper' in message
    assert ("-n '(void(*)(float*))fill'" in message) == (not line)  # only the overloads still unnamed
    assert not any(name in clean.ns for name in NAMES)  # the whole cell is refused, the plain kernel too


def test_a_cast_that_matches_no_overload_names_the_overloads(clean):
    with pytest.raises(LabError, match=r"^name expression '\(void\(\*\)\(double\*\)\)fill' matches no kernel fill "
                                       r"declared in the cell \(its overloads: fill\(float\* x\); fill\(int\* x\)\)$"):
        clean.cell_magic("cuda_kernel", "-n '(void(*)(double*))fill' -n '(void(*)(int*))fill'", OVERLOADS)


@pytest.mark.gpu
def test_each_overload_launches_its_own_code(clean):
    clean.cell_magic("cuda_kernel", "-n '(void(*)(float*))fill' -n '(void(*)(int*))fill'", OVERLOADS)
    floats, ints = torch.zeros(4, device="cuda"), torch.zeros(4, dtype=torch.int32, device="cuda")
    clean.ns["fill_float_ptr"](floats, grid=1, block=4)
    clean.ns["fill_int_ptr"](ints, grid=1, block=4)
    assert floats.tolist() == [1.5] * 4 and ints.tolist() == [7] * 4
