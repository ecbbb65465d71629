"""The panel of a CUBIN from another compiler (TileLang, CuTeDSL), on real NVRTC CUBINs: what cuobjdump reads
from the CUBIN must agree with what the compiler reported when it built it."""

from __future__ import annotations

import pytest

import labmagic
from labmagic.analysis.cubin_panel import cubin_panel, resource_usage
from labmagic.compiler import nvrtc
from labmagic.errors import LabError

# One kernel with static shared memory (a template), one without.
STAGED = """\
template <int N> __global__ void reverse(float* out, const float* in) {
  __shared__ float tile[N];
  tile[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = tile[N - 1 - threadIdx.x];
}
extern "C" __global__ void plain(float* out, const float* in) { out[threadIdx.x] = 2.f * in[threadIdx.x]; }
"""

# 40 live values squeezed into 32 registers by __launch_bounds__(1024, 2): ptxas spills to local memory.
SPILLING = """\
extern "C" __global__ void __launch_bounds__(1024, 2) squeezed(const float* a, float* out, int n) {
  float v[40];
  #pragma unroll
  for (int k = 0; k < 40; ++k) v[k] = a[threadIdx.x + k * n];
  float s = 0;
  #pragma unroll
  for (int r = 0; r < 3; ++r)
    #pragma unroll
    for (int k = 0; k < 40; ++k) s = s * v[k] + v[(k + r) % 40];
  out[threadIdx.x] = s;
}
"""


def _compile(src, **kw):
    return nvrtc.compile(src, arch="sm_90a", use_cache=False, **kw)


def test_resources_read_from_the_cubin_match_the_compilers_report():
    """Static shared memory (the CUBIN's section also holds the 1 KB the system reserves), registers, and none
    of the reserve where a kernel has no shared memory."""
    result = _compile(STAGED, name_expressions=["reverse<128>"])
    from_cubin = resource_usage(result.cubin, "sm_90a")
    assert set(from_cubin) == set(result.resources)
    for symbol, reported in result.resources.items():
        read = from_cubin[symbol]
        assert (read.registers, read.smem_static) == (reported.registers, reported.smem_static), symbol
    assert sorted(r.smem_static for r in from_cubin.values()) == [0, 128 * 4]


def test_a_cubin_panel_shows_occupancy_at_the_launch_and_local_memory_as_a_note():
    spilling = _compile(SPILLING)
    (symbol,) = spilling.resources
    p = labmagic.cubin_panel(spilling.cubin, "sm_90a", block_size=1024, dynamic_smem=4096)
    k = p[symbol]
    assert k.registers == spilling.resources[symbol].registers <= 32
    assert k.block_size == 1024 and k.block_size_from == "given" and k.dynamic_smem == 4096
    assert k.occupancy.percent == 100.0 and k.mix["STL"] > 0
    assert "local-memory instructions (STL/LDL)" in k.note and "local-memory" in repr(p)
    assert "spills and barriers: not recorded in a CUBIN" in repr(p) and "0 B st" not in repr(p)
    assert k.resources.stack_frame >= spilling.resources[symbol].spill_stores > 0


def test_a_cubin_panel_names_its_kernels_and_refuses_what_is_not_there():
    result = _compile(STAGED, name_expressions=["reverse<128>"])
    p = cubin_panel(result.cubin, block_size=128, kernels=["plain"])
    assert [k.symbol for k in p.kernels] == ["plain"] and p.arch == "sm_90"
    with pytest.raises(LabError, match="no kernel 'gemm' in this CUBIN; it has"):
        cubin_panel(result.cubin, block_size=128, kernels=["gemm"])
    with pytest.raises(LabError, match="is not like sm_90a"):
        cubin_panel(result.cubin, "hopper", block_size=128)
    with pytest.raises(LabError, match="cuobjdump could not read the CUBIN"):
        cubin_panel(b"not an ELF", block_size=128)
