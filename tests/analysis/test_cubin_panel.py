"""The panel of a CUBIN from another compiler (TileLang, CuTeDSL), on real NVRTC CUBINs: what cuobjdump reads
from the CUBIN must agree with what the compiler reported when it built it."""

from __future__ import annotations

import pytest
from test_panel import HEAVY, TWO  # a kernel that spills; a template with static shared memory and a plain one

import labmagic
from labmagic.analysis.cubin_panel import cubin_panel, resource_usage
from labmagic.compiler import nvrtc
from labmagic.errors import LabError


def _compile(src, **kw):
    return nvrtc.compile(src, arch="sm_90a", use_cache=False, **kw)


def test_resources_read_from_the_cubin_match_the_compilers_report():
    """Static shared memory (the CUBIN's section also holds the 1 KB the system reserves), registers, and none
    of the reserve where a kernel has no shared memory."""
    result = _compile(TWO, name_expressions=["tiled<128>"])
    from_cubin = resource_usage(result.cubin, "sm_90a")
    assert set(from_cubin) == set(result.resources)
    for symbol, reported in result.resources.items():
        read = from_cubin[symbol]
        assert (read.registers, read.smem_static) == (reported.registers, reported.smem_static), symbol
    assert sorted(r.smem_static for r in from_cubin.values()) == [0, 128 * 4]


def test_a_cubin_panel_shows_occupancy_at_the_launch_and_local_memory_as_a_note():
    spilling = _compile(HEAVY.replace("BOUNDS", "__launch_bounds__(1024, 2)"))
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
    result = _compile(TWO, name_expressions=["tiled<128>"])
    p = cubin_panel(result.cubin, block_size=128, kernels=["plain"])
    assert [k.symbol for k in p.kernels] == ["plain"] and p.arch == "sm_90"
    with pytest.raises(LabError, match="no kernel 'gemm' in this CUBIN; it has"):
        cubin_panel(result.cubin, block_size=128, kernels=["gemm"])
    with pytest.raises(LabError, match="is not like sm_90a"):
        cubin_panel(result.cubin, "hopper", block_size=128)
    with pytest.raises(LabError, match="cuobjdump could not read the CUBIN"):
        cubin_panel(b"not an ELF", block_size=128)
