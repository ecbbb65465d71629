"""benchmarks/decode_overhead.py and benchmarks/gemm_duel.py, the parts that decide what their rows say.

decode_overhead.py's copy and read references are the size-matched ceilings the chapter quotes (a copy of 32 MB
at 78.6% of the copy ceiling): each must move exactly the weight's bytes, counted as the 2 GiB ceiling counts
them. gemm_duel.py's verdict turns a ratio's interval into "ahead", "level" or "behind". Both scripts, run
without a GPU, say so and write no results file (an empty CSV over a measured one would lose rows).
"""

from __future__ import annotations

import pytest
import torch
from benchscripts import load_script


@pytest.mark.parametrize("weight_bytes", [2 * 4096 * 256, 2 * 4096 * 4096])
def test_the_copy_reference_moves_the_weights_bytes_half_read_half_written(weight_bytes):
    fn, make = load_script("decode_overhead").reference("copy", weight_bytes, device="cpu")
    src, dst = make()
    assert src.dtype == dst.dtype == torch.bfloat16
    assert src.numel() * 2 + dst.numel() * 2 == weight_bytes  # read + written, as the copy ceiling counts
    assert src.abs().sum() > 0 and not torch.equal(src, dst)  # random, not zeros; dst not already the answer
    assert fn(src, dst) is dst and torch.equal(dst, src)


def test_the_read_reference_reads_the_weights_bytes_once():
    fn, make = load_script("decode_overhead").reference("read", 2 * 4096 * 256, device="cpu")
    (x,) = make()
    assert x.dtype == torch.bfloat16 and x.numel() * 2 == 2 * 4096 * 256
    total = fn(x)
    assert total.dtype == torch.float32 and total.numel() == 1
    torch.testing.assert_close(total, x.double().sum().float(), rtol=1e-3, atol=1e-2)


def test_an_unknown_reference_names_the_known_ones():
    with pytest.raises(ValueError, match=r"no reference 'memset'; there are \('copy', 'read'\)"):
        load_script("decode_overhead").reference("memset", 1024, device="cpu")


@pytest.mark.parametrize("low, high, expected", [
    (1.001, 1.03, "ahead"), (0.98, 1.01, "level"), (0.97, 0.999, "behind"), (1.0, 1.02, "level"),
    (None, None, "unknown"),
])
def test_the_duel_verdict_reads_where_the_interval_lies(low, high, expected):
    assert load_script("gemm_duel").verdict(low, high) == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU path")
@pytest.mark.parametrize("name, argv", [("decode_overhead", None), ("gemm_duel", [])])
def test_without_a_gpu_the_scripts_say_so_and_write_nothing(name, argv, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))  # results/ would land here
    module = load_script(name)
    assert (module.main() if argv is None else module.main(argv)) in (None, 0)
    assert "no GPU" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
