"""The GPU path of %bench: real CUDA-event timing, OOM handling, re-check, memory and graphs.

Speed is not asserted (that is the benchmarks' job); these tests assert behaviour that a broken
timer or orchestrator would get wrong: statuses, which shapes are skipped, that a time is physically
possible, that the timer method matches the kernel length.
"""

from __future__ import annotations

import pytest

import labmagic
from labmagic.benchmark import Race, bench, roofline

pytestmark = pytest.mark.gpu


def _inputs(n):
    import torch

    return torch.randn(n, device="cuda"), torch.randn(n, device="cuda")


def _race(variants, shapes, **kw):
    import torch

    return Race(chapter="test_gpu", variants={"torch": torch.add, **variants}, ref="torch", make_inputs=_inputs,
                shapes=shapes, check_shapes=[1, 3, 1023, 2**20 + 7], flops=lambda n: n,
                nbytes=lambda n: 12 * n, **kw)


def test_oom_is_recorded_and_larger_shapes_are_skipped():
    import torch

    def torch_hog(a, b):
        # ~4 TiB of scratch at 2^20 elements: no GPU has it; 4 MiB at 2^10 is fine.
        scratch = torch.empty(a.numel() * a.numel(), dtype=torch.float32, device=a.device)
        del scratch
        return a + b

    result = bench(_race({"torch_hog": torch_hog}, [2**10, 2**20, 2**22]), check=False, save=False, plot=False)
    assert result.row("torch_hog", 2**10).status == "ok"
    oom = result.row("torch_hog", 2**20)
    assert oom.status == "oom" and "memory" in oom.error.lower()
    skipped = result.row("torch_hog", 2**22)
    assert skipped.status == "skipped" and "2^20" not in skipped.error and "1048576" in skipped.error
    assert result.row("torch", 2**22).status == "ok"  # the sweep went on
    assert "OOM" in repr(result)


def test_timing_is_physically_plausible_and_memory_is_counted():
    result = bench(_race({}, [2**24]), save=False, plot=False)
    row = result.row("torch", 2**24)
    assert row.status == "ok" and row.timer.startswith("cuda_event")
    spec = roofline.find_spec(labmagic.runtime.gpu_name())
    if spec:
        assert row.gbps < 1.05 * spec.bandwidth_gbps  # faster than the spec sheet means a broken timer
    assert row.gbps > 50
    assert row.ms_min <= row.ms_median <= row.ms_max
    assert row.peak_mem_bytes >= 4 * 2**24  # the output it allocates
    assert row.vs_ref == pytest.approx(1.0)


def test_short_kernels_are_timed_by_graph_replay():
    result = bench(_race({}, [2**10]), save=False, plot=False)
    assert result.row("torch", 2**10).timer.startswith("cuda_graph")


def test_recheck_after_timing_on_the_gpu():
    calls = {"n": 0}

    def torch_sneaky(a, b):
        calls["n"] += 1
        return a + b if calls["n"] <= 4 else a * b

    result = bench(_race({"torch_sneaky": torch_sneaky}, [2**20]), save=False, plot=False)
    row = result.row("torch_sneaky", 2**20)
    assert row.status == "mismatch" and row.error.startswith("re-check after timing")


def test_unwritten_output_is_poisoned_on_the_gpu():
    import torch

    def torch_lazy(a, b):
        # Writes nothing: without poisoning, the allocator could hand back a block holding a + b.
        return torch.empty_like(a)

    result = bench(_race({"torch_lazy": torch_lazy}, [2**20]), save=False, plot=False)
    assert result.row("torch_lazy", 2**20).status == "mismatch"


def test_an_output_left_on_the_host_is_a_mismatch_not_moved():
    def torch_on_host(a, b):
        return (a + b).cpu()  # right values, wrong place: the work (or a copy) happened off the GPU

    result = bench(_race({"torch_on_host": torch_on_host}, [2**10]), save=False, plot=False)
    row = result.row("torch_on_host", 2**10)
    assert row.status == "mismatch" and "on the host" in row.error and row.ms_median is None
    assert result.row("torch", 2**10).status == "ok"


def test_saves_csv_and_png_for_this_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    result = bench(_race({}, [2**16]))
    slug = labmagic.device_slug()
    assert result.csv_path == tmp_path / "results" / slug / "bench" / "test_gpu.csv"
    assert result.csv_path.exists() and result.png_path.exists()


def test_host_figures_mark_a_host_bound_variant_and_not_a_device_bound_one():
    """500 us of Python before a 2^12-element add is host-bound; torch's own add of 2^26 elements (~0.2 ms of memory
    traffic, ~10 us to launch) is not, and its isolated latency waits for the kernel."""
    import time

    import torch

    def torch_slow_host(a, b):
        time.sleep(0.0005)
        return torch.add(a, b)

    result = bench(_race({"torch_slow_host": torch_slow_host}, [2**12, 2**26]), save=False, plot=False)
    slow = result.row("torch_slow_host", 2**12)
    assert slow.status == "ok" and slow.ms_median < 0.05  # the device time: the sleep is not the kernel's
    assert slow.host_ms >= 0.5 and slow.isolated_ms >= slow.host_ms and slow.host_bound
    big = result.row("torch", 2**26)
    assert big.status == "ok" and big.host_ms < big.ms_median and not big.host_bound
    assert big.isolated_ms >= 0.9 * big.ms_median  # synchronized after the call: the kernel is in it
    assert "host-bound" in repr(result)
