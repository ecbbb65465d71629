"""The compile panel on real NVRTC output: resources, occupancy, mix, spills, and the diff."""

from __future__ import annotations

import html
import re

from labmagic.analysis.panel import build_panel
from labmagic.compiler import nvrtc

NAIVE = """\
extern "C" __global__ void copy(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i];
}
"""

VECTOR = """\
extern "C" __global__ void copy(const float4* a, float4* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i];
}
"""

# 48 values live across a fully unrolled loop, squeezed into 32 registers by __launch_bounds__(1024, 2)
# (65536 / 2048 threads): ptxas must spill to local memory.
HEAVY = """\
extern "C" __global__ void BOUNDS heavy(const float* a, float* out, int n) {
  float v[48];
  #pragma unroll
  for (int k = 0; k < 48; ++k) v[k] = a[threadIdx.x + k * n];
  float s = 0;
  #pragma unroll
  for (int r = 0; r < 4; ++r)
    #pragma unroll
    for (int k = 0; k < 48; ++k) s = s * v[k] + v[(k + r) % 48];
  out[threadIdx.x] = s;
}
"""

TWO = """\
template <int TILE> __global__ void tiled(float* out, const float* in) {
  __shared__ float tile[TILE];
  tile[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = tile[TILE - 1 - threadIdx.x];
}
extern "C" __global__ void plain(float* out, const float* in) { out[threadIdx.x] = in[threadIdx.x]; }
"""


def _compile(src, **kw):
    return nvrtc.compile(src, arch=kw.pop("arch", "sm_90"), first_line=2, use_cache=False, **kw)


def test_diff_shows_the_vectorised_rung():
    before, after = _compile(NAIVE), _compile(VECTOR)
    panel = build_panel(after, block_size=256, previous=before)
    (kernel,) = panel.kernels
    d = kernel.diff
    assert d is not None and d.before == "copy"
    assert (d.row("LDG.32").before, d.row("LDG.32").after) == (1, 0)
    assert (d.row("LDG.128").before, d.row("LDG.128").after) == (0, 1)
    assert d.row("STG.128").delta == "+1"
    text = repr(panel)
    assert "diff vs copy" in text and "LDG.128" in text
    assert "LDG 1 (1x128-bit)" in text
    html = panel._repr_html_()
    assert "labmagic-diff" in html and "LDG.128" in html


def test_spills_show_as_local_memory_and_the_occupancy_trade():
    spilling = _compile(HEAVY.replace("BOUNDS", "__launch_bounds__(1024, 2)"))
    free = _compile(HEAVY.replace("BOUNDS", ""))
    panel = build_panel(spilling, previous=free, show_sass=False)
    k = panel["heavy"]
    assert k.resources.spill_stores > 0 and k.registers <= 32
    assert k.mix["STL"] > 0 and k.mix["LDL"] > 0
    assert k.local_memory_lines  # the cell lines where spills happen
    assert k.block_size == 1024 and k.block_size_from == "__launch_bounds__"
    # 32 registers at 1024 threads: 1024 per warp -> 64 warps: 100%. The unbounded compile uses more
    # registers, so at 1024 threads it reaches at most 50%: the diff shows what the spills bought.
    assert k.occupancy.percent == 100.0
    occ_row = k.diff.row("occupancy @1024 (%)")
    assert occ_row.before <= 50.0 and occ_row.after == 100.0
    assert k.diff.row("spill stores (B)").before == 0 and k.diff.row("spill stores (B)").after > 0
    text = repr(panel)
    assert "<< SPILLS" in text and "local memory (LDL/STL) at cell lines" in text
    assert "SASS (cell lines" not in text  # show_sass=False


def test_panel_per_kernel_in_source_order_with_templates():
    result = _compile(TWO, name_expressions=["tiled<128>"])
    panel = build_panel(result, block_size=128)
    assert [k.name for k in panel.kernels] == ["tiled<128>", "plain"]
    tiled = panel["tiled<128>"]
    assert tiled.symbol.startswith("_Z") and tiled.smem_static == 512
    assert tiled.mix["BAR"] == 1 and tiled.mix["STS"] == 1
    assert tiled.occupancy.block_size == 128 and tiled.block_size_from == "given"
    text = repr(panel)
    # Interleaved source lines: the barrier sits under the line that wrote it (cell line 5).
    sass_part = text.split("== plain")[0]
    assert "// cell:5: __syncthreads();" in sass_part
    assert sass_part.index("// cell:5: __syncthreads();") < sass_part.index("BAR.SYNC")


def test_vs_names_another_kernel():
    result = _compile(TWO, name_expressions=["tiled<128>"])
    naive = _compile(NAIVE)
    panel = build_panel(result, previous=naive, vs="copy")
    assert all(k.diff is not None and k.diff.before == "copy" for k in panel.kernels)
    # Pairing by symbol: a previous compile with the same kernels pairs each with itself -> no change.
    same = build_panel(result, previous=result)
    assert all(k.diff.changed == [] for k in same.kernels)
    assert "no change" in repr(same)


