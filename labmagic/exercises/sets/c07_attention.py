"""Chapter 07's exercises: FlashAttention's pieces.

1. ``decode_combine`` (Triton): the last step of flash-decoding, merging the splits' partial outputs by their
   logsumexps (chapter 03's merge rule, with a vector per state).
2. ``causal_flash`` (Triton): the causal mask of a FlashAttention forward, and the skip of the key blocks wholly
   above the diagonal, in a kernel that is otherwise given.
"""

from __future__ import annotations

import math

from ..spec import Bar, Case, Exercise, Output
from .draws import odd, randn

# -- 1. decode_combine ----------------------------------------------------------------------------------------------

def _combine_shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    """(splits, heads, D)."""
    found = [(1, 1, 64), (2, 3, 128), (7, 5, 64), (odd(rng, 3, 15), odd(rng, 10, 60), 128)]
    if gpu:
        found += [(odd(rng, 3, 31), odd(rng, 1000, 5000), 128), (odd(rng, 17, 63), odd(rng, 100, 300), 64)]
    return found


def _combine_case(shape, generator, device) -> Case:
    S, H, D = shape
    o_parts = randn((S, H, D), generator, device)
    lse_parts = randn((S, H), generator, device, scale=3.0) + 5.0
    notes = []
    if S > 1:
        lse_parts[1:, 0] = -math.inf  # head 0: every split but the first saw no key
        notes.append("head 0: one split with keys")
        if H > 1:
            lse_parts[-1, 1] = -math.inf
            notes.append("head 1: last split empty")
    outs = (Output("o", (H, D), "float32", rtol=1e-4, atol=1e-5), Output("lse", (H,), "float32", rtol=1e-5,
                                                                          atol=1e-5))
    return Case((o_parts, lse_parts), outs, note=", ".join(notes))


def _combine_ref(o_parts, lse_parts):
    import torch

    lse = torch.logsumexp(lse_parts.double(), dim=0)
    weights = torch.exp(lse_parts.double() - lse)  # exp(-inf) = 0 for a split without keys
    return (weights[:, :, None] * o_parts.double()).sum(0).float(), lse.float()


# -- 2. causal_flash ------------------------------------------------------------------------------------------------

def _flash_shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    """(B, H, S, D), causal, S_q = S_k."""
    found = [(1, 1, 1, 64), (1, 2, 37, 64), (2, 1, odd(rng, 40, 70), 64)]
    if gpu:
        found += [(1, 2, odd(rng, 200, 300), 128), (2, 3, odd(rng, 1000, 1100), 128), (1, 2, 4100, 64)]
    return found


def _flash_case(shape, generator, device) -> Case:
    import torch

    B, H, S, D = shape
    q, k, v = (randn((B, H, S, D), generator, device, torch.float16) for _ in range(3))
    # P is rounded to 16 bits before P V: up to 2**-9 max|v| off, an absolute bound (chapter 07's tolerance).
    outs = (Output("o", (B, H, S, D), "float16", rtol=2e-2, atol=1e-2), Output("lse", (B, H, S), "float32",
                                                                               atol=1e-3))
    return Case((q, k, v), outs)


def _flash_ref(q, k, v):
    import torch

    B, H, S, D = q.shape
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
    outs, lses = [], []
    for b in range(B):  # one batch at a time: S x S scores in float64 stay a few GB at the timed size
        scores = (q[b].double() @ k[b].double().transpose(-1, -2)) / math.sqrt(D)
        scores.masked_fill_(mask, -math.inf)
        lse = torch.logsumexp(scores, dim=-1)
        outs.append(torch.exp(scores - lse[..., None]) @ v[b].double())
        lses.append(lse)
        del scores
    return torch.stack(outs).half(), torch.stack(lses).float()


def _flash_flops(B, H, S, D):
    return 2 * B * H * S * S * D  # the causal half of 4 B H S^2 D


EXERCISES = [
    Exercise(
        name="decode_combine", chapter="07_attention", title="Merging flash-decoding's splits", language="triton",
        entry="decode_combine", signature="decode_combine(o_parts, lse_parts, o, lse)", shapes=_combine_shapes,
        make_case=_combine_case, reference=_combine_ref, bar=Bar((32, 32768, 128), 0.80),
        nbytes=lambda S, H, D: 4 * (S * H * D + S * H + H * D + H), flops=lambda S, H, D: 3 * S * H * D,
        shape_text=lambda s: f"{s[0]} splits x {s[1]} heads x D={s[2]}",
    ),
    Exercise(
        name="causal_flash", chapter="07_attention", title="The causal mask and its block skip", language="triton",
        entry="causal_flash", signature="causal_flash(q, k, v, o, lse)", shapes=_flash_shapes,
        make_case=_flash_case, reference=_flash_ref,
        bar=Bar((4, 16, 4096, 128), 0.85, "triton_flash_causal", "float16", rung_shape="4x16x4096x4096x128"),
        nbytes=lambda B, H, S, D: 2 * 4 * B * H * S * D + 4 * B * H * S, flops=_flash_flops,
        shape_text=lambda s: f"B={s[0]}, H={s[1]}, S={s[2]}, D={s[3]}",
    ),
]
