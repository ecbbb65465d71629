"""Output buffers the judge owns: poisoned before each call, inside guard zones, and checked after it.

Each output is a view into a larger buffer: ``GUARD_BYTES`` of a guard pattern before it and after it. The view is
filled with the output's poison (NaN, or what :class:`~labmagic.exercises.spec.Output` names), so an element the
submission forgets to write keeps a value the reference never has; after the call the guards must still hold their
pattern, so a kernel that writes one element past the end (a tail handled wrongly, a guard off by one) is caught on
any machine, without a sanitizer. (Writes farther away than the guards are compute-sanitizer's to find, on a GPU.)

The same module answers the aliasing questions: does a returned tensor share memory with an input, and did the
call change its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bytes of guard pattern on each side of an output.
GUARD_BYTES = 256
#: The guard pattern's byte. Different from every poison, so a write of the poison itself is seen too.
GUARD_BYTE = 0xA5
#: The byte integer outputs are poisoned with when the exercise names no poison (0x5A: 90 as int8).
INT_POISON_BYTE = 0x5A


def torch_dtype(name: str):
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{name!r} is not a torch dtype")
    return dtype


@dataclass
class Guarded:
    """One output: ``tensor`` is what the submission gets; ``buffer`` holds it between the guards."""

    spec: object  # labmagic.exercises.spec.Output
    buffer: object
    tensor: object
    lead: int  # bytes of the buffer before the tensor
    tail: int  # bytes after it

    def poison(self) -> None:
        """Fill the output with its poison again (before a call)."""
        import torch

        value = self.spec.poison
        if value is not None:
            self.tensor.fill_(value)
        elif self.tensor.is_floating_point():
            self.tensor.fill_(float("nan"))
        elif self.tensor.numel():
            self.tensor.view(-1).view(torch.uint8).fill_(INT_POISON_BYTE)

    def guard_damage(self) -> str | None:
        """How the guards were written to, in words, or None when they are intact."""
        import torch

        raw = self.buffer.view(torch.uint8)
        before, after = raw[: self.lead], raw[raw.numel() - self.tail:]
        bad_before = (before != GUARD_BYTE).nonzero()
        bad_after = (after != GUARD_BYTE).nonzero()
        name = self.spec.name
        if bad_after.numel():
            first = int(bad_after[0])
            return (f"writes outside its output: {int(bad_after.numel())} byte(s) changed in the {self.tail} bytes "
                    f"after the end of `{name}`, the first {first} byte(s) past its end")
        if bad_before.numel():
            last = int(bad_before[-1])
            return (f"writes outside its output: {int(bad_before.numel())} byte(s) changed in the {self.lead} bytes "
                    f"before the start of `{name}`, the last {self.lead - last} byte(s) before it")
        return None


def allocate(spec, device: str) -> Guarded:
    """A poisoned output for ``spec`` (an :class:`~labmagic.exercises.spec.Output`) inside guard zones."""
    import torch

    dtype = torch_dtype(spec.dtype)
    size = torch.empty((), dtype=dtype).element_size()
    pad = GUARD_BYTES // size
    total = pad + spec.offset + spec.numel + pad
    buffer = torch.empty(total, dtype=dtype, device=device)
    buffer.view(torch.uint8).fill_(GUARD_BYTE)
    start = pad + spec.offset
    tensor = buffer[start:start + spec.numel].view(spec.shape)
    guarded = Guarded(spec, buffer, tensor, start * size, pad * size)
    guarded.poison()
    return guarded


def extent(t) -> tuple[int, int]:
    """[first byte, one past the last byte) that a tensor's elements occupy."""
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    span = sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride())) + 1
    return (t.data_ptr(), t.data_ptr() + span * t.element_size())


def overlaps(a, b) -> bool:
    """Do two tensors share any byte of memory (on the same device)?"""
    if a.device != b.device:
        return False
    (a0, a1), (b0, b1) = extent(a), extent(b)
    return a0 < b1 and b0 < a1


def tensors_in(value) -> list:
    """The torch tensors in a value, a tuple or a list (one level deep)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def snapshot(inputs) -> list:
    """Copies of the tensor inputs' bytes, to see afterwards whether the call changed them."""
    import torch

    return [_bytes(x).clone() if isinstance(x, torch.Tensor) else None for x in inputs]


def _bytes(x):
    import torch

    return x.detach().contiguous().view(-1).view(torch.uint8)


def changed_inputs(inputs, before, names) -> list[str]:
    """Names of the tensor inputs whose bytes differ from ``before``."""
    import torch

    changed = []
    for x, old, name in zip(inputs, before, names):
        if old is not None and not torch.equal(_bytes(x), old):
            changed.append(name)
    return changed
