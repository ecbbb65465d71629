"""The race orchestration on CPU: correctness before and after timing, prediction mode, rendering, %bench.

Everything here runs the real components (torch on CPU, the real checks, the real wall-clock timer,
the real IPython shell); nothing is mocked. Shapes are small so the suite stays fast on two cores.
"""

from __future__ import annotations

import math
import re
import time

import pytest
import torch

import labmagic
from labmagic import benchmark
from labmagic.benchmark import Race, bench, checks
from labmagic.timing import WallTimer

pytestmark = pytest.mark.skipif(labmagic.has_gpu(), reason="CPU-mode behaviour; the GPU path is in test_bench_gpu")

CHECK_SHAPES = [(1,), (3,), (1023,), (4099,)]


def make_inputs(n):
    return torch.randn(n), torch.randn(n)


def torch_add(a, b):
    return a + b


def needs_gpu(a, b):
    raise labmagic.NoGPUError("cuda_naive needs a CUDA GPU to run; this machine has none")


def race_with(**variants):
    return Race(chapter="test_race", variants={"torch": torch_add, **variants}, ref="torch",
                make_inputs=make_inputs, shapes=[2**10, 2**12], check_shapes=CHECK_SHAPES,
                flops=lambda n: n, nbytes=lambda n: 12 * n, dtype="float32")


def status(result, variant, shape=2**10):
    return result.row(variant, shape).status


# -- correctness before timing -------------------------------------------------------------------

@pytest.mark.parametrize("name, fn, reason", [
    ("torch_wrong", lambda a, b: a - b, "differ beyond"),
    ("torch_off_by_tol", lambda a, b: (a + b) * (1 + 1e-3), "differ beyond"),
    ("torch_nan", lambda a, b: torch.where(torch.arange(a.numel()) == a.numel() - 1, float("nan"), a + b), "NaN"),
    ("torch_inf", lambda a, b: (a + b) / torch.zeros_like(a), "NaN/inf"),
    ("torch_zeros", lambda a, b: torch.zeros_like(a), "all zeros"),
    # A kernel whose guard misses the last element: its output buffer was poisoned, the element stays NaN.
    ("torch_unwritten_tail", lambda a, b: torch.cat([a[:-1] + b[:-1], torch.full((1,), float("nan"))]), "NaN"),
    ("torch_wrong_shape", lambda a, b: (a + b)[:-1] if a.numel() > 1 else (a + b).reshape(1, 1), "shape"),
])
def test_mismatch_is_recorded_not_timed_and_the_sweep_goes_on(name, fn, reason):
    result = bench(race_with(**{name: fn}), timer=WallTimer(reps=2))
    for shape in (2**10, 2**12):
        row = result.row(name, shape)
        assert row.status == "mismatch", row
        assert reason in row.error
        assert row.ms_median is None and row.gbps is None
    assert status(result, "torch") == "ok"
    assert result.row("torch", 2**12).ms_median > 0


def test_unwritten_output_on_an_odd_shape_fails_even_if_the_rest_is_right():
    # Wrong only where a float4 kernel without a tail loop would be: lengths not divisible by 4.
    def torch_no_tail(a, b):
        out = torch.full_like(a, float("nan"))
        n4 = a.numel() // 4 * 4
        out[:n4] = a[:n4] + b[:n4]
        return out

    result = bench(race_with(torch_no_tail=torch_no_tail), timer=WallTimer(reps=2))
    assert status(result, "torch_no_tail") == "mismatch"
    assert "at 1:" in result.row("torch_no_tail", 2**10).error  # the first awkward shape caught it


def test_a_raising_variant_is_an_error_row_and_others_continue():
    def torch_raises(a, b):
        raise ValueError("index out of range in my kernel")

    result = bench(race_with(torch_raises=torch_raises, torch_ok=torch_add), timer=WallTimer(reps=2))
    row = result.row("torch_raises", 2**10)
    assert row.status == "error" and "index out of range" in row.error
    assert status(result, "torch_ok") == "ok"


