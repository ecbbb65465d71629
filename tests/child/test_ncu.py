"""Parsing Nsight Compute's CSV pages and errors, on literal samples of ncu's output formats."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from labmagic.child import ncu_report as ncu
from labmagic.child import ncu_run as profile
from labmagic.child import protocol
from labmagic.errors import LabError, NoGPUError, ToolMissingError

# ``ncu --import r.ncu-rep --csv --page raw --print-units base``: header, units, one row per launch.
# Two launches of the float4 vector add on an H200 at n = 2**28 (values trimmed to the metrics used;
# thousands separators as ncu prints them; an unsupported metric as n/a).
RAW = '''\
==PROF== Connected to process 41327 (/usr/bin/python3.11)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","dram__throughput.avg.pct_of_peak_sustained_elapsed","l1tex__t_sector_hit_rate.pct","lts__t_sector_hit_rate.pct","sm__warps_active.avg.pct_of_peak_sustained_active","sm__maximum_warps_per_active_cycle_pct","launch__occupancy_limit_blocks","launch__occupancy_limit_registers","launch__occupancy_limit_shared_mem","launch__occupancy_limit_warps","launch__registers_per_thread","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio","smsp__average_warps_issue_stalled_selected_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum","smsp__sass_inst_executed_op_global_ld.sum","smsp__sass_inst_executed_op_global_st.sum","l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum","smsp__sass_thread_inst_executed_op_ffma_pred_on.sum","sm__inst_executed_pipe_tensor_op_hmma.sum","smsp__pcsamp_warps_issue_stalled_long_scoreboard"
"","","","","","","","","","","","byte","byte","nsecond","%","%","%","%","%","%","%","block","block","block","block","register/thread","","","","","","","","inst","inst","byte","inst","inst",""
"0","41327","python3.11","127.0.0.1","vecadd_float4","1","7","(256, 1, 1)","(262144, 1, 1)","0","9.0","2,147,745,792","1,073,872,896","774,592","11.62","92.71","92.71","0","33.34","86.59","100","32","8","32","8","22","14.31","1.02","0.31","0","0.88","0","0","4,194,304","2,097,152","2,147,483,648","0","0","10,592"
"1","41327","python3.11","127.0.0.1","vecadd_float4","1","7","(256, 1, 1)","(262144, 1, 1)","0","9.0","2,147,614,720","1,073,790,976","772,064","11.66","92.99","92.99","0","33.33","86.91","100","32","8","32","8","22","14.40","1.00","0.31","0","0.87","n/a","0","4,194,304","2,097,152","2,147,483,648","0","0","10,601"
'''

# ``--page details``: one row per metric, display names, units per row, rule columns after.
DETAILS = '''\
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","us","1,932.13","","","","",""
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","GPU Speed Of Light Throughput","Compute (SM) Throughput","%","71.20","","","","",""
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","GPU Speed Of Light Throughput","Memory Throughput","%","88.05","","","","",""
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","Launch Statistics","Registers Per Thread","register/thread","40","","","","",""
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","Occupancy","Block Limit Registers","block","6","","","","",""
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","Occupancy","Block Limit Shared Mem","block","9","","","","",""
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","Occupancy","Block Limit Warps","block","8","","","","",""
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","Occupancy","Theoretical Occupancy","%","75","","","","",""
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","Occupancy","Achieved Occupancy","%","71.83","","","","",""
"0","4312","python3.11","127.0.0.1","sgemm_tiled","1","7","(16, 16, 1)","(256, 256, 1)","0","9.0","Memory Workload Analysis","L2 Hit Rate","%","91.12","","","","",""
'''

PERMISSION = """\
==PROF== Connected to process 2817 (/usr/bin/python3.11)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0. For instructions on enabling permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM
==PROF== Disconnected from process 2817
==WARNING== No kernels were profiled.
"""


def test_raw_page_per_kernel_in_base_units():
    k0, k1 = ncu.parse_raw_csv(RAW)
    assert (k0.id, k0.name, k0.block, k0.grid) == (0, "vecadd_float4", "(256, 1, 1)", "(262144, 1, 1)")
    assert k0.duration_s == pytest.approx(774.592e-6)
    assert k0.dram_read == 2_147_745_792 and k0.dram_write == 1_073_872_896
    assert k0.memory_pct == pytest.approx(92.71) and k0.sm_pct == pytest.approx(11.62)
    assert k0.l2_hit_pct == pytest.approx(33.34) and k0.l1_hit_pct == 0
    assert k0.achieved_occupancy_pct == pytest.approx(86.59) and k0.theoretical_occupancy_pct == 100
    assert k0.registers == 22
    # Blocks allowed: blocks 32, registers 8, smem 32, warps 8 -> registers and warps tie.
    assert k0.occupancy_limiter == "registers+warps"
    # Stalls: long_scoreboard first; "selected" is issuing, not stalling; zeros dropped.
    assert [r for r, _ in k0.stalls()] == ["long_scoreboard", "lg_throttle", "wait"]
    assert k0.bank_conflicts == 0
    assert k1.metrics["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] is None  # n/a
    mix = k0.instruction_mix()
    # 2**28 floats, 4 per thread: 2**26 threads = 2**21 warps, each issuing one LDG.128 per input.
    assert mix["global ld"] == 2 * 2**21
    # 2 GiB loaded by 2**22 load instructions: 512 B per warp instruction = 16 B per thread = 128-bit.
    assert mix["global ld bytes/thread"] == 16.0
    assert "FFMA (threads)" not in mix and "tensor core" not in mix


def test_dram_share_of_peak_from_an_h200_raw_page():
    # The raw page ncu wrote on the H200 for cuBLAS in chapter 02 has no dram__throughput; the SOL
    # section's "DRAM Throughput" is gpu__dram_throughput there (the summary used to print "DRAM - of peak").
    raw = Path(__file__).resolve().parents[2] / "results/nvidia-h200/profiles/02_sgemm/torch.raw.csv"
    (k,) = ncu.parse_raw_csv(raw.read_text())
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" not in k.metrics
    assert k.dram_pct == pytest.approx(3.08)
    assert k.dram_read == 342_116_352 and k.duration_s == pytest.approx(2.680768e-3)


def test_profile_result_compares_dram_bytes_with_prediction():
    kernels = ncu.parse_raw_csv(RAW)
    # 2 calls profiled; predicted 3 * 4 * 2**28 bytes per call.
    result = profile.ProfileResult(chapter="01_vector_add", variant="cuda_float4", shape="268435456",
                                   report=Path("results/nvidia-h200/profiles/01_vector_add/cuda_float4.ncu-rep"),
                                   kernels=kernels, iters=2, nbytes=3 * 4 * 2**28)
    measured = (2_147_745_792 + 1_073_872_896 + 2_147_614_720 + 1_073_790_976) / 2
    assert result.dram_bytes == pytest.approx(measured)
    assert result.duration_s == pytest.approx((774_592 + 772_064) / 2 * 1e-9)
    text = repr(result)
    assert "measured vs 3.221 GB predicted (+0.0%)" in text
    assert "limiter: registers+warps" in text and "long_scoreboard 14.31" in text
    assert "global ld bytes/thread 16" in text
    html = result._repr_html_()
    assert "<table>" in html and "vecadd_float4" in html


def test_details_page():
    (k,) = ncu.parse_details_csv(DETAILS)
    assert k.name == "sgemm_tiled" and k.grid == "(256, 256, 1)"
    assert k.duration_s == pytest.approx(1932.13e-6)
    assert k.sm_pct == pytest.approx(71.2) and k.memory_pct == pytest.approx(88.05)
    assert k.registers == 40 and k.theoretical_occupancy_pct == 75 and k.achieved_occupancy_pct == pytest.approx(71.83)
    assert k.occupancy_limiter == "registers"  # 6 blocks, fewer than smem (9) and warps (8)
    assert k.l2_hit_pct == pytest.approx(91.12)


def test_numbers_and_units():
    assert ncu.to_number("1,932.13", "usecond") == pytest.approx(1.93213e-3)
    assert ncu.to_number("3.5", "Gbyte") == 3.5e9  # ncu's multiples are decimal
    assert ncu.to_number("n/a") is None and ncu.to_number("") is None
    assert ncu.to_number("42", "%") == 42


def test_diagnose_permission_and_empty_runs():
    fix = ncu.diagnose(PERMISSION)
    assert "ERR_NVGPUCTRPERM" in fix and "NVreg_RestrictProfilingToAdminUsers=0" in fix
    assert "profiled no kernel" in ncu.diagnose("==WARNING== No kernels were profiled.\n")
    assert ncu.diagnose("==PROF== Disconnected from process 1\n") is None


def test_ncu_command_profiles_only_the_range():
    cmd = profile.ncu_command("ncu", Path("out/v"), ["python", "-m", "labmagic.child"])
    assert cmd[:9] == ["ncu", "--set", "full", "--clock-control", "none", "--profile-from-start", "off",
                       "--target-processes", "all"]
    assert cmd[cmd.index("-o") + 1] == "out/v" and cmd[-3:] == ["python", "-m", "labmagic.child"]


def test_child_record_is_the_last_marker_line():
    out = 'noise\nLABMAGIC-CHILD {"ok": false}\n==PROF== x\nLABMAGIC-CHILD {"ok": true, "nbytes": 12.0}\n'
    assert protocol.child_record(out) == {"ok": True, "nbytes": 12.0}
    assert protocol.child_record("died\n") == {}


def test_no_gpu_is_one_clear_error(monkeypatch):
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: False)
    with pytest.raises(NoGPUError, match="needs a CUDA GPU"):
        profile.profile_variant("01", "cuda_float4")


def test_ncu_missing(monkeypatch):
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    monkeypatch.delenv("LABMAGIC_NCU", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    monkeypatch.setattr(profile.Path, "glob", lambda self, pattern: iter(()))
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(ToolMissingError, match="ncu not found"):
        profile.profile_variant("01", "cuda_float4")


def test_permission_error_surfaces_the_fix(monkeypatch, tmp_path):
    # An ncu that fails the way a locked-down driver makes the real one fail (literal output above).
    fake = tmp_path / "ncu"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{PERMISSION}EOF\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    monkeypatch.setenv("LABMAGIC_NCU", str(fake))
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    with pytest.raises(profile.ProfilerError, match="NVreg_RestrictProfilingToAdminUsers"):
        profile.profile_variant(str(tmp_path / "missing.ipynb"), "v", slug="test-gpu")
    assert os.path.isdir(tmp_path / "results" / "test-gpu" / "profiles")


def test_child_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cmd = protocol.child_command("book/01_x.ipynb", "v", "31 17 29", "ncu", 3, {"size": "'quick'"})
    assert cmd[cmd.index("--chapter") + 1] == str(tmp_path / "book" / "01_x.ipynb")
    assert cmd[cmd.index("--shape") + 1:cmd.index("--shape") + 4] == ["31", "17", "29"]
    assert cmd[-2:] == ["-p", "size='quick'"] and cmd[cmd.index("--iters") + 1] == "3"


def test_summary_csv_rows():
    rows = ncu.summary_rows(ncu.parse_raw_csv(RAW))
    assert len(rows) == 2 and rows[0]["kernel"] == "vecadd_float4"
    assert rows[0]["dram_read_bytes"] == 2_147_745_792 and rows[0]["occupancy_limiter"] == "registers+warps"
    assert rows[0]["top_stalls"].startswith("long_scoreboard=14.3")


def _marked_raw_page(names: list[str]) -> str:
    """:data:`RAW`'s header and units with one row per kernel name, IDs in launch order (a marker is PyTorch's
    ``spin_kernel``, what ``torch.cuda._sleep`` launches)."""
    lines = RAW.splitlines()
    row = lines[3].split('","')
    rows = ['","'.join([f'"{i}', *row[1:4], name, *row[5:]]) for i, name in enumerate(names)]
    return "\n".join(lines[:3] + rows) + "\n"


def _scripted_ncu(tmp_path, page: str):
    """An ncu (the real one needs a GPU) that runs its child and writes the report; on --import it prints ``page``.
    The child, without a GPU, launches no marker; the script rewrites its record to the 2 markers that a GPU run
    launches around a job's one call (none for a job that made no call), so the parent splits ``page`` as it would
    split a real report."""
    raw = tmp_path / "raw.csv"
    raw.write_text(page)
    runs, imports = tmp_path / "runs.txt", tmp_path / "imports.txt"
    fake = tmp_path / "ncu"
    fake.write_text(f"""#!/bin/sh
