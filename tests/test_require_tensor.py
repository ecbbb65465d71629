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
