"""The judge's parts, each on its own: finding the marked cells, the source rules, the guarded outputs, the torch
monitor's attribution, the bars from results/, and the comparison of non-finite answers."""

from __future__ import annotations

import math

import pytest
import torch

from labmagic.errors import LabError
from labmagic.exercises import bars, buffers, registry, source_rules, submission, torch_calls
from labmagic.exercises.grading import compare_output, input_names
from labmagic.exercises.spec import Bar, Output

# -- submission --------------------------------------------------------------------------------------------------

CUDA = '%%cuda_kernel\n// exercise: copy_float4\nextern "C" __global__ void k() {}\n'
PY = "# exercise: copy_float4\ndef copy_float4(x, out):\n    pass\n"


def test_the_last_cell_of_each_kind_counts_cuda_first():
    newer = PY.replace("pass", "return None")
    sub = submission.from_cells([PY, "x = 1", CUDA, newer, "# exercise: other\n"], "copy_float4", "here")
    assert sub.cells == (CUDA, newer)


def test_a_marker_must_open_the_cell():
    late = "x = 1\n" * 5 + "# exercise: copy_float4\n"
    assert submission.marked_for(late) is None
    assert submission.marked_for("%%cuda_kernel --arch sm_90a\n\n// exercise: wgmma_desc\n") == "wgmma_desc"
    with pytest.raises(LabError, match="no cell in here is marked for exercise 'copy_float4'"):
        submission.from_cells([late], "copy_float4", "here")


def test_the_session_history_is_the_live_submission(shell):
    shell.run("# exercise: scale_add\ndef scale_add(x, y, alpha, out):\n    return 1")
    shell.run("# exercise: scale_add\ndef scale_add(x, y, alpha, out):\n    return 2")
    sub = submission.from_session(shell.ip, "scale_add")
    assert len(sub.cells) == 1 and sub.cells[0].endswith("return 2")


def test_every_exercise_has_marked_stub_cells_and_a_solution():
    for exercise in registry.all_exercises():
        stub = submission.from_notebook(registry.notebook_path(exercise.chapter), exercise.name)
        solution = submission.from_notebook(registry.solution_path(exercise), exercise.name)
        kinds = [submission.cell_kind(c) for c in stub.cells]
        assert kinds == [submission.cell_kind(c) for c in solution.cells], exercise.name
        assert ("cuda_kernel" in kinds) == (exercise.language == "cuda"), exercise.name
        assert stub.cells != solution.cells, exercise.name


# -- source rules ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("source, phrase", [
    ("import numpy as np", "imports numpy"),
    ("from cupy import add", "imports cupy"),
    ("import jax.numpy", "imports jax.numpy"),
    ("from labmagic import kernel", "imports the judge or the chapter's kernels"),
    ("import labmagic.exercises.grading", "imports the judge"),
    ("f = labmagic.kernel('01', 'triton')", "uses labmagic.kernel"),
    ("y = x.cpu()", "a copy to the host (.cpu())"),
    ("v = x.sum().item()", "a copy to the host (.item())"),
    ("eval('1')", "code built at run time"),
    ("__import__('numpy')", "code built at run time"),
])
def test_a_rule_names_what_it_saw(source, phrase):
    found = source_rules.violations(source, "cell 2")
    assert found and phrase in found[0] and found[0].startswith("cell 2, line 1:"), found


def test_plain_kernel_code_breaks_no_rule():
    source = ("import math\nfrom labmagic.tensor_map import tensor_map_2d\n"
              "def f(x, out):\n    n = x.numel()\n    items = {}.items()\n    return x.dtype.itemsize")
    assert source_rules.violations(source, "cell 1") == []


# -- buffers -----------------------------------------------------------------------------------------------------