def test_compare_rules():
    ref = torch.tensor([1.0, -2.0, 3.0])
    assert checks.compare(ref.clone(), ref, 1e-4, 1e-5)
    assert not checks.compare(torch.tensor([1.0, -2.0, float("nan")]), ref, 1e-4, 1e-5)
    assert not checks.compare(torch.zeros(3), ref, 1e-4, 1e-5)
    assert not checks.compare(torch.tensor([1.0, -2.0, 3.01]), ref, 1e-4, 1e-5)
    assert checks.compare(torch.tensor([1.0, -2.0, 3.01]), ref, 1e-2, 0)
    # NaN never passes, even when the reference has it in the same place.
    assert not checks.compare(torch.tensor([float("nan")]), torch.tensor([float("nan")]), 1, 1)
    # Integer outputs that are legitimately zero pass when the reference is zero too.
    assert checks.compare(torch.zeros(2, dtype=torch.int64), torch.zeros(2, dtype=torch.int64), 0, 0)
    # Outputs from other frameworks go through DLPack/numpy.
    assert checks.compare(ref.numpy().copy(), ref, 1e-4, 1e-5)


def test_tolerances_by_dtype():
    assert checks.tolerances("float32") == (1e-4, 1e-5)
    assert checks.tolerances(torch.bfloat16)[0] > checks.tolerances("float16")[0]
    assert checks.tolerances("int8") == (0.0, 0.0)
    assert checks.tolerances("float32", rtol=0.5) == (0.5, 1e-5)


# -- correctness after timing --------------------------------------------------------------------

def right_then_wrong(right_calls: int):
    calls = {"n": 0}

    def torch_sneaky(a, b):
        calls["n"] += 1
        return a + b if calls["n"] <= right_calls else a + b + 1.0

    return torch_sneaky, calls


def test_a_variant_right_while_checked_and_wrong_when_timed_is_caught():
    sneaky, calls = right_then_wrong(len(CHECK_SHAPES))
    result = bench(race_with(torch_sneaky=sneaky), timer=WallTimer(reps=3))
    row = result.row("torch_sneaky", 2**10)
    assert calls["n"] > len(CHECK_SHAPES)  # it passed the check and reached the timer
    assert row.status == "mismatch"
    assert row.error.startswith("re-check after timing")
    assert row.ms_median is None  # a wrong answer's time is not reported


def test_recheck_compares_the_timed_output_with_the_reference_on_the_same_inputs():
    race = race_with()
    inputs = make_inputs(100)
    assert benchmark.recheck(race, inputs[0] + inputs[1], inputs, (100,))
    other = make_inputs(100)
    assert not benchmark.recheck(race, other[0] + other[1], inputs, (100,))  # right answer, wrong input set


def test_an_atol_that_grows_with_the_shape_holds_each_shape_to_its_own():
    # An error that grows with n: off by 1e-3 * sqrt(n) at every element, inside atol = 2e-3 * sqrt(n) at every
    # shape, where a fixed atol sized for the smallest shape would refuse the largest.
    def torch_drift(a, b):
        return a + b + 1e-3 * a.numel() ** 0.5

    grows = Race(chapter="test_race", variants={"torch": torch_add, "torch_drift": torch_drift}, ref="torch",
                 make_inputs=make_inputs, shapes=[2**10], check_shapes=CHECK_SHAPES, dtype="float32", rtol=0.0,
                 atol=lambda n: 2e-3 * n**0.5)
    assert grows.tolerances((4099,)) == (0.0, 2e-3 * 4099**0.5) and grows.tolerances("4") == (0.0, 4e-3)
    result = benchmark.verify(grows)
    assert not result.failed, result
    assert result.atol == 2e-3 * 4099**0.5 and any("atol grows with the shape" in n for n in result.notes)
    fixed = Race(chapter="test_race", variants=grows.variants, ref="torch", make_inputs=make_inputs,
                 check_shapes=CHECK_SHAPES, dtype="float32", rtol=0.0, atol=2e-3)
    assert benchmark.verify(fixed).failed
    with pytest.raises(labmagic.LabError, match="atol is a number, a function"):
        Race(chapter="test_race", variants=grows.variants, ref="torch", make_inputs=make_inputs, atol="1e-3")


