"""Spec table, ceilings, source hashes and the timer-agreement script's ncu parser."""

from __future__ import annotations

import json

import pytest
from benchscripts import load_script

from labmagic.benchmark import provenance, roofline


def test_spec_lookup_by_device_name_slug_and_short_target():
    assert roofline.find_spec("NVIDIA H200").bandwidth_gbps == 4800
    assert roofline.find_spec("h200").slug == "nvidia-h200"
    assert roofline.find_spec("NVIDIA H100 80GB HBM3").slug == "nvidia-h100-80gb-hbm3"
    assert roofline.find_spec("h100 pcie").slug == "nvidia-h100-pcie"
    assert roofline.find_spec("NVIDIA GeForce RTX 4090").peak_tflops("bfloat16") == pytest.approx(165.2)
    assert roofline.find_spec("rtx 4090").slug == "nvidia-geforce-rtx-4090"
    assert roofline.find_spec("L4").slug == "nvidia-l4"
    assert roofline.find_spec("voodoo5") is None


def test_every_spec_covers_the_book_dtypes_it_supports():
    for spec in roofline.SPECS.values():
        assert spec.bandwidth_gbps > 100 and spec.l2_bytes > 0
        for key in ("fp32", "fp16", "int8"):
            assert spec.tflops[key] > 0, (spec.slug, key)
        if "bf16" in spec.tflops:  # tensor-core formats are faster than the CUDA-core fp32 rate
            assert spec.tflops["bf16"] > spec.tflops["fp32"]


def test_floor_and_bound():
    roof = roofline.Roof(bandwidth_gbps=4800.0, tflops=67.0, source="spec")
    n = 2**28
    assert roof.memory_bound(n, 12 * n)
    assert roof.floor_ms(n, 12 * n) == pytest.approx(12 * n / 4.8e12 * 1e3)
    big = 8192
    assert not roof.memory_bound(2 * big**3, 3 * 4 * big**2)  # an fp32 GEMM is compute-bound
    assert roof.floor_ms(2 * big**3, 12 * big**2) == pytest.approx(2 * big**3 / 67e12 * 1e3)
    assert roof.pct(roof.floor_ms(n, 12 * n), n, 12 * n) == pytest.approx(100.0)


def test_load_ceilings(tmp_path):
    path = tmp_path / "ceilings.json"
    assert roofline.load_ceilings("nvidia-h200", path) is None
    path.write_text(json.dumps({"copy_gbps": 4100.5, "matmul_tflops": {"bf16": 720.0, "fp32": 51.0}}))
    ceil = roofline.load_ceilings("nvidia-h200", path)
    assert ceil.copy_gbps == 4100.5 and ceil.peak_tflops("bfloat16") == 720.0
    roof = roofline.measured_roof(ceil, "float32")
    assert roof.source == "measured" and roof.tflops == 51.0 and roof.bandwidth_gbps == 4100.5
    # The memory ceiling is the fastest measured pattern (an add beats a copy on HBM).
    path.write_text(json.dumps({"copy_gbps": 4100.5, "peak_gbps": 4300.0, "matmul_tflops": {}}))
    assert roofline.measured_roof(roofline.load_ceilings("x", path), "float32").bandwidth_gbps == 4300.0


def test_faster_than_the_floor_is_flagged_beyond_noise():
    from labmagic.benchmark import Row, judge

    spec = roofline.SPECS["nvidia-h200"]
    n = 2**26
    floor = 12 * n / 4800e9 * 1e3  # the spec sheet's bandwidth
    flags = {}
    for factor in (1.05, 0.99, 0.95):
        row = Row("c", "v", "cuda", str(n), "float32", "ok", ms_median=floor * factor)
        judge(row, n, 12 * n, spec, None)
        flags[factor] = row.below_floor
        assert row.predicted_ms == pytest.approx(floor) and row.sol_pct == pytest.approx(100 / factor)
    assert flags == {1.05: False, 0.99: False, 0.95: True}


#: What `labmagic calibrate` measured on the book's H200: cuBLAS's bf16 matmul is 694.76 TFLOP/s, 70% of the spec.
H200_CEILINGS = roofline.Ceilings(copy_gbps=4292.4, matmul_tflops={"bf16": 694.76}, peak_gbps=4392.8)


def _gemm_at(tflops, sol=None):
    from labmagic.benchmark import Row, judge

    n = 8192
    flops, nbytes = 2 * n**3, 3 * 2 * n * n
    row = Row("06_tensor_core_gemm", "cuda_wgmma", "cuda", f"{n}x{n}x{n}", "bfloat16", "ok",
              ms_median=flops / (tflops * 1e12) * 1e3)
    judge(row, flops, nbytes, roofline.SPECS["nvidia-h200"], H200_CEILINGS, sol)
    return row


