"""Helpers the chapters' exercise modules share: random sizes drawn at grading time, and inputs made from a seeded
generator on the grading device."""

from __future__ import annotations

import random


def odd(rng: random.Random, low: int, high: int) -> int:
    """An odd integer in [low, high]: odd sizes divide no tile, no vector width, no warp."""
    value = rng.randint(low, high) | 1
    return value if value <= high else value - 2


def randn(shape, generator, device: str, dtype=None, scale: float = 1.0):
    """Normal values from ``generator`` (on ``device``), as ``dtype``."""
    import torch

    x = torch.randn(*shape, generator=generator, device=device)
    if scale != 1.0:
        x = x * scale
    return x if dtype is None else x.to(dtype)


def uniform(generator, device: str, low: float, high: float) -> float:
    """One number from [low, high), drawn from ``generator``: a scalar argument that changes with every case."""
    import torch

    return float(low + (high - low) * torch.rand((), generator=generator, device=device).cpu())


def n_elements(shape) -> int:
    """The element count of a 1-D exercise's shape ``(n,)`` or ``(n, offset)``."""
    return int(shape[0])


def scale_rows(x, factors: tuple[float, ...] = (100.0, 1e-4)) -> list[str]:
    """Multiply row i of ``x`` by ``factors[i]`` in place, where ``x`` has that row (a large row, whose squares or
    exponentials overflow unless the kernel scales first, then a tiny one, where an epsilon shows); the notes say
    which rows were planted."""
    notes = []
    for i, factor in enumerate(factors):
        if x.shape[0] > i:
            x[i] *= factor
            shown = f"{factor:g}" if factor >= 1e-3 else f"{factor:.0e}".replace("e-0", "e-")
            notes.append(f"row {i} x{shown}")
    return notes