def test_an_output_is_poisoned_and_a_write_past_it_is_seen():
    out = buffers.allocate(Output("y", (3, 5), "float32"), "cpu")
    assert out.tensor.shape == (3, 5) and bool(torch.isnan(out.tensor).all())
    assert out.guard_damage() is None
    out.tensor.fill_(1.0)
    assert out.guard_damage() is None
    out.buffer[out.lead // 4 + 15] = 0.0  # the first element past the end
    assert "after the end of `y`, the first 0 byte(s) past its end" in out.guard_damage()


def test_a_write_before_an_offset_output_is_seen():
    out = buffers.allocate(Output("out", (10,), "bfloat16", offset=3), "cpu")
    assert (out.tensor.data_ptr() - out.buffer.data_ptr()) % 16 == 6  # three bf16 past a 16-byte boundary
    out.buffer[out.lead // 2 - 1] = 0
    assert "before the start of `out`" in out.guard_damage()


def test_integer_outputs_take_their_poison():
    q = buffers.allocate(Output("q", (4,), "int8"), "cpu")
    s = buffers.allocate(Output("scale", (4,), "float32", poison=-1.0), "cpu")
    assert q.tensor.tolist() == [0x5A] * 4 and s.tensor.tolist() == [-1.0] * 4


def test_overlap_and_changed_inputs():
    base = torch.zeros(100)
    assert buffers.overlaps(base[10:20], base[15:30]) and not buffers.overlaps(base[:10], base[10:20])
    x = torch.ones(8)
    before = buffers.snapshot((x, 2.0))
    x[3] = 2
    assert buffers.changed_inputs((x, 2.0), before, ["x", "alpha"]) == ["x"]


# -- torch monitor -----------------------------------------------------------------------------------------------

def test_the_monitor_records_the_submissions_calls_and_no_one_elses():
    namespace = {"torch": torch}
    code = "def f(a, b, out):\n    t = torch.empty_like(a)\n    out.copy_(a + b)\n    return t.view(-1)\n"
    exec(compile(code, f"{torch_calls.CELL_PREFIX}3>", "exec"), namespace)
    a, b, out = torch.ones(4), torch.ones(4), torch.empty(4)
    calls = torch_calls.TorchCalls()
    with torch_calls.monitor(calls):
        namespace["f"](a, b, out)
        torch.add(a, b)  # the judge's own call: not the submission's
    assert list(calls.refused) == ["add", "copy_"]
    assert calls.refused["add"] == "cell 3, line 3"
    assert "aten::add (cell 3, line 3)" in calls.describe()


# -- bars --------------------------------------------------------------------------------------------------------

def test_a_copy_bar_and_a_rung_bar_come_from_the_h200s_results():
    copy = registry.find("copy_float4")
    bar = bars.bar_value(copy, "nvidia-h200")
    assert bar.ms == pytest.approx(8 * 2**28 / (4292.4e9 * 0.9) * 1e3, rel=1e-6)
    rung = registry.find("sgemm_regtile")
    row = bars.rung_row(rung, "nvidia-h200")
    value = bars.bar_value(rung, "nvidia-h200")
    assert value.reference_ms == float(row["ms_median"]) and value.ms == pytest.approx(value.reference_ms / 0.85)
    assert "85% of the speed of the chapter's `cuda_blocktile_2d`" in value.text


def test_no_bar_where_nothing_was_measured():
    import dataclasses

    rung = registry.find("sgemm_regtile")
    assert bars.bar_value(rung, "no-such-gpu") is None
    missing = dataclasses.replace(rung, bar=Bar((4096, 4096, 4096), 0.85, "cuda_no_such_rung", "float32"))
    assert bars.bar_value(missing, "nvidia-h200") is None


def test_the_floor_is_the_datasheet_s():
    copy = registry.find("copy_float4")
    assert bars.floor_ms(copy, "nvidia-h200") == pytest.approx(8 * 2**28 / 4800e9 * 1e3)
    gemm = registry.find("sgemm_regtile")
    assert bars.floor_ms(gemm, "nvidia-h200") == pytest.approx(2 * 4096**3 / 67e12 * 1e3)


# -- comparison --------------------------------------------------------------------------------------------------

def test_non_finite_answers_must_match_exactly():
    spec = Output("m", (3,), "float32", rtol=1e-4, exact_nonfinite=True)
    want = torch.tensor([-math.inf, 1.0, math.nan])
    assert compare_output(torch.tensor([-math.inf, 1.00001, math.nan]), want, spec) is None
    assert "differ; the first holds 0" in compare_output(torch.tensor([0.0, 1.0, math.nan]), want, spec)
    assert "differ" in compare_output(torch.tensor([-math.inf, 1.0, 2.0]), want, spec)
    plain = Output("m", (3,), "float32", rtol=1e-4)
    assert compare_output(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([1.0, 1.0, 1.0]), plain) is None


def test_input_names_come_from_the_signature():
    assert input_names(registry.find("online_merge")) == ["m_a", "d_a", "m_b", "d_b", "m", "d"]


# -- what a GPU records, read without one --------------------------------------------------------------------------

def _event(name, stream, category="kernel"):
    from labmagic.timing.device_clock import DeviceEvent

    return DeviceEvent(name, 0.0, 1.0, stream, category)


def test_the_trace_refuses_foreign_kernels_other_streams_and_copies():
    from labmagic.exercises.kernel_trace import problems

    marker = _event("void at::cuda::(anonymous namespace)::spin_kernel(long)", 7)
    own = {"scale_add_kernel", "copy_float4_kernel"}
    clean = [marker, _event("scale_add_kernel", 7), _event("void at::native::vectorized_elementwise_kernel<4, "
                                                          "at::native::FillFunctor<float>>(...)", 7)]
    assert problems(clean, own) == ([], [])
    foreign = problems([marker, _event("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", 7)], own)[0]
    assert foreign and foreign[0].startswith("launches kernels that are not its own: sm90_xmma_gemm")
    elsewhere = problems([marker, _event("scale_add_kernel", 13)], own)[0]
    assert elsewhere == ["launches work on another stream (13, not the current stream 7): work must be ordered on "
                         "the caller's stream"]
    copied = problems([marker, _event("Memcpy DtoD (Device -> Device)", 7, "gpu_memcpy")], own)[0]
    assert copied and copied[0].startswith("copies memory (Memcpy DtoD")
    assert "no marker kernel" in problems([_event("scale_add_kernel", 7)], own)[1][0]


def test_a_kernels_name_matches_as_a_whole_word():
    from labmagic.exercises.kernel_trace import is_own

    assert is_own("void softmax_online_kernel<float>(float const*, float*, int)", {"softmax_online_kernel"})
    assert not is_own("my_kernel_v2", {"my_kernel"}) and not is_own("add", {"scale_add"})


def test_the_time_is_held_to_the_floor_and_the_bar():
    from labmagic.exercises.bars import BarValue
    from labmagic.exercises.grading import Stop, judge_time
    from labmagic.exercises.verdict import Grade

    bar = BarValue(ms=1.0, reference_ms=0.9, text="at n=8: 1 ms or less")
    passed = Grade("copy_float4")
    judge_time(passed, 0.8, "cuda_event", "n=8", bar, 0.5, "nvidia-h200")
    assert (passed.status, passed.ms, passed.bar_ms) == ("pass", 0.8, 1.0)
    slow = Grade("copy_float4")
    judge_time(slow, 1.25, "cuda_event", "n=8", bar, 0.5, "nvidia-h200")
    assert slow.status == "fail" and "(80% of the speed asked for)" in slow.verdict
    hair = Grade("add_bf16")  # the H200's add_bf16: 0.443 ms against 0.4414 is 99.6% of the speed, and a fail
    judge_time(hair, 0.443, "cuda_event", "n=8", BarValue(0.4414, 0.375, "at n=8"), 0.3, "nvidia-h200")
    assert hair.status == "fail" and "(99% of the speed asked for)" in hair.verdict, hair.verdict
    unmeasured = Grade("copy_float4")
    judge_time(unmeasured, 0.8, "cuda_event", "n=8", None, 0.5, "nvidia-l4")
    assert unmeasured.status == "correct" and "no bar measured for nvidia-l4" in unmeasured.notes[0]
    with pytest.raises(Stop) as stop:
        judge_time(Grade("copy_float4"), 0.1, "cuda_event", "n=8", bar, 0.5, "nvidia-h200")
    assert stop.value.status == "refused" and "below the datasheet floor of 0.5 ms" in stop.value.verdict


MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at copy_float4_kernel+0xb0 in cell:8
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3c2a010ffc is out of bounds
=========
========= ERROR SUMMARY: 1 error
"""


UNTIED = """\
========= COMPUTE-SANITIZER
========= Program hit cudaErrorInvalidValue (error 1) due to "invalid argument" on CUDA API call to cudaFuncGetAttributes.
=========     Saved host backtrace up to driver entry point at error
=========
========= Program hit cudaErrorInvalidValue (error 1) due to "invalid argument" on CUDA API call to cudaFuncGetAttributes.
=========     Saved host backtrace up to driver entry point at error
=========
========= Invalid __global__ read of size 4 bytes
=========     at void at::native::elementwise_kernel<128, 4>+0x90
=========     by thread (1,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 3 errors
"""


def test_sanitizer_errors_outside_the_submissions_kernels_are_named_on_each_grade_and_refuse_none():
    from labmagic.exercises.sanitizer_pass import judge_findings
    from labmagic.exercises.verdict import Grade

    ran = {0: {"event": "ran", "kernels": ["copy_float4_kernel"], "shape": "100003", "sources": {}},
           1: {"event": "ran", "kernels": ["add_bf16_kernel"], "shape": "100003", "sources": {}}}
    grades = [Grade("copy_float4", status="pass"), Grade("add_bf16", status="pass")]
    judge_findings(UNTIED, ran, grades)
    assert [g.status for g in grades] == ["pass", "pass"]
    for grade in grades:
        assert grade.notes == ["compute-sanitizer reported 3 error(s) it did not tie to a kernel: Program hit "
                               "cudaErrorInvalidValue (error 1) due to \"invalid argument\" on CUDA API call to "
                               "cudaFuncGetAttributes. x2; Invalid __global__ read of size 4 bytes x1 in void "
                               "at::native::elementwise_kernel<128, 4>"]
    bare = [Grade("copy_float4", status="pass")]
    judge_findings("========= ERROR SUMMARY: 2 errors\n", {0: ran[0]}, bare)
    assert bare[0].notes == ["compute-sanitizer reported 2 error(s) it did not tie to a kernel (its log names none)"]


def test_a_memcheck_finding_refuses_the_job_whose_kernel_it_names():
    from labmagic.exercises.sanitizer_pass import judge_findings
    from labmagic.exercises.verdict import Grade

    source = "%%cuda_kernel\n" + "\n".join(f"// line {i}" for i in range(2, 8)) + "\n    out[n + 4096] = 1.f;\n"
    ran = {0: {"event": "ran", "kernels": ["copy_float4_kernel"], "shape": "100003",
               "sources": {"copy_float4_kernel": [source, 2]}},
           1: {"event": "ran", "kernels": ["scale_add_kernel"], "shape": "7", "sources": {}},
           2: {"event": "error", "error": "RuntimeError: no"}}
    grades = [Grade("copy_float4", status="pass"), Grade("scale_add", status="pass"), Grade("add_bf16", status="pass")]
    judge_findings(MEMCHECK, ran, grades)
    assert grades[0].status == "refused"
    assert grades[0].verdict.startswith("writes or reads outside its buffers at 100003: memcheck: Invalid __global__ "
                                        "write of size 4 bytes in copy_float4_kernel at cell line 8")
    assert grades[1].status == "pass" and "memcheck at 7: clean" in grades[1].checks[-1]
    assert grades[2].status == "pass" and "not sanitized" in grades[2].notes[0]


def test_a_memcheck_finding_names_the_cause_of_a_failed_grade_and_keeps_the_wrong_output():
    """A write 16 KB past an output lands in another tensor: the output check sees only a wrong value and grades
    fail (so it went on the H200 at 5b19d02). Failed CUDA grades whose cases ran go under memcheck too, and a
    finding refuses them by name, the wrong output kept in a note; a failed compile never ran and is not chosen."""
    from labmagic.exercises.judge import to_sanitize
    from labmagic.exercises.sanitizer_pass import judge_findings
    from labmagic.exercises.verdict import Grade

    wrong = Grade("copy_float4", language="cuda", status="fail", seed=7,
                  verdict="case 7 of 9 (n=22323): `out`: 1 of 22323 elements differ beyond rtol=0, atol=0")
    assert to_sanitize(wrong)
    assert not to_sanitize(Grade("copy_float4", language="cuda", status="fail",
                                 verdict="the cells compile no CUDA kernel"))  # no seed: its cases never ran
    assert to_sanitize(Grade("copy_float4", language="cuda", status="pass", seed=7))
    assert not to_sanitize(Grade("scale_add", language="triton", status="fail", seed=7))
    ran = {0: {"event": "ran", "kernels": ["copy_float4_kernel"], "shape": "100003", "sources": {}}}
    judge_findings(MEMCHECK, ran, [wrong])
    assert wrong.status == "refused" and "memcheck: Invalid __global__ write" in wrong.verdict
    assert wrong.notes == ["its outputs were wrong too: case 7 of 9 (n=22323): `out`: 1 of 22323 elements differ "
                           "beyond rtol=0, atol=0"]


def test_a_finding_in_a_call_that_memcheck_aborted_still_refuses_it():
    """memcheck aborts a kernel it catches, so the child's synchronize after the call raises: the job's record is an
    error, but it carries the kernels it built, and their finding refuses the grade, the call's error in a note. (The
    far write of #52 went graded 'fail' on three GPUs while the error record was read as 'not sanitized'.)"""
    from labmagic.exercises.sanitizer_pass import judge_findings
    from labmagic.exercises.verdict import Grade

    aborted = {"event": "error", "error": "RuntimeError: CUDA error: unspecified launch failure",
               "kernels": ["copy_float4_kernel"], "shape": "100003", "sources": {}}
    wrong = Grade("copy_float4", language="cuda", status="fail", seed=7, verdict="case 7 of 9: `out` differs")
    judge_findings(MEMCHECK, {0: aborted}, [wrong])
    assert wrong.status == "refused" and "memcheck: Invalid __global__ write" in wrong.verdict
    assert wrong.notes == ["under compute-sanitizer the call then raised RuntimeError: CUDA error: unspecified launch "
                           "failure", "its outputs were wrong too: case 7 of 9: `out` differs"]
    clean = Grade("scale_add", language="cuda", status="pass", seed=7)
    judge_findings(MEMCHECK, {0: {**aborted, "kernels": ["scale_add_kernel"]}}, [clean])
    assert clean.status == "pass" and clean.notes[0].startswith("not sanitized: under compute-sanitizer the call raised")
