"""labmagic.check_cases: a chapter's cases against its own reference, every case run, one failure at the end."""

from __future__ import annotations

import pytest
import torch

import labmagic
from labmagic.benchmark.case_checks import check_cases


def _check(variant, M, N, seed, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    A = torch.randn(M, N, generator=gen).to(dtype)
    out = variant(A)
    ref = A.double() * 2
    torch.testing.assert_close(out.double(), ref, rtol=1e-3, atol=1e-3)
    return (out.double() - ref).abs().max().item()


def _needs_gpu(A):
    raise labmagic.NoGPUError("cuda_x needs a CUDA GPU")


def _no_dsl(A):
    raise labmagic.DSLUnavailable("helion: not installed on this machine")


def test_every_case_runs_and_every_mismatch_is_named_once_at_the_end():
    lines = []
    cases = [("twice", lambda A: A * 2, (3, 5), torch.float32),
             ("wrong", lambda A: A * 2 + 1, (4, 7), torch.float32),
             ("gpu", _needs_gpu, (3, 5), torch.float32),
             ("dsl", _no_dsl, (3, 5), torch.float32),
             ("wrong_too", lambda A: A * 3, (2, 2), torch.float64)]
    with pytest.raises(AssertionError) as failed:
        check_cases(cases, _check, out=lines.append)
    assert str(failed.value) == ("variants disagree with the reference: "
                                 "[('wrong', '4x7', 'float32'), ('wrong_too', '2x2', 'float64')]")
    assert lines[0].startswith("twice ") and " 3x5 " in lines[0] and "ok, max abs err 0.0e+00" in lines[0]
    assert "MISMATCH: Mismatched elements: 28 / 28 (100.0%)" in lines[1]
    assert lines[2].endswith("needs a GPU: skipped") and lines[3].endswith("skipped: not installed on this machine")
    assert lines[-1] == "5 checks, 2 mismatches"


def test_show_thins_out_passing_rows_only_and_each_case_gets_its_seed():
    seeds, lines = [], []

    def check(variant, M, N, seed, dtype):
        seeds.append(seed)
        return _check(variant, M, N, seed, dtype)

    cases = [(f"cfg {i}", lambda A: A * 2, (2, 3), torch.float32) for i in range(5)]
    rows = check_cases(cases, check, show=lambda i, name: i % 4 == 0, note="every 4th shown", out=lines.append)
    assert seeds == [7, 1007, 2007, 3007, 4007]
    assert [r.status for r in rows] == ["ok"] * 5
    assert [line.split()[:2] for line in lines[:-1]] == [["cfg", "0"], ["cfg", "4"]]
    assert lines[-1] == "5 checks, 0 mismatches (every 4th shown)"


def test_the_status_column_lines_up_past_fourteen_characters_of_shape():
    lines = []
    cases = [("a", lambda A: A * 2, (3, 5), torch.float32),
             ("b", lambda A, *_: A * 2, (3, 5, 1, 1, 1, 1, 1, 1), torch.float32)]

    def check(variant, M, N, *rest, seed, dtype):
        return _check(variant, M, N, seed, dtype)

    check_cases(cases, check, out=lines.append)
    assert lines[0].index("ok,") == lines[1].index("ok,") == len("a ") + len("3x5x1x1x1x1x1x1 ")


def test_a_refused_input_is_skipped_a_crash_is_an_error_and_a_tolerated_peer_does_not_fail_the_cell():
    def refuses(A):
        raise labmagic.UnsupportedInput("peer takes even rows only")

    def crashes(A):
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")

    lines = []
    cases = [("peer", refuses, (3, 5), torch.float32), ("peer", crashes, (4, 4), torch.float32),
             ("peer fp16", lambda A: A * 3, (2, 2), torch.float32), ("twice", lambda A: A * 2, (3, 5), torch.float32)]
    rows = check_cases(cases, _check, out=lines.append, tolerate=("peer",))
    assert [r.status for r in rows] == ["skipped", "error", "mismatch", "ok"]
    assert lines[0].endswith("skipped: peer takes even rows only")
    assert lines[1].endswith("ERROR: RuntimeError: CUDA error: an illegal memory access was encountered")
    assert lines[-1] == "4 checks, 2 mismatches, 2 of them a peer's"
    with pytest.raises(AssertionError, match=r"\[\('mine', '4x4', 'float32'\)\]") as failed:
        check_cases([("mine", crashes, (4, 4), torch.float32)], _check, out=lines.append)
    assert isinstance(failed.value.__cause__, RuntimeError)  # its traceback is kept