if [ "$1" = "--import" ]; then echo "$@" >> {imports}; cat {raw}; exit 0; fi
echo "$@" >> {runs}
while [ "$1" != "-o" ]; do shift; done
shift; out="$1"; shift
"$@" | sed 's/"markers": 0, "calls": 1,/"markers": 2, "calls": 1,/g'
touch "$out.ncu-rep"
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return fake, runs, imports


def test_profile_variant_wiring_with_a_scripted_ncu(tmp_path, monkeypatch):
    """The whole path on CPU: ncu (scripted: the real one needs a GPU) runs the child, which replays
    the chapter and reports the predicted bytes; the report is read back with --import."""
    import json

    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": s} for s in (
        "%load_ext labmagic\nimport torch, labmagic.benchmark",
        "race = labmagic.benchmark.Race(chapter='96_neg', variants={'torch': torch.neg}, ref='torch',\n"
        "    make_inputs=lambda n: (torch.ones(n),), shapes=[(16,), (64,)], nbytes=lambda n: 8 * n)",
        "%bench race")]
    nb = tmp_path / "96_neg.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    fake, args_file, imports = _scripted_ncu(tmp_path, RAW)
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    monkeypatch.setenv("LABMAGIC_NCU", str(fake))
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    result = profile.profile_variant(str(nb), "torch", slug="test-gpu", iters=2)
    assert "--profile-from-start off" in args_file.read_text()
    folder = tmp_path / "results" / "test-gpu" / "profiles" / "96_neg"
    # Named for the shape the child ran: the race's largest, which only the chapter knew.
    assert result.report == folder / "torch.64.ncu-rep"
    assert result.chapter == "96_neg" and result.shape == "64" and result.nbytes == 8 * 64
    assert [k.name for k in result.kernels] == ["vecadd_float4", "vecadd_float4"]
    assert (folder / "torch.64.csv").read_text().startswith("kernel,grid,block,duration_s")
    # The whole raw page too, as ncu printed it in display units: the summary reads base units.
    assert (folder / "torch.64.raw.csv").read_text() == RAW
    assert [line.endswith("--print-units base") for line in imports.read_text().splitlines()] == [True, False]
    # A second shape, in the race named, is a second report: the first one stays.
    second = profile.profile_variant(str(nb), "torch", "2**4", slug="test-gpu", iters=2, race="race")
    assert second.report == folder / "torch.race.16.ncu-rep" and second.shape == "16"
    assert sorted(p.name for p in folder.iterdir()) == [
        "torch.64.csv", "torch.64.ncu-rep", "torch.64.raw.csv",
        "torch.race.16.csv", "torch.race.16.ncu-rep", "torch.race.16.raw.csv"]


