"""Chapter 10's quantize kernels, compiled as the notebook writes them (no GPU needed): the claims its prose makes
about their code. On Hopper the e4m3 conversion is one instruction for two codes, the loads are 16-byte vectors and
nothing spills; for Ampere cuda_fp8.h converts in software, so the same kernel compiles to several times the code.
The quantiser fused into RMSNorm reads x and w once and stores only codes and scales.
The FP8 GEMM runs on Hopper's 8-bit wgmma (QGMMA in SASS) without spilling, in both schemes; rung 2's one template is
QGMMA for e4m3 and IGMMA for int8, fed by TMA, without spills in every instantiation the chapter launches."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labmagic.analysis.sass import disassemble
from labmagic.compiler import nvrtc

CHAPTER = Path(__file__).resolve().parents[2] / "book" / "10_fp8.ipynb"


def kernel_cells_with_magic() -> dict[str, tuple[str, str]]:
    """{kernel name: (its %%cuda_kernel magic line, the cell's source below it)} for the chapter's CUDA cells."""
    cells = json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]
    out = {}
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source.startswith("%%cuda_kernel"):
            magic, _, body = source.partition("\n")
            name = re.search(r"__global__ void (?:__cluster_dims__\([\w, ]+\)\s+)?(?:__launch_bounds__\([\d, ]+\)\s+)?"
                             r"(\w+)\(", body).group(1)
            out[name] = (magic, body)
    return out


def kernel_cells() -> dict[str, str]:
    """{kernel name: its %%cuda_kernel cell's source, magic line dropped}."""
    return {name: body for name, (_, body) in kernel_cells_with_magic().items()}


def test_the_chapter_has_its_rungs():
    assert set(kernel_cells()) == {"fp8_quant_tokens", "fp8_quant_groups", "fp8_rmsnorm_quant_tokens", "fp8_wgmma_tma",
                                   "gemm8_ws"}


@pytest.mark.parametrize("kernel", ["fp8_quant_tokens", "fp8_quant_groups"])
def test_on_hopper_two_codes_an_instruction_16_byte_loads_no_spills(kernel):
    result = nvrtc.compile(kernel_cells()[kernel], arch="sm_90a", first_line=2)
    res = result.resources[kernel]
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_frame == 0
    ops = [i.opcode for i in disassemble(result.cubin)[kernel]]
    converts = [op for op in ops if op.startswith("F2FP.SATFINITE.E4M3.F32.PACK_AB")]
    loads = [op for op in ops if op.startswith("LDG.E.128")]
    # 8 codes a 16-byte vector: 4 conversions a vector, fully unrolled over the vectors a thread holds
    assert loads and len(converts) == 4 * len(loads), (len(converts), len(loads))


def test_the_fused_rmsnorm_quantiser_reads_x_once_and_stores_only_codes():
    # VPT = 8 vectors a thread: 8 of x and the 8 of w beside them, 16 bytes each; y packed to bf16 in registers, never
    # stored; 4 conversions (8 codes) and one 8-byte store a vector, and the row's scale
    kernel = "fp8_rmsnorm_quant_tokens"
    result = nvrtc.compile(kernel_cells()[kernel], arch="sm_90a", first_line=2)
    res = result.resources[kernel]
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_frame == 0
    ops = [i.opcode for i in disassemble(result.cubin)[kernel]]
    count = lambda prefix: sum(op.startswith(prefix) for op in ops)  # noqa: E731
    assert count("LDG.E.128") == 16 and count("LDG") == 16, ops
    assert count("F2FP.BF16.F32.PACK_AB") == 32 and count("F2FP.SATFINITE.E4M3.F32.PACK_AB") == 32
    assert count("STG.E.64") == 8 and count("STG") == 9  # the codes, and the scale


def test_for_ampere_the_conversion_is_software_and_the_kernel_several_times_longer():
    source = kernel_cells()["fp8_quant_groups"]
    hopper = disassemble(nvrtc.compile(source, arch="sm_90a", first_line=2).cubin)["fp8_quant_groups"]
    ampere = disassemble(nvrtc.compile(source, arch="sm_80", first_line=2).cubin)["fp8_quant_groups"]
    assert not any(i.opcode.startswith("F2FP") for i in ampere)
    assert len(ampere) > 3 * len(hopper), (len(ampere), len(hopper))


def rung1_names() -> list[str]:
    """Rung 1's instantiations, as the cell before its kernel builds `rung1_flags` (the magic line names them)."""
    cells = json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]
    source = next("".join(c["source"]) for c in cells if "rung1_flags = " in "".join(c["source"]))
    names: dict = {"labmagic": None}
    exec(source.replace("SMS = labmagic.runtime.sm_count()", ""), names)  # the configurations alone
    return re.findall(r"-n '([^']+)'", names["rung1_flags"])


def test_the_fp8_gemm_is_on_8_bit_wgmma_without_spills_in_both_schemes_prefill_and_decode():
    names = rung1_names()
    assert "fp8_wgmma_tma<false, 2, 4, 1>" in names and "fp8_wgmma_tma<true, 1, 4, 8>" in names, names
    result = nvrtc.compile(kernel_cells()["fp8_wgmma_tma"], arch="sm_90a", name_expressions=names, first_line=2)
    assert len(result.resources) == len(names)
    sass = disassemble(result.cubin)
    for symbol, res in result.resources.items():
        assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_frame == 0, symbol
        ops = [i.opcode for i in sass[symbol]]
        assert any(op.startswith("QGMMA") for op in ops) and not any(op.startswith("HGMMA") for op in ops), symbol
        assert any(op.startswith("UTMALDG") for op in ops), symbol


def test_rung_2_is_one_template_on_qgmma_for_e4m3_and_igmma_for_int8():
    magic, body = kernel_cells_with_magic()["gemm8_ws"]
    names = re.findall(r"-n '([^']+)'", magic)
    assert len(names) == 11, names
    result = nvrtc.compile(body, arch="sm_90a", name_expressions=names, first_line=2)
    tma_out = {result.lowered[n] for n in names if "EPI_ROWWISE_TMA" in n}
    assert len(tma_out) == 4, result.lowered
    sass = disassemble(result.cubin)
    assert len(result.resources) == len(names)
    for symbol, res in result.resources.items():
        assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_frame == 0, symbol
        ops = [i.opcode for i in sass[symbol]]
        want, other = ("IGMMA", "QGMMA") if symbol.startswith("_Z8gemm8_wsIi") else ("QGMMA", "IGMMA")
        assert any(op.startswith(want) for op in ops) and not any(op.startswith(other) for op in ops), symbol
        assert any(op.startswith("UTMALDG") for op in ops), symbol
        assert any(op.startswith("USETMAXREG") for op in ops), symbol  # the warpgroups' register split
        # Rung 3 stores y through shared memory and TMA stores, never from registers; the other epilogues the reverse
        stores = {op.split(".")[0] for op in ops} & {"STG", "STS", "UTMASTG"}
        assert stores == ({"STS", "UTMASTG"} if symbol in tma_out else {"STG"}), (symbol, stores)
