"""What an exercise is, as data: the function the reader writes, the inputs it is checked on, the reference it must
match, and how fast it must run.

A submission is called as ``entry(*case.inputs, *outputs)``: the judge allocates every output itself (poisoned, in
guard zones: :mod:`.buffers`) and the submission writes its result into them, returning nothing or those same
buffers. That contract is what lets the judge see an unwritten element, a write past the end, a returned input and
a result kept from an earlier call.

Shapes are drawn when the grading starts (:attr:`Exercise.shapes` gets a seeded ``random.Random``), so a
submission cannot be tuned to a fixed list; each exercise plants the values that matter for it (masked rows,
ties, zeros, infinities) in :attr:`Exercise.make_case`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The languages an exercise is written in. CUDA C compiles on any machine and runs on a GPU; Triton runs on a
#: GPU or in Triton's interpreter.
LANGUAGES = ("cuda", "triton")


@dataclass(frozen=True)
class Output:
    """One output buffer the judge allocates, poisons and passes after the inputs, and compares afterwards.

    ``poison`` fills it before each call: a value the right answer never holds there (NaN by default; +inf for a
    softmax, whose masked rows are NaN; a byte pattern for integers). ``offset`` starts it that many elements past
    a 256-byte boundary (an exercise about misaligned rows). ``exact_nonfinite``: where the reference is NaN or
    +/-inf, the output must be the same (a fully masked row's NaN, an empty state's -inf), and only the finite
    elements are compared with ``rtol`` and ``atol``.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    rtol: float = 0.0
    atol: float = 0.0
    poison: float | int | None = None
    offset: int = 0
    exact_nonfinite: bool = False

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Case:
    """One call's inputs (positional arguments before the outputs), its outputs, and what it plants."""

    inputs: tuple
    outputs: tuple[Output, ...]
    note: str = ""


@dataclass(frozen=True)
class Bar:
    """How fast a correct submission must run at ``shape``: ``fraction`` of the speed of ``against``.

    ``against`` is ``"copy"`` (the measured device-to-device copy of ``results/<gpu>/ceilings.json``, applied to the
    exercise's bytes) or a variant of the chapter's race, whose median at ``rung_shape`` (default: ``shape``) and
    ``dtype`` in ``results/<gpu>/bench/<chapter>.csv`` is the reference time.
    """

    shape: tuple[int, ...]
    fraction: float
    against: str = "copy"
    dtype: str = ""
    rung_shape: str = ""


@dataclass(frozen=True)
class Exercise:
    """One exercise of a chapter.

    - ``entry``: the Python function the reader's cells define; ``signature`` shows how it is called.
    - ``shapes(rng, gpu)``: the check shapes, drawn at grading time (small ones without a GPU, where Triton runs in
      its interpreter).
    - ``make_case(shape, generator, device)``: fresh inputs and the outputs to allocate.
    - ``reference(*inputs)``: the expected outputs, one tensor per output, on the inputs' device.
    - ``bar``, ``nbytes(*shape)``, ``flops(*shape)``: the speed bar and the roofline floor no honest kernel beats.
    - ``requires_sass``: (opcode prefix, what it means) that the CUDA must compile to, checked without a GPU (a
      float4 copy must contain ``LDG.E.128``).
    - ``arch``: the architecture the CUDA needs (``sm_90a`` for ``wgmma``), or '' for any.
    - ``sanitize_shape``: where compute-sanitizer runs it on a GPU (an odd size; default: the first check shape).
    """

    name: str
    chapter: str
    title: str
    language: str
    entry: str
    signature: str
    shapes: Callable[[random.Random, bool], list[tuple[int, ...]]]
    make_case: Callable[[tuple, Any, str], Case]
    reference: Callable[..., tuple]
    bar: Bar
    nbytes: Callable[..., float]
    flops: Callable[..., float] | None = None
    requires_sass: tuple[tuple[str, str], ...] = ()
    arch: str = ""
    sanitize_shape: tuple[int, ...] | None = None
    #: Extra torch operators this exercise lets the submission call (by aten name), beyond allocation and views.
    allowed_ops: frozenset[str] = field(default_factory=frozenset)
    #: How a shape reads in messages (default ``4096x4096``), e.g. ``n=1000003, offset 3``.
    shape_text: Callable[[tuple], str] | None = None

    def __post_init__(self):
        if self.language not in LANGUAGES:
            raise ValueError(f"exercise {self.name}: language {self.language!r} is not one of {LANGUAGES}")

    @property
    def number(self) -> str:
        """The chapter's number, ``01``."""
        return self.chapter[:2]

    def label(self, shape) -> str:
        """A shape as messages and statements write it."""
        if self.shape_text is not None:
            return self.shape_text(tuple(shape))
        return "x".join(str(int(s)) for s in shape)