def _two_variant_chapter(tmp_path) -> Path:
    import json

    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": s} for s in (
        "%load_ext labmagic\nimport torch, labmagic.benchmark",
        "def broken(x):\n    raise RuntimeError('planted failure')\n\n"
        "race = labmagic.benchmark.Race(chapter='95_pair', variants={'torch': torch.neg, 'twice': lambda x: -x - 0,\n"
        "    'broken': broken}, ref='torch', make_inputs=lambda n: (torch.ones(n),), shapes=[(16,), (64,)],\n"
        "    nbytes=lambda n: 8 * n)",
        "%bench race")]
    nb = tmp_path / "95_pair.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return nb


def test_several_variants_are_profiled_in_one_child_and_split_at_the_markers(tmp_path, monkeypatch):
    """%ncu a b: one ncu run (the chapter replayed once), one report for both, and each variant its own summary
    and raw page: the kernels between its two markers, none of the other's and no marker."""
    nb = _two_variant_chapter(tmp_path)
    page = _marked_raw_page(["spin_kernel", "neg_kernel", "spin_kernel", "spin_kernel", "neg_kernel", "sub_kernel",
                             "spin_kernel"])
    fake, runs, imports = _scripted_ncu(tmp_path, page)
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    monkeypatch.setenv("LABMAGIC_NCU", str(fake))
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    first, second = profile.profile_variants(str(nb), ["torch", "twice"], slug="test-gpu")
    (run,) = runs.read_text().splitlines()  # one child for both
    assert "--mode nsight-time --iters 1 --jobs" in run and "--profile-from-start off" in run
    folder = tmp_path / "results" / "test-gpu" / "profiles" / "95_pair"
    assert first.report == second.report == folder / "torch-twice.64.ncu-rep"  # the race's largest
    assert (first.variant, first.shape, first.nbytes) == ("torch", "64", 8 * 64)
    assert [k.name for k in first.kernels] == ["neg_kernel"]
    assert [k.name for k in second.kernels] == ["neg_kernel", "sub_kernel"] and second.shape == "64"
    assert sorted(p.name for p in folder.iterdir()) == [
        "torch-twice.64.ncu-rep", "torch.64.csv", "torch.64.raw.csv", "twice.64.csv", "twice.64.raw.csv"]
    twice = ncu.parse_raw_csv((folder / "twice.64.raw.csv").read_text())
    assert [(k.id, k.name) for k in twice] == [(4, "neg_kernel"), (5, "sub_kernel")]
    assert (folder / "torch.64.csv").read_text().count("\n") == 2  # header and its one kernel
    assert len(imports.read_text().splitlines()) == 2  # the report read once in base units, once as displayed