def test_the_wall_timer_hands_back_the_last_timed_output_and_its_input_set():
    sets = [make_inputs(8) for _ in range(3)]
    timing = WallTimer(reps=5, warmup=0).time(torch_add, sets)
    assert len(timing.times_ms) == 5 and timing.median_ms > 0
    assert timing.output_set == 4 % 3
    assert torch.equal(timing.output, sets[1][0] + sets[1][1])


# -- limits, backends, measured columns ----------------------------------------------------------

def test_limits_skip_above_the_size_and_backends_are_inferred():
    race = race_with(triton_add=torch_add, cuda_naive=needs_gpu)
    race.limits = {"triton_add": 2**11}
    result = bench(race, timer=WallTimer(reps=2))
    assert status(result, "triton_add", 2**10) == "ok"
    assert status(result, "triton_add", 2**12) == "skipped"
    assert result.row("triton_add", 2**10).backend == "triton"
    assert status(result, "cuda_naive") == "needs_gpu"
    assert result.row("cuda_naive", 2**10).backend == "cuda"


def test_an_input_a_variant_refuses_by_design_is_skipped_with_why_and_the_rest_is_checked_and_timed():
    def peer_add(a, b):  # a peer library that takes lengths up to 2**11 only, and says so before running
        if a.numel() > 2**11:
            raise labmagic.UnsupportedInput(f"peer_add takes up to 2048 elements, not {a.numel()}")
        return a + b

    result = bench(race_with(peer_add=peer_add), timer=WallTimer(reps=2))
    assert status(result, "peer_add", 2**10) == "ok"  # checked on the three check shapes it takes (4099 refused)
    row = result.row("peer_add", 2**12)
    assert row.status == "skipped" and row.error == "peer_add takes up to 2048 elements, not 4096"
    # A variant that takes none of the check shapes is not timed unchecked.
    result = bench(race_with(peer_none=lambda a, b: (_ for _ in ()).throw(labmagic.UnsupportedInput("never"))),
                   timer=WallTimer(reps=2))
    row = result.row("peer_none", 2**10)
    assert row.status == "skipped" and row.error == "takes none of the check shapes (at 1: never): not timed unchecked"
    # A plain ArgumentError (a wrong argument, not a documented limit) is still an error.
    result = bench(race_with(torch_bad=lambda a, b: (_ for _ in ()).throw(labmagic.ArgumentError("bad"))),
                   timer=WallTimer(reps=2))
    assert status(result, "torch_bad") == "error"


def test_measured_columns_follow_from_the_median():
    result = bench(race_with(torch_copy=lambda a, b: (a + b).clone()), timer=WallTimer(reps=3))
    row = result.row("torch_copy", 2**12)
    assert row.gbps == pytest.approx(12 * 2**12 / (row.ms_median * 1e-3) / 1e9)
    assert row.tflops == pytest.approx(2**12 / (row.ms_median * 1e-3) / 1e12)
    assert row.sol_pct == pytest.approx(100 * row.gbps / 4800)  # the H200 spec: memory-bound at 1/12 FLOP/B
    ref = result.row("torch", 2**12)
    assert row.vs_ref == pytest.approx(ref.ms_median / row.ms_median)
    assert row.ms_min <= row.ms_median <= row.ms_max
    assert row.source_hash and row.source_hash != ref.source_hash


def test_a_race_or_a_bench_names_its_timer_and_the_bench_wins():
    from labmagic.benchmark.runner import _timer_named
    from labmagic.timing import CudaTimer

    graphed = Race(chapter="test_race", variants={"torch": torch_add}, ref="torch", make_inputs=make_inputs,
                   shapes=[4], timer="graph", rep_ms=40.0)
    timer = _timer_named(graphed, None, True, 100.0, None)
    assert isinstance(timer, CudaTimer) and timer.graph and timer.rep_ms == 40.0
    assert not _timer_named(graphed, "events", True, 100.0, None).graph
    assert _timer_named(race_with(), "graph", True, None, None).graph
    assert _timer_named(graphed, None, False, None, None) is None  # no GPU: nothing is timed, by any name
    wall = WallTimer(reps=2)
    assert _timer_named(graphed, wall, False, None, None) is wall
    with pytest.raises(labmagic.LabError, match="unknown timer 'cupti': one of events, graph"):
        bench(graphed, timer="cupti")
    with pytest.raises(labmagic.LabError, match="timer must be one of events, graph, got 'nsight'"):
        Race(chapter="test_race", variants={"torch": torch_add}, ref="torch", make_inputs=make_inputs, timer="nsight")


