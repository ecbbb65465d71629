"""Valid code is not rejected and each kernel gets its own Python name: namespaces, ``#if 0``, an unclosed
parenthesis, instances that differ only in pointer-ness (issue #13, item 7)."""

from __future__ import annotations

import numpy as np
import pytest

import labmagic
from labmagic.compiler.kernel import python_name
from labmagic.compiler.signature import parse_kernels
from labmagic.errors import ArgumentError, CompileError, LabError

NAMESPACES = """\
namespace blas { __global__ void scale(float* x, float a, int n) {} }
namespace outer { namespace inner { extern "C" __global__ void fill(int* x) {} } }
namespace { __global__ void hidden(double* x) {} }
namespace blas { template <typename T> __global__ void axpy(T* y, const T* x, T a) {} }
"""


def test_kernels_in_namespaces_are_compiled_and_bound(shell):
    shell.cell_magic("cuda_kernel", "-n 'blas::axpy<double>'", NAMESPACES)
    scale, fill, hidden, axpy = (shell.ns[n] for n in ("blas_scale", "outer_inner_fill", "hidden", "blas_axpy_double"))
    assert scale.symbol == "_ZN4blas5scaleEPffi" and scale.signature == "blas::scale(float* x, float a, int n)"
    assert fill.symbol == "fill" and hidden.symbol.startswith("_ZN") and axpy.decl.params[0].base == "double"


def test_kernels_the_preprocessor_removes_are_left_out(shell):
    body = """\
#if 0
__global__ void draft(float* x) {}
#endif
#ifdef WITH_EXTRA
extern "C" __global__ void extra(float* x) {}
#endif
__global__ void kept(float* x) {}
"""
    shell.run("for _n in ('draft', 'extra', 'kept'): globals().pop(_n, None)")
    shell.cell_magic("cuda_kernel", "", body)
    assert "kept" in shell.ns and "draft" not in shell.ns and "extra" not in shell.ns
    shell.cell_magic("cuda_kernel", "-- -DWITH_EXTRA", body)
    assert shell.ns["extra"].symbol == "extra"


def test_an_unclosed_parenthesis_is_nvrtcs_error_with_the_cells_line(shell):
    body = 'extern "C" __global__ void ok(float* a) {}\n__global__ void broken(float* a {\n    a[0] = 1.0f;\n}'
    with pytest.raises(CompileError, match=r'^line 3: expected a "\)"'):
        shell.cell_magic("cuda_kernel", "", body)


@pytest.mark.parametrize("text", [
    "__global__ void k(float* a {",
    "template <typename T __global__ void k(T* a) {}",
    "__global__ void __launch_bounds__(256 k(float* a) {}",
    'extern "C" { __global__ void k(float* a) {}',
])
def test_the_scanner_never_raises(text):
    parse_kernels(text)


def test_brackets_in_char_literals_do_not_confuse_the_scanner():
    body = ("__device__ int big = 1'000'000;\n"
            "extern \"C\" {\n__device__ char closing() { return '}'; }\n__global__ void k(float* a, int n) {}\n}")
    (kernel,) = parse_kernels(body)
    assert (kernel.name, [p.name for p in kernel.params], kernel.line) == ("k", ["a", "n"], 4)
    assert kernel.extern_c  # the '}' literal does not end the extern "C" block


def test_instances_that_differ_in_pointerness_get_their_own_names(shell):
    body = "template <typename T> __global__ void store(T value, float* out) {}"
    shell.cell_magic("cuda_kernel", "-n 'store<float*>' -n 'store<float>'", body)
    by_pointer, by_value = shell.ns["store_float_ptr"], shell.ns["store_float"]
    assert by_pointer.symbol != by_value.symbol and by_pointer.decl.params[0].pointer == 1
    assert python_name("tile<-1, 4>") == "tile_minus_1_4" != python_name("tile<1, 4>")


def test_two_kernels_with_one_python_name_are_refused():
    body = "__global__ void scale_float(float* x) {}\ntemplate <typename T> __global__ void scale(T* x) {}"
    with pytest.raises(LabError, match=r"^kernels '(scale<float>|scale_float)' and '(scale_float|scale<float>)' would "
                                       r"both be bound as scale_float: rename one"):
        labmagic.compile_cuda(body, name_expressions=["scale<float>"])


def test_a_bad_name_expression_names_itself():
    body = "template <typename T> __global__ void scale(T* x) {}"
    with pytest.raises(CompileError, match=r"^name expression 'scale<flaot>': identifier \"flaot\" is undefined$"):
        labmagic.compile_cuda(body, name_expressions=["scale<flaot>"])


def test_implicit_int_parameters_keep_their_names_and_lone_types_stay_types():
    body = "__global__ void k(unsigned n, signed m, const unsigned c, unsigned int, const int, unsigned long) {}"
    (kernel,) = parse_kernels(body)
    assert [(p.name, p.base) for p in kernel.params] == [
        ("n", "unsigned"), ("m", "signed"), ("c", "unsigned"),
        ("arg3", "unsigned int"), ("arg4", "int"), ("arg5", "unsigned long")]


CLUSTERED = """\
__global__ void __cluster_dims__(4, 2, 1) pairs(float* x) { x[0] = 1.0f; }
template <int C> __global__ void __cluster_dims__(C, 1, 1) rows(float* x) { x[0] = 1.0f; }
__global__ void __launch_bounds__(128) plain(float* x) { x[0] = 1.0f; }
"""


def test_a_grid_that_is_not_a_whole_number_of_clusters_is_refused_before_the_launch():
    module = labmagic.compile_cuda(CLUSTERED, arch="sm_90", name_expressions=["rows<2>"])
    pairs, rows, plain = (module.kernels[n] for n in ("pairs", "rows<2>", "plain"))
    assert (pairs.cluster, rows.cluster, plain.cluster) == ((4, 2, 1), (2, 1, 1), None)
    x = np.zeros(4, np.float32)
    with pytest.raises(ArgumentError, match=r"^pairs: grid=\(6, 2\) is not a whole number of clusters: the kernel's "
                                            r"__cluster_dims__ is \(4, 2, 1\), so each grid dimension"):
        pairs(x, grid=(6, 2), block=32)
    with pytest.raises(ArgumentError, match=r"^rows<2>: grid=7 is not a whole number of clusters"):
        rows(x, grid=7, block=32)