def test_a_variant_the_child_could_not_run_is_named_and_the_others_are_kept(tmp_path, monkeypatch):
    nb = _two_variant_chapter(tmp_path)
    # broken raised in its warm-up, before any marker: the report has torch's two markers only.
    fake, *_ = _scripted_ncu(tmp_path, _marked_raw_page(["spin_kernel", "neg_kernel", "spin_kernel"]))
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    monkeypatch.setenv("LABMAGIC_NCU", str(fake))
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    with pytest.raises(profile.ProfilerError, match="no kernels of broken: RuntimeError: planted failure") as caught:
        profile.profile_variants(str(nb), ["torch", "broken"], "16", slug="test-gpu")
    (kept,) = caught.value.results
    assert (kept.variant, kept.shape, [k.name for k in kept.kernels]) == ("torch", "16", ["neg_kernel"])
    assert kept.report.name == "torch-broken.16.ncu-rep" and kept.report.exists()


def test_a_report_whose_markers_differ_from_the_childs_is_refused_not_guessed(tmp_path, monkeypatch):
    nb = _two_variant_chapter(tmp_path)
    # Two jobs ran a call each (4 markers) but the report holds 3: no kernel is handed to a variant by guess.
    fake, *_ = _scripted_ncu(tmp_path, _marked_raw_page(["spin_kernel", "neg_kernel", "spin_kernel", "spin_kernel"]))
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    monkeypatch.setenv("LABMAGIC_NCU", str(fake))
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    with pytest.raises(profile.ProfilerError, match="3 marker kernels .* where the child launched 4"):
        profile.profile_variants(str(nb), ["torch", "twice"], "2**4", slug="test-gpu")