def test_race_validation():
    with pytest.raises(labmagic.LabError, match="ref"):
        Race("x", {"torch": torch_add}, ref="nope", make_inputs=make_inputs)
    with pytest.raises(labmagic.LabError, match="unknown variants"):
        Race("x", {"torch": torch_add}, ref="torch", make_inputs=make_inputs, limits={"cuda": 1})
    race = Race("x", {"torch": torch_add}, ref="torch", make_inputs=make_inputs, shapes=[4, (2, 3)])
    assert race.shapes == [(4,), (2, 3)]


# -- with no GPU: a prediction -------------------------------------------------------------------

def test_cpu_mode_predicts_for_the_h200_and_checks_what_runs_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    result = bench(race_with(cuda_naive=needs_gpu, torch_wrong=lambda a, b: a * b))
    assert not result.measured
    assert result.spec.slug == "nvidia-h200"
    assert status(result, "torch") == "predicted"
    assert status(result, "cuda_naive") == "needs_gpu"
    assert status(result, "torch_wrong") == "mismatch"  # correctness still ran on CPU
    row = result.row("torch", 2**12)
    assert row.ms_median is None
    assert row.predicted_ms == pytest.approx(12 * 2**12 / 4800e9 * 1e3)
    assert not (tmp_path / "results").exists()  # predictions are not measurements: nothing written
    with pytest.raises(labmagic.LabError, match="nothing was measured"):
        result.save(tmp_path / "x.csv")


def test_cpu_mode_target_selects_the_spec():
    result = bench(race_with(), target="a100")
    assert result.spec.slug.startswith("nvidia-a100")
    assert result.row("torch", 2**12).predicted_ms == pytest.approx(12 * 2**12 / 2039e9 * 1e3)
    with pytest.raises(labmagic.LabError, match="unknown target"):
        bench(race_with(), target="voodoo5")


def test_cpu_mode_without_check_marks_cuda_as_needing_a_gpu():
    result = bench(race_with(cuda_naive=needs_gpu), check=False)
    assert status(result, "cuda_naive") == "needs_gpu"
    assert status(result, "torch") == "predicted"


def test_sol_override_is_in_the_bounding_unit():
    race = race_with()
    race.sol = {"nvidia-h200": 2400.0}  # GB/s, because vector add is memory-bound on the H200
    result = bench(race, timer=WallTimer(reps=2))
    row = result.row("torch", 2**12)
    assert row.sol_pct == pytest.approx(100 * row.gbps / 2400.0)


# -- rendering -----------------------------------------------------------------------------------

def test_prediction_renders_as_text_and_html_saying_nothing_was_measured():
    result = bench(race_with(cuda_naive=needs_gpu))
    text = repr(result)
    assert "nothing was measured" in text and "NVIDIA H200" in text
    assert not any(line.startswith("shape ") for line in text.splitlines())  # one table, not one per shape
    assert "needs GPU" in text and "not measured" in text
    html = result._repr_html_()
    assert html.count("<table>") == 1
    assert "nothing was measured" in html and "needs GPU" in html


def cuda_like(kernel):
    def variant(a, b):
        raise labmagic.NoGPUError(f"{kernel} needs a CUDA GPU to run; this machine has none (it was compiled for sm_90)")
    return variant


