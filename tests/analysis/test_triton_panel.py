"""The Triton compile panel on real Triton output, compiled for sm_90 without a GPU or a launch."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

import labmagic
from labmagic.analysis.triton_panel import triton_panel
from labmagic.errors import CompileError, LabError

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

SIG = "x: *fp32, y: *fp32, out: *fp32, n: i32"


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def matmul(a, b, c, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(a + rm[:, None] * K + (k + rk)[None, :]), tl.load(b + (k + rk)[:, None] * BN + rn[None, :]))
    tl.store(c + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def row_stats(x, out, n, BLOCK: tl.constexpr):
    v = tl.load(x + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n, other=float("-inf"))
    tl.store(out, tl.max(v, 0) + tl.sum(tl.where(v == float("-inf"), 0.0, v), 0))


@triton.jit
def broken(x, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), tl.no_such_function(BLOCK))


@pytest.fixture(scope="module")
def big():
    return triton_panel(add, SIG, {"BLOCK": 1024}, arch="sm_90")


def test_irs_sass_and_resources(big):
    assert big.arch == "sm_90" and big.name == "add"
    assert "tt.func public @add" in big.irs["ttir"]
    assert "#ttg.blocked" in big.irs["ttgir"] and '"ttg.num-warps" = 4' in big.irs["ttgir"]
    assert ".entry add" in big.irs["ptx"] and ".target sm_90a" in big.irs["ptx"]
    assert big.mix["LDG"] >= 2 and big.mix["STG"] >= 1 and big.mix["FADD"] >= 1
    assert big.registers > 0 and big.shared == 0 and not big.spills
    assert big.kernel.block_size == 128 and big.kernel.occupancy.percent > 0
    assert "LDG" in big.text("sass") and "k.py" not in big.text("sass")


def test_registers_match_the_cubin(big, tmp_path):
    """The ptxas -v replay reports what is in the CUBIN Triton built (cuobjdump's resource usage)."""
    from labmagic.tools import find_tool

    cubin = tmp_path / "add.cubin"
    cubin.write_bytes(big.compiled.cubin)
    out = subprocess.run([find_tool("cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
    assert int(re.search(r"REG:(\d+)", out).group(1)) == big.registers


def test_pointers_and_multiples_of_16_vectorise():
    torch = pytest.importorskip("torch")
    x = torch.randn(4096)
    aligned = triton_panel(add, constexprs={"BLOCK": 1024}, args=(x, x, x, 4096))
    ragged = triton_panel(add, constexprs={"BLOCK": 1024}, args=(x, x, x, 4095))
    assert aligned.compiled.signature["n"] == "i32"
    assert aligned.mix["LDG.128"] > 0 and aligned.mix["STG.128"] > 0
    assert ragged.mix["LDG.128"] == 0 and ragged.mix["LDG.32"] > 0


def test_diff_of_two_block_sizes(big):
    small = triton_panel(add, SIG, {"BLOCK": 128}, num_warps=1, vs=big)
    d = small.comparison
    assert d.before == "add[BLOCK=1024, warps=4, stages=3]"
    assert d.row("BLOCK").delta == "-896" and d.row("num_warps").delta == "-3"
    assert d.row("LDG").before > d.row("LDG").after
    assert d.row("SASS instructions").changed
    assert not triton_panel(add, SIG, {"BLOCK": 1024}).diff(big).changed


def test_a_kernel_using_triton_library_helpers_compiles_under_the_interpreter_too(big):
    """Under TRITON_INTERPRET=1 Triton's own @jit helpers (tl.zeros, tl.max...) are interpreter functions; the
    compile swaps in JIT functions for them, so such a kernel compiles as on a GPU machine. A kernel run in the
    interpreter first, calling such a helper, leaves nothing behind that breaks the compile (Triton 3.6 did), and
    the interpreter still runs it afterwards."""
    torch = pytest.importorskip("torch")
    x, out = torch.randn(300), torch.empty(1)

    def run_in_interpreter():
        if labmagic.runtime.triton_interpreted():
            row_stats[(1,)](x, out, 300, BLOCK=512)
            # n fp32 terms summed in another order differ by up to n * u * sum|x| (u = 2^-24): more than rtol alone
            # allows when they nearly cancel (a fresh draw gave 0.0299 from 2.65 - 2.62)
            expected = x.double().max() + x.double().sum()
            atol = x.numel() * 2**-24 * float(x.abs().sum())
            assert torch.allclose(out.double(), expected, rtol=1e-5, atol=atol)

    run_in_interpreter()
    sig = "a: *fp16, b: *fp16, c: *fp32, K: i32"
    two = triton_panel(matmul, sig, {"BM": 64, "BN": 64, "BK": 32}, num_stages=2)
    three = triton_panel(matmul, sig, {"BM": 64, "BN": 64, "BK": 32}, num_stages=3, vs=two)
    assert two.shared > 0 and three.comparison.row("num_stages").changed  # the tiles are staged in shared memory
    assert three.mix["HGMMA"] >= 1  # tl.dot on sm_90: wgmma
    assert triton_panel(add, SIG, {"BLOCK": 1024}).registers == big.registers
    assert triton_panel(row_stats, "x: *fp32, out: *fp32, n: i32", {"BLOCK": 512}).mix["SHFL"] >= 1
    run_in_interpreter()


def test_text_and_html(big):
    small = triton_panel(add, SIG, {"BLOCK": 128}, vs=big, ir="ttgir,ptx", max_lines=5)
    text = repr(small)
    assert text.startswith("== add[BLOCK=128, warps=4, stages=3] [sm_90] | 128 threads/block ==")
    assert f"regs {small.registers} |" in text and "instruction mix (static): LDG" in text
    assert "diff vs add[BLOCK=1024, warps=4, stages=3]" in text
    assert re.search(r"^TTGIR \(first 5 lines, \d+ more\):$", text, re.M)
    assert re.search(r"^PTX \(first 5 lines, \d+ more\):$", text, re.M)
    assert "LLVM IR" not in text
    html = small._repr_html_()
    assert "<details open><summary>TTGIR" in html and "<details><summary>LLVM IR" in html
    assert "<table class='labmagic-mix'>" in html and "labmagic-diff" in html


def test_the_public_function():
    p = labmagic.triton_panel(add, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"}, {"BLOCK": 256})
    assert p.label == "add[BLOCK=256, warps=4, stages=3]" and p.mix["STG"] > 0


def test_reader_errors_are_one_line():
    with pytest.raises(LabError, match="no parameter BLOKC"):
        triton_panel(add, SIG, {"BLOKC": 64})
    with pytest.raises(LabError, match="no type for BLOCK"):
        triton_panel(add, SIG)
    with pytest.raises(LabError, match="cannot show sas"):
        triton_panel(add, SIG, {"BLOCK": 64}, ir="sas")
    with pytest.raises(CompileError, match="Triton could not compile broken for sm_90"):
        triton_panel(broken, "x: *fp32", {"BLOCK": 64})


def _gluon_tile_mma():
    """One 64 x 64 x 64 wgmma from shared memory, in Gluon: the layouts, the shared buffers and the fence are the
    kernel's own, as the chapters' Gluon GEMM writes them."""
    gluon = pytest.importorskip("triton.experimental.gluon")
    gl = pytest.importorskip("triton.experimental.gluon.language")
    hopper = pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")

    @gluon.jit
    def tile_mma(a_ptr, b_ptr, c_ptr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr):
        io: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])  # 16 bytes of bf16 a thread
        rm = gl.arange(0, BM, layout=gl.SliceLayout(1, io))
        rn = gl.arange(0, BN, layout=gl.SliceLayout(1, io))
        rk = gl.arange(0, BK, layout=gl.SliceLayout(0, io))
        a = gl.load(a_ptr + gl.expand_dims(rm, 1) * BK + gl.expand_dims(rk, 0))
        b = gl.load(b_ptr + gl.expand_dims(rn, 1) * BK + gl.expand_dims(rk, 0))
        swizzled: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
        a_s = gl.allocate_shared_memory(gl.bfloat16, [BM, BK], swizzled, a)
        b_s = gl.allocate_shared_memory(gl.bfloat16, [BN, BK], swizzled, b)
        hopper.fence_async_shared()
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                             instr_shape=[16, BN, 16])
        acc = hopper.warpgroup_mma(a_s, b_s.permute((1, 0)), gl.zeros((BM, BN), gl.float32, acc_layout),
                                   is_async=True)
        acc = hopper.warpgroup_mma_wait(0, deps=[acc])
        cn = gl.arange(0, BN, layout=gl.SliceLayout(0, io))
        gl.store(c_ptr + gl.expand_dims(rm, 1) * BN + gl.expand_dims(cn, 0), gl.convert_layout(acc, io))

    return tile_mma


def test_a_gluon_kernel_compiles_for_hopper_without_a_gpu():
    """Gluon has no interpreter, but its compile needs no GPU either: the panel of a Gluon kernel shows its own
    layouts in the TTGIR and the wgmma it asked for as HGMMA in the SASS (labmagic's TRITON_INTERPRET=1 too)."""
    kernel = _gluon_tile_mma()
    p = triton_panel(kernel, "a_ptr: *bf16, b_ptr: *bf16, c_ptr: *fp32", {"BM": 64, "BN": 64, "BK": 64}, arch="sm_90")
    assert p.name == "tile_mma" and p.arch == "sm_90" and "ttir" not in p.irs
    assert "#ttg.blocked<{sizePerThread = [1, 8]" in p.irs["ttgir"] and "#ttg.nvidia_mma<{versionMajor = 3" in p.irs["ttgir"]
    assert ".target sm_90a" in p.irs["ptx"] and "wgmma.mma_async" in p.irs["ptx"]
    assert p.mix["HGMMA"] == 4 and p.mix["LDG"] == 8 and p.shared == 2 * 64 * 64 * 2  # two bf16 tiles, 8 KB each
    assert p.registers > 0 and not p.spills


@triton.jit
def axpy(x, y, out, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, a * tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def test_fp_fusion_is_pinned_on_and_triton_does_not_warn(recwarn):
    """labmagic pins Triton's FP fusion on (the default through 3.9, which 3.10 changes): a * x + y compiles to one
    FFMA, as in the book's measured kernels, and Triton has nothing to warn about."""
    assert os.environ.get("TRITON_DEFAULT_FP_FUSION") == "1"  # set by importing labmagic (no user setting here)
    panel = triton_panel(axpy, "x: *fp32, y: *fp32, out: *fp32, a: fp32, n: i32", {"BLOCK": 256}, arch="sm_90")
    assert panel.mix["FFMA"] >= 1 and panel.mix.get("FMUL", 0) == 0
    assert not [w for w in recwarn if "FP_FUSION" in str(w.message)]


def test_a_users_fp_fusion_setting_wins(monkeypatch):
    from labmagic import runtime

    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    runtime.configure_triton()
    assert os.environ["TRITON_DEFAULT_FP_FUSION"] == "0"
    monkeypatch.delenv("TRITON_DEFAULT_FP_FUSION")
    runtime.configure_triton()
    assert os.environ["TRITON_DEFAULT_FP_FUSION"] == runtime.TRITON_FP_FUSION
