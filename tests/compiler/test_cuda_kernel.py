"""%%cuda_kernel through a real IPython shell and the real NVRTC (no GPU needed unless marked)."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import labmagic
from labmagic.compiler import cache, nvrtc
from labmagic.compiler.kernel import CudaKernel
from labmagic.errors import ArgumentError, CompileError, NoGPUError

VECADD = """\
extern "C" __global__ void vecadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}"""


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _unique(body: str, tag: str) -> str:
    """Make the source unique per test run, so cache assertions start cold."""
    return f"// {tag} {np.random.default_rng().integers(1 << 62)}\n{body}"


def test_compile_binds_each_kernel_and_reports_resources(shell, capsys):
    shell.cell_magic("cuda_kernel", "", VECADD)
    kernel = shell.ns["vecadd"]
    assert isinstance(kernel, CudaKernel)
    assert kernel.signature == "vecadd(const float* a, const float* b, float* c, int n)"
    res = kernel.resources
    assert res.arch == labmagic.target_arch()
    assert 4 <= res.registers <= 32 and res.spill_stores == 0 and res.stack_frame == 0
    out = capsys.readouterr().out
    assert f"vecadd [{res.arch}]  regs {res.registers} | smem 0 B | stack 0 B | spills 0 B st / 0 B ld" in out


def test_compile_error_names_the_cell_line_and_shows_it(shell, capsys):
    body = 'extern "C" __global__ void broken(float* a) {\n    a[0] = 1.0f;\n    a[1] = undefined_name;\n}'
    with pytest.raises(CompileError) as info:
        shell.cell_magic("cuda_kernel", "", body)
    # The cell as the user sees it: line 1 is %%cuda_kernel, so the bad statement is on line 4.
    assert str(info.value) == 'line 4: identifier "undefined_name" is undefined'
    assert "cell(4): error" in info.value.detail and "a[1] = undefined_name;" in info.value.detail
    shown = _plain(capsys.readouterr().out)
    assert "CompileError: line 4" in shown and "Traceback" not in shown
    # The notebook stays usable: the next cell compiles and runs.
    shell.cell_magic("cuda_kernel", "", VECADD)
    assert shell.run("1 + 1") == 2


def test_unchanged_cell_hits_the_memory_cache_then_the_disk_cache(shell, tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path))
    src = _unique(VECADD, "cache")
    first = nvrtc.compile(src)
    second = nvrtc.compile(src)
    assert (first.origin, second.origin) == ("compiled", "memory")
    assert second.cubin == first.cubin
    assert (tmp_path / f"{first.key}.cubin").read_bytes() == first.cubin
    cache.forget(first.key)
    third = nvrtc.compile(src)
    assert third.origin == "disk" and third.cubin == first.cubin and third.resources == first.resources
    # A different architecture or option is a different key: it must recompile.
    assert nvrtc.compile(src, arch="sm_80").origin == "compiled"
    assert nvrtc.compile(src, options=("-DUNUSED=1",)).origin == "compiled"


SPILLER = """\
extern "C" __global__ void spiller(const float* in, float* out, int n) {
    float acc[48];
    #pragma unroll
    for (int k = 0; k < 48; ++k) acc[k] = in[(threadIdx.x * 48 + k) % n];
    #pragma unroll
    for (int r = 0; r < 8; ++r)
        #pragma unroll
        for (int k = 0; k < 48; ++k) acc[k] = acc[k] * acc[(k + r + 1) % 48] + 1.0f;
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < 48; ++k) s += acc[k] * (k + 1);
    out[threadIdx.x] = s;
}"""


def test_spills_are_reported_and_highlighted(shell, capsys):
    shell.cell_magic("cuda_kernel", "--maxrregcount 24 --as spill_mod", SPILLER)
    res = shell.ns["spiller"].resources
    assert res.registers <= 24  # ptxas will not go below 24 on sm_90
    assert res.spill_stores > 0 and res.spill_loads > 0
    assert "SPILLS" in capsys.readouterr().out
    html = shell.ns["spill_mod"]._repr_html_()
    assert "#b00020" in html and f"{res.spill_stores} B st" in html
    # The same kernel without the cap does not spill: the report tells the two apart.
    shell.cell_magic("cuda_kernel", "", SPILLER)
    assert not shell.ns["spiller"].resources.spills


HEADERS = """\
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <cuda/pipeline>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
using namespace nvcuda;

