"""Chapter 01's exercises: memory-bound elementwise kernels, judged against the copy ceiling.

1. ``scale_add`` (Triton): ``out = alpha * x + y``, the chapter's masked block with one more operand.
2. ``copy_float4`` (CUDA): a grid-stride copy that moves 16 bytes per load and store, and the ``n % 4`` tail.
3. ``add_bf16`` (CUDA): bf16 ``a + b`` in 16-byte vectors when the tensors start anywhere: a scalar head up to the
   first 16-byte boundary, vectors, a scalar tail.
"""

from __future__ import annotations

from ..spec import Bar, Case, Exercise, Output
from .draws import odd, randn, uniform

#: Element counts every 1-D exercise is checked on: a single element, fewer than a vector, and odd counts.
_TINY = [1, 3, 7]


def _sizes(rng, gpu: bool) -> list[tuple[int, ...]]:
    sizes = _TINY + [odd(rng, 500, 3000), odd(rng, 10_000, 40_000)]
    if gpu:
        sizes += [2**20 + odd(rng, 1, 999), odd(rng, 5_000_000, 20_000_000)]
    return [(n,) for n in sizes]


def _n(shape) -> str:
    return f"n={shape[0]}"


# -- 1. scale_add ---------------------------------------------------------------------------------------------------

def _scale_add_case(shape, generator, device) -> Case:
    (n,) = shape
    x, y = randn((n,), generator, device), randn((n,), generator, device)
    alpha = uniform(generator, device, -3.0, 3.0)
    return Case((x, y, alpha), (Output("out", (n,), "float32", rtol=1e-5, atol=1e-6),))


def _scale_add_ref(x, y, alpha):
    return ((alpha * x.double() + y.double()).float(),)


SCALE_ADD = Exercise(
    name="scale_add", chapter="01_vector_add", title="alpha * x + y in Triton", language="triton",
    entry="scale_add", signature="scale_add(x, y, alpha, out)",
    shapes=_sizes, make_case=_scale_add_case, reference=_scale_add_ref,
    bar=Bar((2**28,), 0.85), nbytes=lambda n: 12 * n, flops=lambda n: 2 * n, shape_text=_n,
)


# -- 2. copy_float4 -------------------------------------------------------------------------------------------------

def _copy_case(shape, generator, device) -> Case:
    (n,) = shape
    return Case((randn((n,), generator, device),), (Output("out", (n,), "float32"),))


def _copy_ref(x):
    return (x.clone(),)


COPY_FLOAT4 = Exercise(
    name="copy_float4", chapter="01_vector_add", title="A grid-stride float4 copy with a tail", language="cuda",
    entry="copy_float4", signature="copy_float4(x, out)",
    shapes=lambda rng, gpu: [(n,) for n in (1, 2, 3, 4, 5)] + _sizes(rng, gpu)[3:],
    make_case=_copy_case, reference=_copy_ref,
    bar=Bar((2**28,), 0.90), nbytes=lambda n: 8 * n,
    requires_sass=(("LDG.E.128", "16-byte loads: float4"), ("STG.E.128", "16-byte stores: float4")),
    sanitize_shape=(100_003,), shape_text=_n,
)


# -- 3. add_bf16 ----------------------------------------------------------------------------------------------------

def _bf16_sizes(rng, gpu: bool) -> list[tuple[int, ...]]:
    """(n, offset): n elements starting ``offset`` elements (2 bytes each) past a 16-byte boundary."""
    shapes = [(n, rng.randint(0, 7)) for (n,) in _sizes(rng, gpu)]
    return shapes + [(odd(rng, 1000, 5000), offset) for offset in (0, 1, 7)]


def _bf16_case(shape, generator, device) -> Case:
    import torch

    n, offset = shape
    a = randn((n + 16,), generator, device, torch.bfloat16)[offset:offset + n]
    b = randn((n + 16,), generator, device, torch.bfloat16)[offset:offset + n]
    out = Output("out", (n,), "bfloat16", rtol=2**-7, atol=1e-6, offset=offset)
    return Case((a, b), (out,), note=f"offset {offset}")


def _bf16_ref(a, b):
    import torch

    return ((a.float() + b.float()).to(torch.bfloat16),)


ADD_BF16 = Exercise(
    name="add_bf16", chapter="01_vector_add", title="bf16 add in 16-byte vectors, from any offset",
    language="cuda", entry="add_bf16", signature="add_bf16(a, b, out)",
    shapes=_bf16_sizes, make_case=_bf16_case, reference=_bf16_ref,
    bar=Bar((2**28, 3), 0.85), nbytes=lambda n, offset=0: 6 * n,
    requires_sass=(("LDG.E.128", "16-byte loads of 8 bf16"), ("STG.E.128", "16-byte stores of 8 bf16")),
    sanitize_shape=(100_003, 5), shape_text=lambda s: f"n={s[0]} at offset {s[1]}",
)

EXERCISES = [SCALE_ADD, COPY_FLOAT4, ADD_BF16]
