"""labmagic.require_tensor: a launcher's argument checks, one line each, before any launch (chapter 10 uses it)."""

from __future__ import annotations

import pytest
import torch

import labmagic
from labmagic import ArgumentError, require_tensor


def test_a_good_tensor_comes_back_as_it_is():
    x = torch.randn(8, 256).to(torch.bfloat16)
    assert require_tensor(x, "x", (torch.bfloat16,), dim=2, device="cpu") is x
    assert labmagic.require_tensor is require_tensor


@pytest.mark.parametrize("make, kwargs, words", [
    (lambda x: x.tolist(), {}, "x must be a torch tensor, got list"),
    (lambda x: x.float(), {}, "x must be bfloat16 or float16, got float32"),
    (lambda x: x[0], {"dim": 2}, "x must be 2-D, got shape (256,)"),
    (lambda x: x.t(), {}, "x must be contiguous (strides (1, 256)); pass .contiguous()"),
    (lambda x: x.view(-1)[1:9], {}, "x must start at a 16-byte aligned address (a sliced view?); pass .clone()"),
    (lambda x: x, {"device": "cuda"}, "x is on cpu, the kernel runs on cuda: pass x.to('cuda')"),
    (lambda x: x, {"device": torch.device("cuda", 0)}, "x is on cpu, the kernel runs on cuda: pass x.to('cuda')"),
    (lambda x: x, {"dim": 3}, "x must be 3-D, got shape (8, 256)"),
])
def test_each_misreading_is_refused_in_one_line(make, kwargs, words):
    x = torch.randn(8, 256).to(torch.bfloat16)
    with pytest.raises(ArgumentError) as info:
        require_tensor(make(x), "x", (torch.bfloat16, torch.float16), **kwargs)
    assert str(info.value) == words


def test_alignment_is_the_callers_choice():
    scale = torch.empty(9)[1:]  # 4 bytes in: fine for a scalar fp32 load, wrong for a 16-byte vector
    assert require_tensor(scale, "scale", (torch.float32,), align=4) is scale
    with pytest.raises(ArgumentError, match="16-byte aligned"):
        require_tensor(scale, "scale", (torch.float32,))


def test_a_device_given_as_a_string_or_a_torch_device_accepts_the_same_tensors():
    x = torch.randn(4, 64).to(torch.bfloat16)
    for device in ("cpu", torch.device("cpu"), None):
        assert require_tensor(x, "x", (torch.bfloat16,), device=device) is x


@pytest.mark.parametrize("a", [0, 1, 2, 127, 128, 129, 28672, 2**40 + 3])
@pytest.mark.parametrize("b", [1, 3, 32, 128, 256])
def test_the_host_grid_arithmetic_is_tritons(a, b):
    # labmagic.cdiv / next_power_of_2 stand in for triton's on the host (without its per-call dispatch): same values
    import triton

    assert labmagic.cdiv(a, b) == triton.cdiv(a, b)
    assert labmagic.next_power_of_2(a) == triton.next_power_of_2(a)
