"""The launch's fast path: each kernel's argument check, generated once from its signature as straight-line code.

A call's arguments take the fast check when each is a common kind it knows passes (a tensor of a dtype the full
check has passed for that parameter, on the GPU, contiguous and aligned; an int, bool or float in its C type's
range); anything else returns None and takes the full check in :mod:`labmagic.compiler.kernel`, which writes every
error message. Nothing is remembered per tensor object: each call reads all that can differ between calls.
"""

from __future__ import annotations

import dataclasses
import linecache
import math
import sys
from collections.abc import Callable

import numpy as np


def bfloat16_bits(value: float) -> int:
    """The bits of ``value`` rounded to bfloat16: to nearest, ties to even, from the value itself.

    Rounding to float32 first and then to bfloat16 would round twice (1 + 2**-8 + 2**-30 would land on the tie
    1 + 2**-8 and go down to 1.0). Rounding to float32 *to odd* keeps the sticky bit, so the second rounding is
    exact: float32 carries more than 8 + 2 bits of bfloat16's precision.
    """
    if math.isnan(value):
        return 0xFFC0 if math.copysign(1.0, value) < 0 else 0x7FC0
    with np.errstate(over="ignore"):
        single = np.float32(value)
    if np.isfinite(single) and float(single) != value and not int(single.view(np.uint32)) & 1:
        single = np.nextafter(single, np.float32(math.copysign(np.inf, value - float(single))))
    bits = int(np.float32(single).view(np.uint32))
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF



# What the fast check does with a parameter.
POINTER, INT, BOOL, FLOAT, FULL = range(5)
#: Largest finite bfloat16 (0x7F7F): a value no larger in magnitude rounds to a finite one.
BF16_MAX = 3.3895313892515355e38
#: Numpy scalars remembered per int parameter (sizes and counts repeat from call to call); cleared when full.
INT_MEMO_SIZE = 256
#: Tensor types the fast check reads directly, added as calls with them pass the full check (see fast_tensor_type).
FAST_TENSOR_TYPES: set[type] = set()


def fast_tensor_type(cls: type) -> bool:
    """``torch.Tensor`` itself, or a torch subclass that turns ``__torch_function__`` off (``nn.Parameter``,
    ``nn.Buffer``): for these ``dtype``, ``is_cuda``, ``is_contiguous()`` and ``data_ptr()`` are torch's own, so
    reading them says what the full check would find. A subclass with its own ``__torch_function__`` may answer
    differently each time it is asked: it takes the full check every call."""
    torch = sys.modules.get("torch")
    return (torch is not None and issubclass(cls, torch.Tensor) and cls.__module__.startswith("torch")
            and (cls is torch.Tensor or cls.__torch_function__ is torch._C._disabled_torch_function_impl))


@dataclasses.dataclass
class ParamPlan:
    """What the fast check does with one parameter."""

    kind: int
    #: Pointers: the element type's (dtype names, vector width), None where there is no dtype to check (a struct, a
    #: pointer to pointers), as in _check_pointer.
    element: tuple | None = None
    #: Pointers: dtype -> alignment mask (``address & mask`` must be 0), for each dtype a call has passed the full
    #: check with. Depends on the dtype alone, so it cannot go stale; a dtype not in it takes the full check.
    masks: dict = dataclasses.field(default_factory=dict)
    #: Values: makes the numpy scalar passed to the kernel (its C type's, or the bits of a bfloat16).
    scalar: Callable | None = None
    #: Values: the range the fast check passes, the C type's (ints) or its finite one (floats: a number in it cannot
    #: round to inf, the one refusal _float_scalar makes; outside it, and NaN, the full check decides).
    low: float = 0
    high: float = 0
    #: Ints: int -> its numpy scalar (making one costs about 0.2 us).
    memo: dict = dataclasses.field(default_factory=dict)

    def learn(self, value) -> None:
        """Remember what a call that passed the full check says about ``value``'s kind of tensor."""
        cls = type(value)
        if self.kind != POINTER or not (cls in FAST_TENSOR_TYPES or fast_tensor_type(cls)):
            return
        width = self.element[1] * value.element_size() if self.element is not None else 1
        self.masks[value.dtype] = (width if width in (2, 4, 8, 16) else 1) - 1  # as _place computes it
        FAST_TENSOR_TYPES.add(cls)


def bfloat16_scalar(number: float):
    return np.uint16(bfloat16_bits(number))


def remember_scalar(memo: dict, value: int, scalar):
    if len(memo) >= INT_MEMO_SIZE:
        memo.clear()
    memo[value] = result = scalar(value)
    return result


#: The fast check's code for one parameter ``v{i}``, which it leaves, marshalled, in ``a{i}``. Python has no
#: cheaper way to run a check than as straight-line code: a loop over a plan costs twice as much per argument.
_PARAM_CODE = {
    # A tensor first: the common case pays one type test, not two; a raw device address (an int) second.
    POINTER: """\
    t = type(v{i})
    if t in tensor_types:
        mask = masks{i}.get(v{i}.dtype)
        if mask is None or not v{i}.is_cuda or not v{i}.is_contiguous():
            return None
        a{i} = v{i}.data_ptr()
        if a{i} & mask:
            return None
    elif t is int:  # a raw device address
        if not 0 <= v{i} < 0x8000000000000000:
            return None
        a{i} = v{i}
    else:
        return None
""",
    INT: """\
    if type(v{i}) is not int or not {low!r} <= v{i} <= {high!r}:
        return None
    a{i} = memo{i}.get(v{i})
    if a{i} is None:
        a{i} = remember(memo{i}, v{i}, scalar{i})
""",
    BOOL: """\
    if v{i} is True:
        a{i} = np.True_
    elif v{i} is False:
        a{i} = np.False_
    else:
        return None
""",
    FLOAT: """\
    if (type(v{i}) is not float and type(v{i}) is not int) or not {low!r} <= v{i} <= {high!r}:
        return None
    a{i} = scalar{i}(float(v{i}))
""",
}


def never(args):
    return None


def compile_fast_check(name: str, plans: list[ParamPlan]) -> Callable:
    """A function of the call's ``args`` that returns them marshalled where each is a common kind that passes, and
    None to send the call to the full check. It reads, on every call, all that can differ between calls: each
    tensor's type, dtype, device, contiguity and address, each value's type and range."""
    if any(plan.kind == FULL for plan in plans):
        return never
    count = len(plans)
    code = [f"def fast_check(args):\n    if len(args) != {count}:\n        return None\n"]
    if count:
        code.append(f"    {', '.join(f'v{i}' for i in range(count))}, = args\n")
    namespace = {"np": np, "tensor_types": FAST_TENSOR_TYPES, "remember": remember_scalar}
    for i, plan in enumerate(plans):
        namespace.update({f"masks{i}": plan.masks, f"memo{i}": plan.memo, f"scalar{i}": plan.scalar})
        code.append(_PARAM_CODE[plan.kind].format(i=i, low=plan.low, high=plan.high))
    code.append(f"    return ({''.join(f'a{i}, ' for i in range(count))})\n")
    source = "".join(code)
    filename = f"<labmagic fast check of {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for tracebacks
    exec(compile(source, filename, "exec"), namespace)
    return namespace["fast_check"]
