"""labmagic.check_variants: a chapter's own check over its variants, dtypes and shapes, as a table."""

from __future__ import annotations

import pytest
import torch

import labmagic
from labmagic.runtime import has_gpu


def _check(fn, rows, cols, dtype=None, *, seed):
    """A chapter-style check: the variant against torch, an AssertionError saying what differs."""
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))
    x = x if dtype is None else x.to(dtype)
    got, want = fn(x), x.abs().amax(-1)
    assert torch.equal(got, want), f"max differs at {rows}x{cols}\nsecond line"
    return float(want.max())


def _needs_gpu(x):
    raise labmagic.NoGPUError("cuda_max needs a GPU")


def _not_installed(x):
    raise labmagic.DSLUnavailable("peer 0.1 is not installed")


VARIANTS = {"torch_max": lambda x: x.abs().amax(-1), "wrong": lambda x: x.amax(-1) + 1,
            "cuda_max": _needs_gpu, "peer_max": _not_installed}


def test_every_variant_dtype_and_shape_gets_a_line_with_its_outcome():
    seeds = []
    table = labmagic.check_variants(_check, VARIANTS, [(3, 5), (2, 7)], dtypes=(torch.float32, torch.float64),
                                    seed=lambda i, n: seeds.append((i, n)) or 10 * i + n,
                                    passed=lambda m: f"ok, max {m:.1f}")
    assert len(table.lines) == 16 and seeds[:3] == [(0, 0), (1, 1), (0, 2)]
    by = {(line.variant, line.dtype, line.shape): line for line in table.lines}
    assert by["torch_max", "float32", (3, 5)].ok and by["torch_max", "float32", (3, 5)].status.startswith("ok, max ")
    wrong = by["wrong", "float64", (2, 7)]
    assert wrong.ok is False and wrong.status == "MISMATCH: max differs at 2x7"
    assert by["cuda_max", "float32", (3, 5)].ok is None
    assert by["cuda_max", "float32", (3, 5)].status == "needs a GPU: skipped"
    assert by["peer_max", "float64", (2, 7)].status == "skipped: peer 0.1 is not installed"
    assert [f.variant for f in table.failures] == ["wrong"] * 4
    text = repr(table)
    assert "wrong     float64 2x7 MISMATCH: max differs at 2x7" in text and len(text.splitlines()) == 16


def test_an_input_a_variant_refuses_by_design_is_skipped_for_that_shape_only():
    def peer_max(x):
        if x.shape[1] % 2:
            raise labmagic.UnsupportedInput(f"peer_max takes even rows, not {x.shape[1]}")
        return x.abs().amax(-1)

    table = labmagic.check_variants(_check, {"peer_max": peer_max}, [(3, 5), (2, 8)])
    assert [(line.shape, line.ok, line.status) for line in table.lines] == [
        ((3, 5), None, "skipped: peer_max takes even rows, not 5"), ((2, 8), True, "ok")]
    assert table.require() is None


def test_require_fails_on_a_mismatch_and_gpu_only_keeps_it_in_the_table_on_a_gpu():
    table = labmagic.check_variants(_check, {"wrong": VARIANTS["wrong"]}, [(3, 5)])
    with pytest.raises(AssertionError, match=r"variants disagree with the reference: wrong 3x5"):
        table.require()
    if has_gpu():
        assert table.require(gpu_only=True) is None
    else:
        with pytest.raises(AssertionError, match="wrong 3x5"):
            table.require(gpu_only=True)
    ok = labmagic.check_variants(_check, {"torch_max": VARIANTS["torch_max"], "cuda_max": _needs_gpu}, [(3, 5)])
    assert ok.require() is None and not ok.failures


def test_the_summary_gives_one_line_per_variant_and_dtype():
    table = labmagic.check_variants(_check, {"torch_max": VARIANTS["torch_max"], "cuda_max": _needs_gpu},
                                    [(3, 5), (2, 7), (4, 4)], dtypes=(torch.float32,), summary=True)
    assert repr(table).splitlines() == ["torch_max float32 3 shapes: ok",
                                        "cuda_max  float32 3 shapes: needs a GPU: skipped"]


def test_a_bug_in_the_check_fails_require_with_its_traceback_and_an_empty_grid_is_refused():
    table = labmagic.check_variants(lambda fn, n, *, seed: fn(None), {"torch_max": VARIANTS["torch_max"]}, [(3,)])
    assert table.lines[0].status.startswith("ERROR: AttributeError: ")
    with pytest.raises(AssertionError, match="torch_max 3") as info:
        table.require()
    assert isinstance(info.value.__cause__, AttributeError)
    with pytest.raises(labmagic.LabError, match="no shapes or no dtypes"):
        labmagic.check_variants(_check, VARIANTS, [])


def test_a_crashing_variant_is_an_error_line_the_others_still_run_and_require_chains_its_exception():
    def broken(x):  # a peer library that rejects an input the chapter checks
        raise ValueError("Input N 5 is not divisible by vector size 4\nmore detail")

    table = labmagic.check_variants(_check, {"broken": broken, "torch_max": VARIANTS["torch_max"]}, [(3, 5), (2, 8)])
    assert [(line.variant, line.ok, line.status) for line in table.lines] == [
        ("broken", False, "ERROR: ValueError: Input N 5 is not divisible by vector size 4"),
        ("broken", False, "ERROR: ValueError: Input N 5 is not divisible by vector size 4"),
        ("torch_max", True, "ok"), ("torch_max", True, "ok")]
    with pytest.raises(AssertionError, match="broken 3x5, broken 2x8") as info:
        table.require()
    assert isinstance(info.value.__cause__, ValueError)  # the traceback of what it raised is not lost


def test_require_tolerates_the_variants_it_is_told_to_and_no_others():
    table = labmagic.check_variants(_check, {"wrong": VARIANTS["wrong"], "peer": VARIANTS["wrong"]}, [(3, 5)])
    with pytest.raises(AssertionError, match=r"disagree with the reference: wrong 3x5$"):
        table.require(tolerate=("peer",))
    assert table.require(tolerate=("peer", "wrong")) is None
    assert [f.variant for f in table.failures] == ["wrong", "peer"]  # still in the table
