"""Pallas on either machine: native (Triton lowering) on a GPU, interpret mode on a CPU.

Chapters call ``labmagic.pallas_call`` exactly like ``pl.pallas_call``; the only difference is the
``interpret`` default, so no chapter branches on the device. DLPack moves tensors between torch and JAX
without copies (on the GPU both see the same memory).
"""

from __future__ import annotations


def interpret() -> bool:
    """True when JAX has no GPU backend, so Pallas kernels must run in interpret mode."""
    import jax

    return jax.default_backend() == "cpu"


def pallas_call(*args, **kwargs):
    from jax.experimental import pallas as pl

    kwargs.setdefault("interpret", interpret())
    return pl.pallas_call(*args, **kwargs)


def to_jax(tensor):
    """A torch tensor as a JAX array, sharing memory (contiguous tensors only)."""
    import jax

    return jax.dlpack.from_dlpack(tensor.contiguous())


def to_torch(array):
    """A JAX array as a torch tensor, sharing memory."""
    import torch

    return torch.utils.dlpack.from_dlpack(array)
