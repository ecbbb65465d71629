"""A checked launch straight into ``cuLaunchKernel``: the arguments packed once into a buffer, no per-argument
marshalling on the way.

CuPy's ``Function.__call__`` inspects and converts every argument on every call (about 6.5 us of a launch on an
H200 host). The fast check (:mod:`labmagic.compiler.fast_check`) has already done that work: it hands over each
argument as a device address (a Python int) or a numpy scalar of the parameter's C type. So a kernel's launcher
learns the layout once, from the first fast-checked call, as one :class:`struct.Struct` with each argument in a slot
of its own size and alignment, and each call is one ``pack_into`` and one ``cuLaunchKernel`` (through CuPy's
driver binding, ``cupy.cuda.driver.launchKernel``) with an array of pointers to the slots.

The buffer is per thread: CuPy releases the GIL inside the driver call, and ``cuLaunchKernel`` reads the arguments
while it runs (it copies them before it returns, so one buffer serves every call of a thread).
"""

from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np

#: numpy kind -> {size in bytes: struct code} (standard sizes, little-endian: '<' below).
_CODES = {"i": {1: "b", 2: "h", 4: "i", 8: "q"}, "u": {1: "B", 2: "H", 4: "I", 8: "Q"},
          "f": {2: "e", 4: "f", 8: "d"}, "b": {1: "?"}}


def slot_code(value) -> str | None:
    """The struct code of one fast-checked argument: a device address (int) or a numpy scalar; None for anything
    else (that kernel keeps CuPy's launch)."""
    if type(value) is int:
        return "Q"
    if isinstance(value, np.generic):
        return _CODES.get(value.dtype.kind, {}).get(value.dtype.itemsize)
    return None


class DirectLaunch:
    """Launches one kernel (a :class:`~labmagic.compiler.cubin_load.CubinKernel` or a CuPy ``RawKernel``, or the
    ``Function`` either loaded) with arguments laid out like ``example``."""

    def __init__(self, function, example: tuple, launch=None, device: int | None = None, error=()):
        """``launch``: what calls the driver, with ``cupy.cuda.driver.launchKernel``'s arguments (that by default).
        ``device``: the current device as the caller reads it (CuPy's reading by default). ``error``: the exception
        class(es) a refused launch raises (CuPy's ``CUDADriverError`` with CuPy's launch; none otherwise)."""
        codes = [slot_code(v) for v in example]
        if None in codes:
            raise TypeError("an argument the direct launch cannot lay out")
        fmt, offsets, offset = "<", [], 0
        for code in codes:
            size = struct.calcsize("<" + code)
            pad = -offset % size  # each slot aligned to its size, as the kernel's own parameter would be
            fmt += "x" * pad + code
            offsets.append(offset + pad)
            offset += pad + size
        self.codes = tuple(codes)
        self._struct = struct.Struct(fmt)
        self._pack = self._struct.pack_into
        self._offsets = offsets
        self._function = getattr(function, "kernel", function).ptr  # the loaded Function, or a Function
        self._local = threading.local()
        if launch is None:
            from cupy.cuda import driver, runtime

            launch, error = driver.launchKernel, driver.CUDADriverError
            if device is None:
                device = runtime.getDevice()
        self._launch = launch
        self.error = error
        #: The device whose context holds ``function`` (a kernel loads one per device): launches elsewhere go
        #: through CuPy, which loads the kernel there.
        self.device = device
        #: ``launch(values, grid3, block3, smem, stream)``: what a call does, as a plain function over what it needs,
        #: each bound once here (a call through ``__call__`` pays the method's dispatch and five attribute reads).
        self.launch = self._launcher()

    def _new_buffers(self):
        data = ctypes.create_string_buffer(max(self._struct.size, 1))
        base = ctypes.addressof(data)
        pointers = (ctypes.c_void_p * max(len(self._offsets), 1))(*(base + o for o in self._offsets))
        # The arguments are packed through a memoryview made once: a ctypes object exports its buffer anew on every
        # pack_into, which cost a third of the pack. The view keeps ``data`` alive; ``pointers`` is kept with it.
        buffers = self._local.buffers = (memoryview(data).cast("B"), ctypes.addressof(pointers), pointers)
        return buffers

    def _launcher(self):
        pack, launch, function, local, new_buffers = (self._pack, self._launch, self._function, self._local,
                                                      self._new_buffers)

        def direct_launch(values: tuple, grid3: tuple, block3: tuple, smem: int, stream: int) -> None:
            try:
                view, params, _ = local.buffers
            except AttributeError:  # this thread's first launch of the kernel
                view, params, _ = new_buffers()
            pack(view, 0, *values)
            launch(function, grid3[0], grid3[1], grid3[2], block3[0], block3[1], block3[2], smem, stream, params, 0)

        return direct_launch

    def __call__(self, values: tuple, grid3: tuple, block3: tuple, smem: int, stream: int) -> None:
        self.launch(values, grid3, block3, smem, stream)