def test_a_kernel_ahead_of_cublas_is_a_win_not_below_the_floor():
    """The floor is the spec sheet's: a bf16 GEMM 4% faster than cuBLAS runs at 73% of the H200's 989.4 TFLOP/s."""
    ahead = _gemm_at(1.04 * 694.76)
    assert ahead.ceiling_pct == pytest.approx(104.0) and ahead.sol_pct == pytest.approx(73.03, abs=0.01)
    assert not ahead.below_floor
    assert ahead.predicted_ms == pytest.approx(2 * 8192**3 / 989.4e12 * 1e3)
    assert _gemm_at(1.2 * 989.4).below_floor  # 20% past the spec sheet: a broken timer or a wrong FLOP count


def test_a_race_sol_is_a_target_not_the_floor():
    row = _gemm_at(0.9 * 989.4, sol={"nvidia-h200": 700.0})  # the race aims at 700 TFLOP/s; this row passes it
    assert row.sol_pct == pytest.approx(100 * 0.9 * 989.4 / 700.0)
    assert not row.below_floor and row.predicted_ms == pytest.approx(2 * 8192**3 / 989.4e12 * 1e3)


def test_an_unknown_gpu_has_no_physical_floor():
    from labmagic.benchmark import Row, judge

    row = Row("c", "v", "cuda", "8", "float32", "ok", ms_median=1e-9)
    judge(row, 8, 96, None, H200_CEILINGS)
    assert row.predicted_ms is None and not row.below_floor and row.ceiling_pct is not None


def _helper_v1(x):
    return x + 1


class FakeCudaKernel:
    def __init__(self, source):
        self.__labmagic_source__ = source


def test_source_hash_follows_referenced_kernels_and_helpers():
    g = {"kernel": FakeCudaKernel("__global__ void k() { /* v1 */ }"), "helper": _helper_v1}
    exec("def variant(a, b):\n    kernel(a, b)\n    return helper(a)\n", g)
    h1 = provenance.source_hash(g["variant"])
    assert h1 == provenance.source_hash(g["variant"])  # stable
    g["kernel"] = FakeCudaKernel("__global__ void k() { /* v2 */ }")
    h2 = provenance.source_hash(g["variant"])
    assert h2 != h1  # editing the CUDA source moves the hash
    exec("def helper(x):\n    return x + 2\n", g)
    assert provenance.source_hash(g["variant"]) not in (h1, h2)


def test_source_hash_sees_closures_and_lambdas():
    def make(kernel):
        return lambda a: kernel(a)

    one = provenance.source_hash(make(FakeCudaKernel("A")))
    two = provenance.source_hash(make(FakeCudaKernel("B")))
    assert one != two


NCU_CSV = '''==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "vecadd_f4": 0%....50%....100% - 1 pass
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","vecadd_f4","1","7","(256, 1, 1)","(262144, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","52.67"
"1","4242","python3.12","127.0.0.1","vecadd_f4","1","7","(256, 1, 1)","(262144, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","1.05"
"2","4242","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, T2, T3)","1","7","(128, 1, 1)","(131072, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","54,336"
'''


def test_parse_ncu_csv():
    ta = load_script("timer_agreement")
    launches = ta.parse_ncu_csv(NCU_CSV)
    assert [name.split("(")[0][:9] for name, _ in launches] == ["vecadd_f4", "vecadd_f4", "void at::"]
    assert [us for _, us in launches] == pytest.approx([52.67, 1050.0, 54.336])
    assert ta.parse_ncu_csv("==PROF== No kernels were profiled.\n") == []
    with pytest.raises(ValueError, match="unit"):
        ta.parse_ncu_csv(NCU_CSV.replace('"usecond"', '"furlong"'))


def test_timer_agreement_dry_run_builds_the_plan(capsys):
    ta = load_script("timer_agreement")
    assert ta.main(["--dry-run", "--sizes", "24,28"]) == 0
    out = capsys.readouterr().out
    assert "4 cases" in out
    assert out.count("--clock-control none --profile-from-start off") == 4
    assert "--child cuda_float4 28" in out


@pytest.mark.skipif(__import__("labmagic").has_gpu(), reason="the no-GPU answer of calibrate")
def test_calibrate_without_a_gpu_says_so():
    import argparse

    import labmagic
    from labmagic.cli import calibrate as ceilings

    parser = argparse.ArgumentParser()
    ceilings.add_arguments(parser)
    with pytest.raises(labmagic.NoGPUError, match="has none"):
        ceilings.run(parser.parse_args([]))