extern "C" __global__ void uses_headers(const __half* h, const __nv_bfloat16* bf, float* out) {
    cg::thread_block block = cg::this_thread_block();
    __shared__ float stage[32];
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    pipe.producer_acquire();
    cuda::memcpy_async(&stage[threadIdx.x % 32], out + threadIdx.x % 32, sizeof(float), pipe);
    pipe.producer_commit();
    pipe.consumer_wait();
    pipe.consumer_release();
    block.sync();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> frag;
    wmma::fill_fragment(frag, __float2half(0.0f));
    out[threadIdx.x] = __half2float(h[threadIdx.x]) + __bfloat162float(bf[threadIdx.x]) + stage[0]
                       + __half2float(frag.x[0]);
}"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
def test_kernel_headers_compile_for_each_arch(shell, arch):
    shell.cell_magic("cuda_kernel", f"--arch {arch}", HEADERS)
    kernel = shell.ns["uses_headers"]
    assert kernel.resources.arch == arch
    assert [p.base for p in kernel.decl.params] == ["__half", "__nv_bfloat16", "float"]


def test_template_instances_by_name_expression(shell):
    body = """\
template <typename T, int SCALE>
__global__ void scale(const T* __restrict__ x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * T(SCALE);
}"""
    shell.cell_magic("cuda_kernel", "-n 'scale<float, 3>' -n 'scale<double, 2>'", body)
    f32, f64 = shell.ns["scale_float_3"], shell.ns["scale_double_2"]
    assert f32.signature == "scale<float, 3>(const float* x, float* y, int n)"
    assert f64.decl.params[0].base == "double"
    assert f32.symbol.startswith("_Z") and f32.symbol != f64.symbol
    with pytest.raises(ArgumentError, match="'x' \\(const float\\*\\) needs float32 data, got float64"):
        f32(torch.zeros(4, dtype=torch.float64), torch.zeros(4), 4, grid=1, block=32)


def test_name_expressions_from_a_variable(shell):
    """Chapter 06 names its decode instances once, in Python, and passes them as ``{decode_flags}``: IPython
    expands the magic's line before %%cuda_kernel parses it, quotes and all."""
    shell.run("scales = [f'scale<{s}>' for s in (2, 3)]\nscale_flags = ' '.join(f\"-n '{n}'\" for n in scales)")
    body = "template <int S>\n__global__ void scale(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] *= S; }"
    try:
        shell.cell_magic("cuda_kernel", "--as scales_mod -n 'scale<1>' {scale_flags}", body)
        module = shell.ns["scales_mod"]
        assert sorted(module.kernels) == ["scale<1>", "scale<2>", "scale<3>"]
        assert module["scale<3>"].signature == "scale<3>(float* y, int n)"
        assert module["scale<2>"].symbol != module["scale<3>"].symbol
    finally:  # the shell is shared: leave no names behind, passed or not
        shell.run("for _n in ('scales', 'scale_flags', 'scales_mod', 'scale_1', 'scale_2', 'scale_3'): globals().pop(_n, None)")


def test_extra_options_pass_through(shell):
    body = 'extern "C" __global__ void k(float* a) { a[0] = SCALE; }'
    with pytest.raises(CompileError, match='identifier "SCALE" is undefined'):
        shell.cell_magic("cuda_kernel", "", body)
    shell.cell_magic("cuda_kernel", "-- -DSCALE=3.0f -use_fast_math", body)
    assert "-DSCALE=3.0f" in shell.ns["k"].module.result.options


