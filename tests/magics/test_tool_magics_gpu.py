"""``%ncu`` and ``%sanitize`` end to end on a GPU: a tiny chapter with CUDA variants, one of them with
a planted out-of-bounds access, replayed in the child under the real tools."""

from __future__ import annotations

import pytest
from planted_oob import PLANTED_LINE, write_chapter

pytestmark = pytest.mark.gpu

@pytest.fixture
def chapter(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))  # reports go to tmp_path/results, not the repo
    return write_chapter(tmp_path / "98_explain.ipynb", "98_explain", 2**26)


def test_ncu_profiles_only_the_variant_and_counts_its_bytes(shell, chapter, tmp_path):
    result = shell.run(f"%ncu cuda_ok --chapter {chapter} --shape 2**26")
    names = [k.name for k in result.kernels]
    assert names == ["vecadd_ok"], names  # not randn, not the warm-up
    (k,) = result.kernels
    assert result.nbytes == 12 * 2**26
    # 256 MiB per tensor, far beyond L2: DRAM traffic is the predicted bytes within a few percent.
    assert result.dram_bytes == pytest.approx(result.nbytes, rel=0.05)
    assert k.registers and k.duration_s and k.memory_pct > 50
    assert k.theoretical_occupancy_pct == 100.0
    assert result.report.exists() and result.report.suffix == ".ncu-rep"
    assert result.report.parent == tmp_path / "results" / result.report.parts[-4] / "profiles" / "98_explain"
    assert "DRAM traffic per call" in repr(result)


def test_ncu_of_two_variants_is_one_child_split_at_the_markers(shell, chapter, tmp_path):
    """One report for both, each variant its own kernels: the CUDA kernel for cuda_ok, torch's own for torch,
    neither the marker (spin_kernel) nor the other's."""
    ok, torch_add = shell.run(f"%ncu cuda_ok torch --chapter {chapter} --shape 2**26")
    assert [k.name for k in ok.kernels] == ["vecadd_ok"]
    assert torch_add.kernels and all("vecadd" not in k.name and "spin_kernel" not in k.name
                                     for k in torch_add.kernels)
    assert ok.report == torch_add.report and ok.report.name == "cuda_ok-torch.67108864.ncu-rep"
    for result in (ok, torch_add):
        assert result.nbytes == 12 * 2**26 and result.dram_bytes == pytest.approx(result.nbytes, rel=0.05)
        assert (result.report.parent / f"{result.variant}.67108864.raw.csv").exists()


def test_sanitize_finds_the_planted_out_of_bounds_line(shell, chapter):
    result = shell.run(f"%sanitize cuda_oob --chapter {chapter}")
    assert not result.clean
    device = [f for f in result.findings if f.severity == "error"]
    assert device, result.log[-3000:]
    assert all(f.kernel == "vecadd_oob" for f in device)
    assert {f.line for f in device} == {PLANTED_LINE}
    assert any("Invalid __global__" in f.kind for f in device)
    assert device[0].source_line.startswith("if (i <= n) c[i] = a[i] + b[i];")
    assert f"cell:{PLANTED_LINE}" in repr(result)


def test_sanitize_clean_kernel_reports_clean(shell, chapter):
    result = shell.run(f"%sanitize cuda_ok --chapter {chapter}")
    assert result.clean, repr(result) + result.log[-3000:]
    assert result.errors == 0 and "clean (0 errors)" in repr(result)


def test_racecheck_runs_clean_on_a_kernel_without_shared_memory(shell, chapter):
    result = shell.run(f"%sanitize cuda_ok --tool racecheck --chapter {chapter}")
    assert result.clean, result.log[-3000:]