def test_prediction_is_one_table_of_variants_by_shapes_with_the_gpu_note_said_once():
    race = race_with(cuda_naive=cuda_like("vecadd_naive"), cuda_float4=cuda_like("vecadd_float4"),
                     torch_wrong=lambda a, b: a - b)
    race.limits = {"torch": 2**11}  # the reference is skipped at the larger shape
    result = bench(race, target="a100")
    floors = {n: _num(12 * n / 2039e9 * 1e3) for n in (2**10, 2**12)}
    text = repr(result)
    assert "Prediction for NVIDIA A100" in text
    assert text.count("CUDA GPU") == 1 and "vecadd_naive" not in text
    note = next(line for line in text.splitlines() if "CUDA GPU" in line)
    assert note.endswith(": cuda_naive, cuda_float4")
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("variant "))
    assert lines[head].split()[-2:] == ["1024", "4096"]
    table = {line.split()[0]: line for line in lines[head + 1:head + 7]}
    assert table["cuda_naive"].split()[-2:] == [floors[2**10], floors[2**12]]
    assert table["cuda_float4"].split()[-2:] == [floors[2**10], floors[2**12]]
    assert table["torch"].split()[-2:] == [floors[2**10], "skipped"]
    assert table["torch_wrong"].split()[-2:] == ["mismatch", "mismatch"]
    # The lines of one table share their column widths: every cell of a shape column ends at the same place.
    ends = {len(lines[i]) for i in range(head, head + 5)}
    assert len(ends) == 1
    assert text.count("differ beyond") == 1  # torch_wrong's error, said once though it fails at both shapes
    assert "torch: above limit 2048" in text
    html = result._repr_html_()
    assert html.count("<table>") == 1 and html.count("<tr") == 1 + 4 + 2
    assert html.count("CUDA GPU") == 1 and html.count("differ beyond") == 1
    assert "NVIDIA A100" in html and "<th>4096</th>" in html
    wrong_row = next(line for line in html.splitlines() if "<td>torch_wrong</td>" in line)
    assert 'color:#b00' in wrong_row and html.count('color:#b00') == 1


def _num(ms):
    return f"{ms:.4g}"


def test_measured_result_renders_marks_and_converts_to_a_dataframe():
    result = bench(race_with(torch_wrong=lambda a, b: a - b), timer=WallTimer(reps=2), plot=False)
    row = result.row("torch", 2**10)
    row.alloc_retries, row.below_floor = 2, True
    text = repr(result)
    torch_line = next(line for line in text.splitlines() if line.startswith("torch "))
    assert "*!" in torch_line and "2 allocator retries" in torch_line and "faster than the floor" in torch_line
    assert "mismatch" in text and "timer: wall" in text
    html = result._repr_html_()
    assert html.count("<table>") == 2
    assert "faster than the floor" in html
    frame = result.to_dataframe()
    assert len(frame) == 4 and set(frame.variant) == {"torch", "torch_wrong"}
    assert list(frame.columns[:6]) == ["chapter", "variant", "backend", "shape", "dtype", "status"]


def test_html_escapes_error_text():
    result = bench(race_with(torch_raises=lambda a, b: (_ for _ in ()).throw(ValueError("<script>"))))
    assert "<script>" not in result._repr_html_()
    assert "&lt;script&gt;" in result._repr_html_()


def test_measured_result_embeds_its_plot():
    result = bench(race_with(), timer=WallTimer(reps=2))
    assert result.png and result.png.startswith(b"\x89PNG")
    assert "data:image/png;base64," in result._repr_html_()


# -- %bench --------------------------------------------------------------------------------------

def test_bench_magic_runs_the_race_from_the_notebook(shell):
    shell.ns["race"] = Race(chapter="test_race", variants={"torch": torch_add, "cuda_naive": needs_gpu, "torch_x": torch_add},
                            ref="torch", make_inputs=lambda *s: (torch.randn(*s), torch.randn(*s)),
                            shapes=[2**10], check_shapes=[(3,), (5, 7)],
                            nbytes=lambda *s: 12 * math.prod(s))
    result = shell.run("%bench race --shapes 2**12 64x4 --variants cuda_naive --target h100")
    assert isinstance(result, benchmark.BenchResult)
    assert result.shapes == ["64x4", "4096"]  # small to large
    assert {r.variant for r in result.rows} == {"torch", "cuda_naive"}  # the reference always runs
    assert result.spec.slug == "nvidia-h100-80gb-hbm3"
    assert result.row("cuda_naive", (64, 4)).status == "needs_gpu"


