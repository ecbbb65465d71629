"""%%cuda_kernel says so when a kernel's Python name hides a builtin or replaces a notebook variable (issue #13,
item 7)."""

from __future__ import annotations

import pytest

from labmagic.compiler.kernel import CudaKernel


@pytest.fixture
def clean(shell):
    yield shell
    shell.run("for _n in ('print', 'weights', 'saxpy'): globals().pop(_n, None)")


def test_a_kernel_named_like_a_builtin_warns_in_one_line(clean, capsys):
    clean.cell_magic("cuda_kernel", "", 'extern "C" __global__ void print(float* x) {}')
    err = capsys.readouterr().err
    assert err == "labmagic: kernel 'print' is bound as print and hides Python's builtin print (del print brings it back)\n"
    assert isinstance(clean.ns["print"], CudaKernel)
    clean.run("del print")
    assert clean.run("print") is print


def test_a_kernel_replacing_a_variable_warns_but_rerunning_a_cell_does_not(clean, capsys):
    clean.run("weights = [1.0, 2.0]")
    body = 'extern "C" __global__ void weights(float* x) {}\nextern "C" __global__ void saxpy(float* x) {}'
    clean.cell_magic("cuda_kernel", "", body)
    assert capsys.readouterr().err == ("labmagic: kernel 'weights' is bound as weights and replaces the notebook's "
                                       "weights (list)\n")
    clean.cell_magic("cuda_kernel", "", body)  # the names now hold kernels: nothing to say
    assert capsys.readouterr().err == ""