def test_a_shared_report_name_stays_short():
    assert profile.report_stem(["cuda_naive", "cuda_vec"]) == "cuda_naive-cuda_vec"
    many = [f"cuda_variant_with_a_long_name_{i}" for i in range(8)]
    stem = profile.report_stem(many)
    assert stem.startswith("cuda_variant_with_a_long_name_0-and-7-more-") and len(stem) < 60
    assert stem != profile.report_stem(many[:7] + ["other"])


@pytest.mark.parametrize("variants, said", [(["torch", "torch"], "named twice"), (["torch", "../x"], "variant name")])
def test_several_variants_refuse_bad_names_before_any_child(variants, said):
    with pytest.raises(LabError, match=said):
        profile.profile_variants("01", variants)


@pytest.mark.parametrize("chapter, variant, race, shape", [
    ("..", "v", None, None), ("01_vector_add", "../x", None, None), ("/tmp/x", "v", None, None),
    ("01_vector_add", "v", "../r", None), ("01_vector_add", "v", "r", "4096/../x"), ("01_vector_add", "v", None, "..")])
def test_a_report_path_stays_under_results(chapter, variant, race, shape):
    with pytest.raises(LabError, match="is not a (chapter|variant|shape) name|is not a Python name"):
        profile.report_path(chapter, variant, "test-gpu", race=race, shape=shape)


def test_a_report_is_named_by_variant_race_and_shape():
    base = profile.report_path("03_online_softmax", "cuda_smem", "test-gpu")
    assert base.name == "cuda_smem"
    named = profile.report_path("03_online_softmax", "cuda_smem", "test-gpu", race="race_fp32", shape="1024x262144")
    assert named == base.with_name("cuda_smem.race_fp32.1024x262144")
    # The variant's own dots are not a suffix: only ".ncu-rep" gives way to ".raw.csv".
    report = named.with_name(named.name + ".ncu-rep")
    assert profile.raw_page_path(report) == named.with_name("cuda_smem.race_fp32.1024x262144.raw.csv")


def test_the_report_path_is_shown_relative_to_the_checkout(tmp_path, monkeypatch):
    """A published log names the report by its place in the repository, not by the folders of the machine that
    wrote it; a report outside the checkout is shown as given."""
    root = tmp_path / "checkout"
    monkeypatch.setenv("LABMAGIC_ROOT", str(root))
    inside = root / "results" / "nvidia-h200" / "profiles" / "01_vector_add" / "cuda_float4.ncu-rep"
    outside = tmp_path / "elsewhere" / "cuda_float4.ncu-rep"
    kernels = ncu.parse_raw_csv(RAW)
    for report, shown in ((inside, "results/nvidia-h200/profiles/01_vector_add/cuda_float4.ncu-rep"),
                          (outside, str(outside))):
        result = profile.ProfileResult(chapter="01_vector_add", variant="cuda_float4", shape="268435456",
                                       report=report, kernels=kernels, iters=2, nbytes=3 * 4 * 2**28)
        text, html = repr(result), result._repr_html_()
        assert text.splitlines()[-1] == f"full report: {shown}"
        assert f"full report: <code>{shown}</code>" in html
        if report == inside:
            assert str(root) not in text and str(root) not in html