def test_assumed_block_size_and_ptx():
    panel = build_panel(_compile(NAIVE), show_ptx=True)
    k = panel["copy"]
    assert k.block_size == 256 and k.block_size_from == "assumed"
    assert "block size assumed" in repr(panel)
    assert ".entry copy(" in repr(panel)
    assert "<details><summary>PTX" in panel._repr_html_()


def test_occupancy_follows_registers_at_the_launch_block_size():
    from labmagic.occupancy import occupancy

    free = _compile(HEAVY.replace("BOUNDS", ""))
    k = build_panel(free, block_size=1024)["heavy"]
    assert k.registers > 32  # unbounded, it keeps its 48 values in registers
    assert k.occupancy == occupancy("sm_90", 1024, k.registers, 0)
    assert k.occupancy.percent <= 50.0 and k.occupancy.limiter == "registers"
    assert "limited by registers" in repr(build_panel(free, block_size=1024))


def test_cuda_kernel_magic_shows_the_panel_and_the_diff(shell, capsys):
    # Through the real %%cuda_kernel magic: --panel after a first compile, --vs names the earlier kernel.
    shell.cell_magic("cuda_kernel", "--panel --block 128", NAIVE.replace("copy", "copy_naive"))
    first = capsys.readouterr().out
    assert "== copy_naive [" in first and "(16 blocks x 128 threads" in first and "diff vs" not in first
    shell.cell_magic("cuda_kernel", "--panel --vs copy_naive", VECTOR.replace("copy", "copy_vec"))
    second = capsys.readouterr().out
    assert "diff vs copy_naive" in second and "LDG.128" in second
    assert "SASS (cell lines" not in second  # --sass not given


def test_panel_without_a_disassembler_still_shows_resources_and_occupancy(monkeypatch):
    from labmagic.analysis import sass
    from labmagic.errors import ToolMissingError

    def missing(cubin):
        raise ToolMissingError("nvdisasm not found: pip install nvidia-cuda-nvdisasm")

    monkeypatch.setattr(sass, "disassemble", missing)
    panel = build_panel(_compile(NAIVE), block_size=256)
    k = panel["copy"]
    assert k.instructions == [] and k.occupancy.percent == 100.0 and k.registers > 0
    assert "no SASS: nvdisasm not found" in repr(panel)


def test_panel_html_reads_apart_and_its_tables_sit_left():
    panel = build_panel(_compile(VECTOR), block_size=256, previous=_compile(NAIVE))
    page = panel._repr_html_()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    k = panel["copy"]
    # The tags stripped, the name, the arch and the resources stay apart (not 'copysm_90regs 12').
    assert re.search(rf"copy\s+\[sm_90\]\s+regs {k.resources.registers} \| smem", text), text
    tables = re.findall(r"<table[^>]*>", page)
    assert len(tables) == 2  # the instruction mix and the diff
    for tag in tables:
        flat = tag.replace(" ", "").lower()
        assert "margin:auto" not in flat and "margin-left:auto" not in flat and "align=" not in flat
        assert "text-align:left" in flat and "margin-left:0" in flat


NOINLINE_HEADER = """\
#pragma once
__device__ __forceinline__ float square(float v) { return v * v; }
__device__ __noinline__ float squares(float v) {
  return square(v) + square(v + 1.0f);
}
"""
USES_HEADER = '#include <lab/squares.cuh>\nextern "C" __global__ void k(float* x) { x[0] = squares(x[0]); }\n'


def test_code_from_a_book_header_is_labelled_by_its_name_and_line(tmp_path, monkeypatch):
    (tmp_path / "include" / "lab").mkdir(parents=True)
    (tmp_path / "include" / "lab" / "squares.cuh").write_text(NOINLINE_HEADER)
    monkeypatch.setenv("LABMAGIC_INCLUDE_DIR", str(tmp_path / "include"))
    (kernel,) = build_panel(_compile(USES_HEADER), block_size=32).kernels
    assert "// lab/squares.cuh:4: return square(v) + square(v + 1.0f);" in kernel.sass_text
    assert "// cell:3: extern" in kernel.sass_text and "#include" not in kernel.sass_text


def test_code_from_a_header_outside_the_book_shows_where_but_not_its_lines(tmp_path):
    (tmp_path / "own" / "lab").mkdir(parents=True)
    (tmp_path / "own" / "lab" / "squares.cuh").write_text(NOINLINE_HEADER)
    (kernel,) = build_panel(_compile(USES_HEADER, options=(f"-I{tmp_path / 'own'}",)), block_size=32).kernels
    assert re.search(r"// lab/squares.cuh:4\n", kernel.sass_text)
    assert "square(v + 1.0f)" not in kernel.sass_text
