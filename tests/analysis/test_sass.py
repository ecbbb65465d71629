"""SASS disassembly and instruction-mix parsing, on real NVRTC CUBINs and on literal tool output."""

from __future__ import annotations

import pytest

from labmagic.analysis import sass
from labmagic.compiler import nvrtc

VEC = """\
extern "C" __global__ void add1(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void add4(const float4* a, const float4* b, float4* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}
"""

SHARED = """\
extern "C" __global__ void rev(float* out, const float* in) {
  __shared__ float tile[256];
  tile[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();  // every write to tile lands before any thread reads its mirror
  out[blockIdx.x * 256 + threadIdx.x] = tile[255 - threadIdx.x] * 2.0f + 1.0f;
}
"""

WGMMA = """\
extern "C" __global__ void wg(float* out, unsigned long long da, unsigned long long db) {
  float d[8] = {0};
  asm volatile("wgmma.fence.sync.aligned;\\n");
  asm volatile(
    "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
    "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, 1, 1, 1, 0, 0;\\n"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
    : "l"(da), "l"(db));
  asm volatile("wgmma.commit_group.sync.aligned;\\n");
  asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
  for (int k = 0; k < 8; ++k) out[threadIdx.x * 8 + k] = d[k];
}
"""

MMA = """\
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void tc(const half* a, const half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
"""


def _compile(src, arch="sm_90", **kw):
    return nvrtc.compile(src, arch=arch, first_line=2, use_cache=False, **kw)


def test_vectorised_loads_are_128_bit():
    result = _compile(VEC)
    functions = sass.disassemble(result.cubin)
    assert set(functions) == {"add1", "add4"}
    one, four = sass.instruction_mix(functions["add1"]), sass.instruction_mix(functions["add4"])
    assert one["LDG"] == 2 and one["LDG.32"] == 2 and one["STG.32"] == 1 and one["LDG.128"] == 0
    assert four["LDG.128"] == 2 and four["STG.128"] == 1 and four["LDG.32"] == 0
    assert four["FADD"] == 4


def test_source_lines_interleave_with_cell_numbering():
    # first_line=2: the cell's first source line is line 2 (the magic sits on line 1).
    result = _compile(VEC)
    add4 = sass.disassemble(result.cubin)["add4"]
    loads = [i for i in add4 if i.opcode == "LDG.E.128"]
    assert loads and all(i.line == 9 and i.file.endswith("cell") for i in loads)  # float4 x = a[i], y = b[i];
    text = sass.interleave(add4, result.source, first_line=2)
    # The line comment sits above the loads and quotes the source.
    before_load = text.split("LDG.E.128")[0].rstrip().splitlines()
    comments = [line for line in before_load if line.strip().startswith("//")]
    assert comments[-1].strip() == "// cell:9: float4 x = a[i], y = b[i];"
    assert "NOP" not in text  # alignment padding is trimmed


def test_shared_memory_and_barrier():
    mix = sass.instruction_mix(sass.disassemble(_compile(SHARED).cubin)["rev"])
    assert mix["STS"] == 1 and mix["LDS"] == 1 and mix["BAR"] == 1
    assert mix["FFMA"] == 1  # x * 2 + 1 fuses into one FMA


def test_tensor_core_instructions():
    hmma = sass.instruction_mix(sass.disassemble(_compile(MMA, arch="sm_80").cubin)["tc"])
    assert hmma["HMMA"] >= 2  # a 16x16x16 wmma is two or more m16n8k16 HMMAs
    assert hmma["HGMMA"] == 0
    # wgmma exists only on sm_90a.
    hg = sass.instruction_mix(sass.disassemble(_compile(WGMMA, arch="sm_90a").cubin)["wg"])
    assert hg["HGMMA"] == 1 and hg["HMMA"] == 0


def test_without_lineinfo_no_lines():
    result = nvrtc.compile(VEC, arch="sm_90", lineinfo=False, use_cache=False)
    add1 = sass.disassemble(result.cubin)["add1"]
    assert add1 and all(i.line is None for i in add1)
    assert "// cell" not in sass.interleave(add1, result.source)


def test_ptx_of_one_kernel_and_launch_bounds():
    src = VEC.replace("void add4", "void __launch_bounds__(128) add4")
    result = _compile(src)
    body = sass.kernel_ptx(result.ptx, "add4")
    assert body.lstrip().startswith(".visible .entry add4(") and body.rstrip().endswith("}")
    assert "add1" not in body
    assert sass.launch_bounds(result.ptx, "add4") == 128
    assert sass.launch_bounds(result.ptx, "add1") is None


# Literal nvdisasm -gi output (CUDA 13, sm_90) with an inlined header function and a predicate.
NVDISASM = """\
//--------------------- .text.k                   --------------------------
\t.section\t.text.k,"ax",@progbits
k:
.text.k:
\t//## File "cell", line 3
        /*0000*/                   LDC R1, c[0x0][0x28] ;
\t//## File "/usr/include/cuda_fp16.hpp", line 812 inlined at "cell", line 5
        /*0010*/                   HADD2.F32 R0, -RZ, R2.H0_H0 ;
\t//## File "cell", line 6
        /*0020*/               @!P0 LDG.E.U16 R3, desc[UR4][R2.64] ;
        /*0030*/                   STS.64 [R4], R6 ;
        /*0040*/                   EXIT ;
        /*0050*/                   NOP;
"""


def test_parse_literal_disassembly():
    funcs = sass.parse_disassembly(NVDISASM)
    k = funcs["k"]
    assert [i.opcode for i in k] == ["LDC", "HADD2.F32", "LDG.E.U16", "STS.64", "EXIT", "NOP"]
    assert k[2].predicate == "@!P0" and k[2].line == 6
    assert k[1].line == 812 and k[1].inlined_at == 5
    assert sass.source_line_of(k[1]) == 5  # the reader's line, not the header's
    mix = sass.instruction_mix(k)
    assert mix["LDG.16"] == 1 and mix["STS.64"] == 1
    text = sass.interleave(k, "a\nb\nc\nd\nhalf h = x;\ny\n", first_line=1)
    assert "cuda_fp16.hpp:812 (inlined at line 5): half h = x;" in text


def test_missing_tool_is_one_clear_error(monkeypatch):
    from labmagic.errors import ToolMissingError

    sass.find_tool.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    import cuda.pathfinder

    monkeypatch.setattr(cuda.pathfinder, "find_nvidia_binary_utility", lambda name: None)
    monkeypatch.setattr(sass.os, "access", lambda path, mode: False)  # a GPU box's /usr/local/cuda too
    try:
        with pytest.raises(ToolMissingError, match="pip install nvidia-cuda-nvdisasm"):
            sass.find_tool("nvdisasm")
    finally:
        sass.find_tool.cache_clear()