class TestArgumentChecks:
    @pytest.fixture(autouse=True)
    def _kernel(self, shell):
        shell.cell_magic("cuda_kernel", "", VECADD)
        self.k = shell.ns["vecadd"]

    def test_wrong_dtype_names_the_parameter(self):
        a = torch.rand(8, dtype=torch.float64)
        with pytest.raises(ArgumentError, match=r"^vecadd: argument 'a' \(const float\*\) needs float32 data, got float64$"):
            self.k(a, a, a, 8, grid=1, block=32)

    def test_missing_and_extra_arguments(self):
        a = torch.rand(8)
        with pytest.raises(ArgumentError, match=r"missing argument 'n' \(int\)"):
            self.k(a, a, a, grid=1, block=32)
        with pytest.raises(ArgumentError, match="5 arguments given but the kernel takes 4"):
            self.k(a, a, a, 8, 9, grid=1, block=32)

    def test_non_contiguous_tensor(self):
        a = torch.rand(8, 2).t()
        with pytest.raises(ArgumentError, match=r"argument 'a' \(const float\*\) is not contiguous"):
            self.k(a, a, a, 16, grid=1, block=32)

    def test_scalar_types(self):
        a = torch.rand(8)
        with pytest.raises(ArgumentError, match=r"argument 'n' \(int\) needs an int, got float 8.0"):
            self.k.check_args((a, a, a, 8.0))
        with pytest.raises(ArgumentError, match=r"does not fit in int"):
            self.k.check_args((a, a, a, 2**31))
        with pytest.raises(ArgumentError, match=r"argument 'c' \(float\*\) needs a tensor or array, got list"):
            self.k.check_args((a, a, [1.0], 8))

    def test_launch_shape_is_checked(self):
        a = torch.rand(8)
        with pytest.raises(ArgumentError, match="block=2048 has 2048 threads; the limit is 1024"):
            self.k(a, a, a, 8, grid=1, block=2048)
        with pytest.raises(ArgumentError, match="grid=0 has a dimension below 1"):
            self.k(a, a, a, 8, grid=0, block=32)

    @pytest.mark.skipif(labmagic.has_gpu(), reason="checks the message shown on a machine without a GPU")
    def test_without_gpu_a_call_says_so_in_one_line(self, shell, capsys):
        shell.ns["a"] = torch.rand(8)
        with pytest.raises(NoGPUError, match="vecadd needs a CUDA GPU to run; this machine has none"):
            shell.run("vecadd(a, a, a, 8, grid=1, block=32)")
        shown = _plain(capsys.readouterr().out)
        assert "NoGPUError: vecadd needs a CUDA GPU" in shown and "Traceback" not in shown

    @pytest.mark.gpu
    def test_cpu_tensor_on_gpu_machine(self):
        a = torch.rand(8)
        with pytest.raises(ArgumentError, match=r"argument 'a' \(const float\*\) is a CPU torch tensor .* move it with .cuda\(\)"):
            self.k(a, a, a, 8, grid=1, block=32)