def test_sol_keyed_by_a_piece_of_the_gpu_name():
    sol = {"H200": 900.0, "H100": 800.0, "A100": 300.0}
    spec = roofline.SPECS
    gemm = dict(flops=2 * 8192**3, nbytes=3 * 2 * 8192**2)  # compute-bound: sol is TFLOP/s
    assert roofline.spec_roof(spec["nvidia-h200"], "bf16", sol, **gemm).tflops == 900.0
    assert roofline.spec_roof(roofline.find_spec("NVIDIA H100 80GB HBM3"), "bf16", sol, **gemm).tflops == 800.0
    assert roofline.spec_roof(spec["nvidia-h100-pcie"], "bf16", sol, **gemm).tflops == 800.0
    assert roofline.spec_roof(spec["nvidia-a100-80gb-pcie"], "bf16", {"a100": 300.0}, **gemm).tflops == 300.0
    # No key matches: the spec's own peak, as for a slug that is absent.
    roof = roofline.spec_roof(spec["nvidia-l40s"], "bf16", sol, **gemm)
    assert roof.tflops == 362.0 and roof.source == "spec"
    # Whole words: "L4" is the L4, not the L40S.
    assert roofline.sol_for(spec["nvidia-l40s"], {"L4": 1.0}) is None
    assert roofline.sol_for(spec["nvidia-l4"], {"L4": 1.0}) == 1.0
    # The longest matching key wins, whatever the order; an exact slug wins over everything.
    assert roofline.sol_for(spec["nvidia-h100-pcie"], {"H100 PCIe": 756.0, "H100": 989.0}) == 756.0
    assert roofline.sol_for(spec["nvidia-h100-pcie"], {"H100": 989.0, "h100-pcie": 756.0}) == 756.0
    assert roofline.sol_for(spec["nvidia-h100-80gb-hbm3"], {"H100 PCIe": 756.0, "H100": 989.0}) == 989.0
    assert roofline.sol_for(spec["nvidia-h200"], {"nvidia-h200": 1.0, "NVIDIA H200 SXM": 2.0}) == 1.0
    # A memory-bound race states GB/s.
    copy = dict(flops=None, nbytes=2 * 4 * 2**28)
    assert roofline.spec_roof(spec["nvidia-h200"], "fp32", {"h200": 4000.0}, **copy).bandwidth_gbps == 4000.0
    assert roofline.spec_roof(None, "fp32", {"h200": 4000.0}, **copy) is None


@pytest.mark.parametrize("dtype", ["int8", "fp8"])
def test_calibrate_feeds_integer_and_fp8_gemms_k_major_operands(dtype):
    """cuBLASLt's int8 and fp8 tensor-core kernels take A row-major and B column-major (both K-major); a row-major
    B sent torch._int_mm to a slow kernel and the int8 ceiling read 128.7 TOP/s on an H200."""
    torch = pytest.importorskip("torch")
    from labmagic.benchmark.ceilings import matmul_call

    if dtype == "fp8" and not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    _, (a, b) = matmul_call(dtype, 64, dev="cpu")
    assert a.stride() == (64, 1), "A must be row-major (K contiguous)"
    assert b.stride() == (1, 64), "B must be column-major (K contiguous)"


def test_a_row_ahead_of_cublas_says_so_in_the_race_table():
    from labmagic.benchmark.race import BenchResult

    row = _gemm_at(1.04 * 694.76)
    result = BenchResult("06_tensor_core_gemm", [row], True, "NVIDIA H200", roofline.SPECS["nvidia-h200"],
                         H200_CEILINGS)
    line = next(line for line in repr(result).splitlines() if line.startswith("cuda_wgmma "))
    assert "ahead of cuBLAS" in line and "!" not in line and "104" in line
    assert "ahead of cuBLAS" in result._repr_html_()
    level = _gemm_at(1.005 * 694.76)  # cuBLAS itself, on another run: within the ceiling's noise
    result.rows = [level]
    assert "ahead of" not in repr(result)


def test_labmagic_bench_tables_say_so_too_and_a_gpu_never_calibrated_still_renders():
    """``labmagic bench``'s Markdown reads the ceilings from the result its rows came from: a measured result with no
    ``results/<gpu>/ceilings.json`` (a fresh checkout) is a table without the 'ahead of' note, not an AttributeError
    in the child (as on the H200, in a scratch checkout)."""
    from labmagic.benchmark import Row, judge
    from labmagic.benchmark.race import BenchResult
    from labmagic.display.race_table import render_markdown

    spec = roofline.SPECS["nvidia-h200"]
    ahead = BenchResult("06_tensor_core_gemm", [_gemm_at(1.04 * 694.76)], True, "NVIDIA H200", spec, H200_CEILINGS)
    line = next(line for line in render_markdown(ahead, "cublas").splitlines() if line.startswith("| cuda_wgmma |"))
    assert "ahead of cuBLAS" in line
    n = 8192
    row = Row("06_tensor_core_gemm", "cuda_wgmma", "cuda", f"{n}x{n}x{n}", "bfloat16", "ok", ms_median=1.6)
    judge(row, 2 * n**3, 6 * n * n, spec, None)
    uncalibrated = render_markdown(BenchResult("06_tensor_core_gemm", [row], True, "NVIDIA H200", spec, None), "cublas")
    assert "no measured ceilings (labmagic calibrate)" in uncalibrated
    assert "| cuda_wgmma | 1.6 |" in uncalibrated and "ahead of" not in uncalibrated