def test_bench_magic_no_check_and_errors(shell):
    shell.ns["race"] = race_with(cuda_naive=needs_gpu)
    result = shell.run("%bench race --no-check --no-save")
    assert result.row("cuda_naive", 2**10).status == "needs_gpu" and result.row("cuda_naive", 2**10).error == ""
    shell.ns["not_a_race"] = 3
    with pytest.raises(labmagic.LabError, match="not a labmagic.benchmark.Race"):
        shell.run("%bench not_a_race")
    with pytest.raises(labmagic.LabError, match="unknown variants"):
        shell.run("%bench race --variants nope")


def test_bench_settings_are_traitlets(shell):
    shell.run("%config Bench.rep_ms = 7.5")
    assert shell.run("%config Bench.rep_ms") == 7.5
    shell.run("%config Bench.target = 'l4'")
    try:
        shell.ns["race"] = race_with()
        result = shell.run("%bench race")
        assert result.spec.slug == "nvidia-l4"
    finally:
        shell.run("%config Bench.target = ''")
        shell.run("%config Bench.rep_ms = 100.0")


def test_auto_input_sets_exceed_the_l2():
    l2 = 50 * 2**20
    k = benchmark.auto_input_sets(8 * 2**20, l2, 2**40)
    assert k * 8 * 2**20 >= 3 * l2 and (k - 1) * 8 * 2**20 < 3 * l2
    assert benchmark.auto_input_sets(2 * 2**30, l2, 2**40) == 1
    assert benchmark.auto_input_sets(1024, l2, 2**40) == 256
    assert benchmark.auto_input_sets(2**20, l2, 10 * 2**20) == 10  # the memory budget wins


def test_jax_outputs_are_checked_and_timed_to_completion_on_cpu():
    jnp = pytest.importorskip("jax.numpy")

    def jax_add(a, b):
        return jnp.asarray(a.numpy()) + jnp.asarray(b.numpy())

    def jax_wrong(a, b):
        return jnp.asarray(a.numpy()) * 2

    predicted = bench(race_with(jax_add=jax_add, jax_wrong=jax_wrong))
    assert status(predicted, "jax_add") == "predicted" and predicted.row("jax_add", 2**10).backend == "jax"
    assert status(predicted, "jax_wrong") == "mismatch"
    measured = bench(race_with(jax_add=jax_add), timer=WallTimer(reps=2), plot=False)
    assert status(measured, "jax_add") == "ok" and measured.row("jax_add", 2**10).ms_median > 0


def test_triton_variants_are_checked_in_the_interpreter_on_cpu():
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n  # without this guard the awkward check shapes read and write out of bounds
        tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)

    def triton_add(a, b):
        c = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 256),)](a, b, c, a.numel(), BLOCK=256)
        return c

    result = bench(race_with(triton_add=triton_add))
    assert status(result, "triton_add") == "predicted", result.row("triton_add", 2**10).error


# -- reading at the book's width -----------------------------------------------------------------

def _tables(html_text):
    """Each <table> of an HTML rendering as (its class, its header cells, its rows of cells)."""
    tables = []
    for attrs, body in re.findall(r"<table([^>]*)>(.*?)</table>", html_text, re.S):
        cls = re.search(r'class="([^"]*)"', attrs)
        heads = re.findall(r"<th>(.*?)</th>", body)
        rows = [re.findall(r"<td>(.*?)</td>", tr) for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]
        tables.append((cls.group(1) if cls else "", heads, [r for r in rows if r]))
    return tables


def _text_header(text):
    return re.split(r"\s{2,}", next(line for line in text.splitlines() if line.startswith("variant ")).strip())