def test_cpu_mode_configures_triton_and_jax():
    code = textwrap.dedent("""
        import os, sys
        import labmagic
        print(os.environ.get("TRITON_INTERPRET"), os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"), labmagic.SETUP_NOTES)
    """)
    env = {"LABMAGIC_FORCE_CPU": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("1 false [\"no CUDA GPU: Triton kernels run in Triton's interpreter")


def test_jax_is_kept_on_torchs_gpu_when_several_are_visible(monkeypatch):
    # On a two-GPU host JAX used to open both GPUs and leave GPU 1 current, so torch's next "cuda" tensor
    # landed there and DLPack export of the earlier ones failed (seen in `labmagic sweep` on 2 H200s).
    import jax

    from labmagic import runtime

    fake = (("NVIDIA H200", 9, 0, 132), ("NVIDIA H200", 9, 0, 132))
    monkeypatch.setattr(runtime, "driver_devices", lambda: fake)
    before = jax.config.read("jax_cuda_visible_devices")
    try:
        runtime.configure_jax()
        assert jax.config.read("jax_cuda_visible_devices") == "0"
    finally:
        jax.config.update("jax_cuda_visible_devices", before)


@pytest.mark.gpu
def test_jax_leaves_torchs_current_device_alone():
    import jax.numpy as jnp

    from labmagic.pallas import to_jax, to_torch

    a = torch.arange(8.0, device="cuda")
    b = to_torch(to_jax(a) * 2)  # starts JAX's GPU backend on first use
    assert torch.cuda.current_device() == a.device.index == b.device.index
    assert torch.equal(b, a * 2) and float(jnp.sum(to_jax(a))) == 28.0


def test_triton_imported_first_is_called_out():
    code = "import triton, labmagic; print(labmagic.SETUP_NOTES[0])"
    env = {"LABMAGIC_FORCE_CPU": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "triton was imported before labmagic" in out and "restart the kernel" in out


# -- on the GPU ------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 3, 1023, 2**20 + 7])
def test_launch_computes_the_sum(shell, n):
    shell.cell_magic("cuda_kernel", "", VECADD)
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    shell.ns["vecadd"](a, b, c, n, grid=(n + 255) // 256, block=256)
    torch.testing.assert_close(c.double(), a.double() + b.double(), rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_launch_is_ordered_on_torchs_current_stream(shell):
    shell.cell_magic("cuda_kernel", "", VECADD)
    n = 1 << 24
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        a = torch.randn(n, device="cuda")
        b = a * 2  # queued on `stream`; the kernel must wait for it without any synchronize
        c = torch.empty_like(a)
        shell.ns["vecadd"](a, b, c, n, grid=n // 256, block=256)
        d = c * 1  # and torch work after it must see its result
    stream.synchronize()
    torch.testing.assert_close(d, a * 3)


@pytest.mark.gpu
def test_dynamic_shared_memory_above_48k(shell):
    body = """\
extern "C" __global__ void reverse_block(const float* x, float* y, int n) {
    extern __shared__ float tile[];
    int i = threadIdx.x;
    for (int j = i; j < n; j += blockDim.x) tile[j] = x[j];
    __syncthreads();  // every element staged before any is read back
    for (int j = i; j < n; j += blockDim.x) y[j] = tile[n - 1 - j];
}"""
    shell.cell_magic("cuda_kernel", "", body)
    n = 20000  # 80 KB of shared memory: needs the opt-in attribute
    x = torch.randn(n, device="cuda")
    y = torch.full_like(x, float("nan"))
    shell.ns["reverse_block"](x, y, n, grid=1, block=256, smem=4 * n)
    torch.testing.assert_close(y, x.flip(0))


@pytest.mark.gpu
def test_cupy_arrays_are_accepted(shell):
    import cupy

    shell.cell_magic("cuda_kernel", "", VECADD)
    a = cupy.arange(100, dtype=cupy.float32)
    c = cupy.full(100, cupy.nan, dtype=cupy.float32)
    shell.ns["vecadd"](a, a, c, 100, grid=1, block=128)
    torch.cuda.synchronize()
    assert cupy.allclose(c, 2 * a)


def test_resource_report_html_reads_apart_and_sits_left(shell):
    shell.cell_magic("cuda_kernel", "", VECADD.replace("vecadd", "vecadd_naive"))
    module = shell.ns["vecadd_naive"].module
    res = shell.ns["vecadd_naive"].resources
    page = module._repr_html_()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    # The tags stripped, the name, the arch and each field stay apart (not 'vecadd_naivesm_90regs 12').
    assert re.search(rf"vecadd_naive\s+\[{res.arch}\]\s+regs {res.registers}\s+\|\s+smem 0 B\s+\|\s+stack", text), text
    tables = re.findall(r"<table[^>]*>", page)
    assert tables
    for tag in tables:
        flat = tag.replace(" ", "").lower()
        assert "margin:auto" not in flat and "margin-left:auto" not in flat and "align=" not in flat
        assert "text-align:left" in flat and "margin-left:0" in flat