def test_sdpa_and_peak_mem_columns_appear_only_when_some_row_has_them():
    result = bench(race_with(torch_x=torch_add), timer=WallTimer(reps=2), plot=False)
    assert result.measured
    head = _text_header(repr(result))
    assert "sdpa" not in head and "peak mem" not in head
    assert head[:3] == ["variant", "backend", "status"] and "floor ms" in head and "min-max ms" in head
    for _, heads, _ in _tables(result._repr_html_()):
        assert heads and "sdpa" not in heads and "peak mem" not in heads
    row = result.row("torch_x", 2**12)
    row.sdpa_backend, row.peak_mem_bytes = "flash", 3 * 2**20
    text = repr(result)
    head = _text_header(text)
    assert head[-3:] == ["peak mem", "sdpa", "note"]
    line = next(line for line in text.splitlines() if line.startswith("torch_x ") and "flash" in line)
    assert "3.0 MiB" in line
    tables = _tables(result._repr_html_())
    assert tables and all(heads[-3:] == ["peak mem", "sdpa", "note"] for _, heads, _ in tables)
    flash = [dict(zip(heads, cells)) for _, heads, rows in tables for cells in rows if cells[0] == "torch_x"]
    assert {c["sdpa"] for c in flash} == {"flash", "-"} and {c["peak mem"] for c in flash} == {"3.0 MiB", "-"}


def test_html_table_shows_fewer_columns_and_folds_the_full_set_below():
    result = bench(race_with(), timer=WallTimer(reps=2), plot=False)
    html = result._repr_html_()
    tables = _tables(html)
    default = [t for t in tables if t[0] == ""]
    full = [t for t in tables if t[0] == "labmagic-all-columns"]
    assert len(default) == len(full) == len(result.shapes) == 2
    for (_, short, short_rows), (_, every, every_rows) in zip(default, full):
        assert {"min-max ms", "floor ms"} <= set(every) - set(short)
        assert set(short) < set(every) and short[:4] == ["variant", "backend", "status", "median ms"]
        # Without measured ceilings % ceiling is '-' everywhere: % SOL stands in for it.
        assert "% SOL" in short and "% ceiling" not in short
        assert [r[0] for r in short_rows] == [r[0] for r in every_rows]
        assert _text_header(repr(result)) == every  # the text keeps every column
    assert html.count("<details><summary>all columns</summary>") == 2
    folded = re.findall(r"<details><summary>all columns</summary>\s*<table([^>]*)>", html)
    assert folded == [' class="labmagic-all-columns"'] * 2


def test_marks_are_listed_one_per_line():
    result = bench(race_with(), timer=WallTimer(reps=2), plot=False)
    html = result._repr_html_()
    legend = re.findall(r'<ul class="labmagic-legend"[^>]*>(.*?)</ul>', html, re.S)
    assert len(legend) == 1
    items = re.findall(r"<li>(.*?)</li>", legend[0])
    marks = ["*", "!", "vs", "≈", "host", "isolated", "host-bound"]
    assert [re.sub(r"<[^>]+>", "", i).split(" ", 1)[0] for i in items] == marks
    assert "allocator retries" in items[0] and "physical floor" in items[1] and "reference time" in items[2]
    assert all(i.count("allocator") + i.count("floor") + i.count("reference") == 1 for i in items[:4])
    assert "to its return" in items[4] and "end of its work" in items[5] and "eager loop" in items[6]
    lines = repr(result).splitlines()
    at = lines.index("marks:")
    listed = [line.split() for line in lines[at + 1:]]
    assert [m[0] for m in listed] == marks and len(listed) == len(marks)
    assert "allocator retries" in lines[at + 1] and "physical floor" in lines[at + 2] and "reference" in lines[at + 3]
    # A prediction has no marks to explain.
    prediction = bench(race_with(), target="a100")
    assert "labmagic-legend" not in prediction._repr_html_() and "marks:" not in repr(prediction)


def test_timed_rows_carry_the_host_figures_and_a_host_bound_row_says_so():
    def torch_slow_host(a, b):
        time.sleep(0.002)
        return a + b

    result = bench(race_with(torch_slow_host=torch_slow_host, torch_wrong=lambda a, b: a - b),
                   timer=WallTimer(reps=3), plot=False)
    slow = result.row("torch_slow_host", 2**10)
    assert slow.host_ms >= 2.0 and slow.isolated_ms >= slow.host_ms
    assert result.row("torch", 2**10).host_ms < 2.0
    assert result.row("torch_wrong", 2**10).host_ms is None  # a mismatch is not timed, on either clock
    head = _text_header(repr(result))
    assert head[3:6] == ["median ms", "host ms", "isolated ms"]
    for row in result.rows:  # on CPU the wall time holds the host time: set device times as a GPU would see them
        row.ms_median = row.host_ms and row.host_ms * 2
    slow.ms_median = slow.host_ms / 2  # a kernel of half the host's time
    line = next(line for line in repr(result).splitlines() if line.startswith("torch_slow_host "))
    assert line.split()[-1] == "host-bound" and not result.row("torch", 2**10).host_bound
    assert repr(result).split("marks:")[0].count("host-bound") == 1
    cells = [dict(zip(heads, row)) for _, heads, rows in _tables(result._repr_html_()) for row in rows
             if row[0] == "torch_slow_host"]
    assert [c["note"] for c in cells] == ["host-bound", "host-bound", "", ""]
    assert "host ms" in cells[0] and "isolated ms" in cells[0]
    frame = result.to_dataframe()
    assert {"host_ms", "isolated_ms"} <= set(frame.columns)


def test_a_timer_without_host_figures_leaves_their_columns_out():
    class EventsOnly:
        def __init__(self):
            self.inner = WallTimer(reps=2)

        def time(self, *args, **kwargs):
            return self.inner.time(*args, **kwargs)

    result = bench(race_with(), timer=EventsOnly(), plot=False)
    assert result.row("torch", 2**10).ms_median and result.row("torch", 2**10).host_ms is None
    assert "host ms" not in _text_header(repr(result))


def test_rows_carry_the_medians_interval_and_vs_ref_marks_a_tie():
    result = bench(race_with(torch_copy=lambda a, b: (a + b).clone()), timer=WallTimer(reps=30), plot=False)
    ref, row = result.row("torch", 2**12), result.row("torch_copy", 2**12)
    for r in (ref, row):
        assert r.samples == 30 and r.ms_ci_low <= r.ms_median <= r.ms_ci_high
    assert ref.vs_ref_low is None  # the reference against itself is 1.00 by definition, not a measurement
    assert row.vs_ref_low <= row.vs_ref <= row.vs_ref_high
    # The table marks a ratio whose interval holds 1.00, and only such a ratio. Both torch_copy rows are set:
    # the measured ratio of the other shape may itself be a tie (two copies of one sum often are).
    other = result.row("torch_copy", 2**10)
    other.vs_ref, other.vs_ref_low, other.vs_ref_high = 1.30, 1.25, 1.36
    row.vs_ref, row.vs_ref_low, row.vs_ref_high = 1.01, 0.97, 1.04
    tie = repr(result)
    row.vs_ref, row.vs_ref_low, row.vs_ref_high = 1.20, 1.15, 1.26
    apart = repr(result)
    assert any(x.startswith("torch_copy") and "1.01x ≈" in x for x in tie.splitlines())
    assert not any(x.startswith("torch_copy") and "≈" in x for x in apart.splitlines())
    assert "95% CI ms" in tie.splitlines()[3]


def test_tuple_outputs_are_compared_part_by_part_and_a_failing_part_is_named():
    # attention returns (O, lse): both parts are checked under the same rules.
    o, lse = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([0.5, 0.25])
    assert checks.compare((o.clone(), lse.clone()), (o, lse), 1e-4, 1e-5)
    bad = checks.compare((o.clone(), torch.tensor([0.5, float("nan")])), (o, lse), 1e-4, 1e-5)
    assert not bad and bad.reason.startswith("output[1]: ") and "NaN" in bad.reason
    assert "2 outputs" in checks.compare(o.clone(), (o, lse), 1e-4, 1e-5).reason
    assert "3 parts" in checks.compare((o, lse, lse), (o, lse), 1e-4, 1e-5).reason
    worst = checks.compare((o + 1e-3, lse.clone()), (o, lse), 1e-2, 1e-2)
    assert worst and worst.max_abs_err == pytest.approx(1e-3, rel=1e-3)
