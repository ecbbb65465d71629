"""Compiled kernels as Python callables: argument checking against the C signature, then a launch.

``kernel(a, b, c, n, grid=..., block=..., smem=0)`` checks every argument against the kernel's
declaration before anything reaches the GPU: a float64 tensor for ``const float*``, a CPU tensor, a
non-contiguous view, a misaligned pointer for ``float4*``, a missing or extra argument, a string for ``bool``
each raise one line naming the parameter; so does a grid that is not a whole number of the kernel's
``__cluster_dims__`` clusters. A type the table below does not know (``typedef float real``, a macro)
is checked as NVRTC resolved it (:mod:`.type_probe`), and refused where NVRTC could not say. The launch goes
through CuPy (which loads the CUBIN NVRTC produced from its bytes in memory, :mod:`.cubin_load`) on torch's current
stream, so it is ordered with torch work and is captured by torch's CUDA graphs.

A launch is paid for on every call, and a chapter's kernel called from a model is called often, so the checks
run in two tiers. On its first call a kernel compiles its signature, as NVRTC resolved it, into a fast check: one
function of straight-line code that reads, on every call, all that can differ between calls (each tensor's type,
dtype, device, contiguity and address; each value's type and range) and compares it with what the signature allows.
It passes only the common kinds (torch tensors, Python ints, floats and bools), and a tensor only of a dtype that
an earlier call passed the full check with: the full check below decides everything else, accepts more (CuPy
arrays, numpy scalars) and writes every message, so a refused argument raises exactly the error it always did.
Nothing is remembered per argument object: a new view, a moved tensor or a freed one is judged afresh.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ..errors import ArgumentError, LabError, NoGPUError
from ..runtime import has_gpu
from . import backend, binding, faults, nvrtc
from .binding import python_name
from .cubin_load import CubinKernel
from .direct_launch import DirectLaunch
from .fast_check import (
    BF16_MAX,
    BOOL,
    FLOAT,
    FULL,
    INT,
    POINTER,
    ParamPlan,
    bfloat16_bits,
    bfloat16_scalar,
    compile_fast_check,
)
from .ptx import cluster_dims
from .resources import Resources
from .signature import KernelDecl, Param, parse_kernels


class LaunchError(LabError, RuntimeError):
    """The driver refused the launch (bad configuration, too much shared memory, ...)."""


# C element type -> (accepted dtype names, vector width). dtype names are torch/numpy spellings.
_FLOAT32 = ("float32",)
_ELEMENT_TYPES: dict[str, tuple[tuple[str, ...], int]] = {
    "float": (_FLOAT32, 1), "float1": (_FLOAT32, 1), "float2": (_FLOAT32, 2), "float3": (_FLOAT32, 3),
    "float4": (_FLOAT32, 4),
    "double": (("float64",), 1), "double2": (("float64",), 2),
    "half": (("float16",), 1), "__half": (("float16",), 1), "half2": (("float16",), 2), "__half2": (("float16",), 2),
    "__nv_bfloat16": (("bfloat16",), 1), "nv_bfloat16": (("bfloat16",), 1), "__bf16": (("bfloat16",), 1),
    "__nv_bfloat162": (("bfloat16",), 2), "nv_bfloat162": (("bfloat16",), 2),
    "__nv_fp8_e4m3": (("float8_e4m3fn",), 1), "__nv_fp8_e5m2": (("float8_e5m2",), 1),
    "int": (("int32",), 1), "int32_t": (("int32",), 1), "signed": (("int32",), 1), "signed int": (("int32",), 1),
    "int2": (("int32",), 2), "int4": (("int32",), 4),
    "unsigned": (("uint32", "int32"), 1), "unsigned int": (("uint32", "int32"), 1),
    "uint32_t": (("uint32", "int32"), 1),
    "uint2": (("uint32", "int32"), 2), "uint4": (("uint32", "int32"), 4),
    "long long": (("int64",), 1), "long long int": (("int64",), 1), "int64_t": (("int64",), 1), "long": (("int64",), 1),
    "long int": (("int64",), 1),
    "unsigned long long": (("uint64", "int64"), 1), "uint64_t": (("uint64", "int64"), 1),
    "unsigned long": (("uint64", "int64"), 1), "unsigned long int": (("uint64", "int64"), 1),
    "size_t": (("uint64", "int64"), 1),
    "short": (("int16",), 1), "int16_t": (("int16",), 1), "unsigned short": (("uint16", "int16"), 1),
    "uint16_t": (("uint16", "int16"), 1),
    "char": (("int8", "uint8"), 1), "signed char": (("int8",), 1), "int8_t": (("int8",), 1), "char4": (("int8",), 4),
    "unsigned char": (("uint8",), 1), "uint8_t": (("uint8",), 1), "uchar4": (("uint8",), 4),
    "bool": (("bool",), 1),
}

# C scalar type passed by value -> numpy type it is marshalled as. long is 64-bit: CUDA follows the host (Linux).
_SCALAR_TYPES: dict[str, type] = {
    "float": np.float32, "double": np.float64, "__half": np.float16, "half": np.float16,
    "int": np.int32, "int32_t": np.int32, "signed": np.int32, "signed int": np.int32,
    "unsigned": np.uint32, "unsigned int": np.uint32, "uint32_t": np.uint32,
    "long long": np.int64, "long long int": np.int64, "int64_t": np.int64, "long": np.int64, "long int": np.int64,
    "unsigned long long": np.uint64, "uint64_t": np.uint64, "size_t": np.uint64,
    "unsigned long": np.uint64, "unsigned long int": np.uint64,
    "short": np.int16, "int16_t": np.int16, "unsigned short": np.uint16, "uint16_t": np.uint16,
    "char": np.int8, "signed char": np.int8, "int8_t": np.int8, "unsigned char": np.uint8, "uint8_t": np.uint8,
    "bool": np.bool_,
}
# bfloat16 by value: numpy has no such type, so the kernel gets the 16-bit pattern (see bfloat16_bits).
_BFLOAT16 = {"__nv_bfloat16", "nv_bfloat16", "__bf16"}
#: Types checked from the tables above; any other is asked of NVRTC.
KNOWN_TYPES = frozenset(_ELEMENT_TYPES) | frozenset(_SCALAR_TYPES) | _BFLOAT16 | {"void"}


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _scopes(name: str, namespace: str) -> list[str]:
    """``name`` as C++ looks it up from inside ``namespace``, innermost first: ``a::b::T``, ``a::T``, ``T``."""
    parts = namespace.split("::") if namespace else []
    return [f"{'::'.join(parts[:i])}::{name}" for i in range(len(parts), 0, -1)] + [name]


def type_probes(decls) -> list[str]:
    """The parameter types of ``decls`` that the tables do not know, spelled as NVRTC may find them."""
    probes: dict[str, None] = {}
    for decl in decls:
        for param in decl.params:
            if param.base not in KNOWN_TYPES:
                probes.update(dict.fromkeys(_scopes(param.base, decl.namespace)))
    return list(probes)


def _dtype_name(obj) -> str:
    """``float32`` for a torch tensor, a CuPy array or a numpy array alike."""
    return str(obj.dtype).removeprefix("torch.")


def _describe(obj) -> str:
    if _is_torch(obj):
        return f"a {obj.device.type.upper()} torch tensor ({_dtype_name(obj)}, shape {tuple(obj.shape)})"
    return f"{type(obj).__name__}"


def _is_torch(obj) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _normalize_dims(value, what: str, kernel: str) -> tuple[int, int, int]:
    dims = (value,) if _is_int(value) else tuple(value) if isinstance(value, (tuple, list)) else None
    if dims is None or not 1 <= len(dims) <= 3 or not all(_is_int(d) for d in dims):
        raise ArgumentError(f"{kernel}: {what}={value!r} must be an int or a tuple of 1 to 3 ints, "
                            f"got {type(value).__name__}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if min(dims) < 1:
        raise ArgumentError(f"{kernel}: {what}={value!r} has a dimension below 1 (an empty launch is a bug upstream)")
    return dims


_PAD = ((), (1, 1), (1,), ())


def _dims(value) -> tuple | None:
    """``(x, y, z)`` of an int or a tuple of 1 to 3 ints, each at least 1; None for anything else, which
    :func:`_normalize_dims` then accepts (a list, numpy ints) or refuses with its message. Types are tested
    exactly: ``True`` and ``1.0`` equal ``1`` but are not launch dimensions."""
    if type(value) is int:
        return (value, 1, 1) if value >= 1 else None
    if type(value) is tuple and 1 <= len(value) <= 3:
        for d in value:
            if type(d) is not int or d < 1:
                return None
        return value + _PAD[len(value)]
    return None


_NOT_SEEN = (object(), object(), None, None)
#: The launch dimensions a kernel remembers by identity: they cannot change in place.
_IMMUTABLE_DIMS = (int, tuple)


class CudaKernel:
    """One ``__global__`` entry point of a compiled cell."""

    def __init__(self, module: CudaModule, expression: str, symbol: str, decl: KernelDecl):
        self.module = module
        self.name = expression
        self.symbol = symbol
        self.decl = decl
        #: The CUDA source of the whole cell and the hashes of the headers it read; benchmarks hash it into a
        #: variant's provenance.
        self.__labmagic_source__ = module.result.provenance_text
        #: (args) -> marshalled args or None; compiled on the first call, when the signature's types are final.
        self._fast_check = self._first_fast_check
        self._plans: list[ParamPlan] = []
        self._function = None  # CuPy's handle, loaded on the first launch
        #: The direct launcher (labmagic.compiler.direct_launch), made on the first fast-checked launch; False where
        #: the arguments cannot be laid out for it (CuPy launches those).
        self._direct = None
        #: The largest dynamic shared memory the loaded function is known to allow: without asking, 48 KiB less the
        #: kernel's static shared memory (a block's static and dynamic bytes share the 48 KiB default).
        res = self.resources
        self._smem_ok = 48 * 1024 - (res.smem_static if res else 0)
        self._last_dims = _NOT_SEEN  # (grid, block as given, grid, block as (x, y, z)) of the last launch

    @functools.cached_property
    def cluster(self) -> tuple[int, int, int] | None:
        """``__cluster_dims__`` as (x, y, z), or None. Read from the PTX on the first launch, not at compile: a
        regex over a large module's PTX costs about 0.3 ms a kernel, which a re-run cached cell should not pay."""
        return cluster_dims(self.module.result.ptx, self.symbol)

    @property
    def resources(self) -> Resources | None:
        return self.module.result.resources.get(self.symbol)

    @property
    def signature(self) -> str:
        """``vecadd(const float* a, ...)``; ``f(float* x)`` for an overload named by a cast."""
        shown = binding.display_name(self.name)
        return binding.signature(self.decl, self.decl.qualified_name if shown != self.name else self.name)

    def __repr__(self) -> str:
        return f"<CudaKernel {self.signature} [{self.module.result.arch}]>"

    # -- argument checking ------------------------------------------------------------------------

    def check_args(self, args: tuple) -> list:
        """Validate ``args`` against the signature and return them marshalled: ``("ptr", address)`` per pointer,
        ``("val", numpy scalar)`` per value."""
        values = self._fast_check(args)
        if values is None:
            checked = self._check_all(args)
            self._learn(args)
            return checked
        return [("ptr" if plan.kind == POINTER else "val", v) for plan, v in zip(self._plans, values)]

    def _checked_values(self, args: tuple) -> tuple:
        """``args`` through the full check, as CuPy passes them: an address as a Python int (which CuPy sends as
        64 bits; numpy scalars would cost one object each), a value as the numpy scalar of its C type."""
        checked = self._check_all(args)
        self._learn(args)
        # An address at or above 2**63 fits no int64, which CuPy 13 turns an int into: pass it as uint64.
        return tuple(v if kind == "val" or v < 2**63 else np.uint64(v) for kind, v in checked)

    def _learn(self, args: tuple) -> None:
        """After ``args`` passed the full check: let the fast check take their kinds of tensors from now on."""
        for plan, value in zip(self._plans, args):
            plan.learn(value)

    def _first_fast_check(self, args: tuple) -> tuple | None:
        self._plans = [self._plan(param) for param in self.decl.params]
        self._fast_check = compile_fast_check(self.name, self._plans)
        return self._fast_check(args)

    def _plan(self, param: Param) -> ParamPlan:
        """What the fast check does with ``param``, from its type as NVRTC resolved it."""
        resolved = self._resolve(param)
        if resolved is None:
            return ParamPlan(FULL)
        base, pointer = resolved
        if pointer:
            return ParamPlan(POINTER, element=_ELEMENT_TYPES.get(base) if pointer == 1 else None)
        if base in _BFLOAT16:
            return ParamPlan(FLOAT, scalar=bfloat16_scalar, low=-BF16_MAX, high=BF16_MAX)
        np_type = _SCALAR_TYPES.get(base)
        if np_type is np.bool_:
            return ParamPlan(BOOL)
        if np_type is not None and issubclass(np_type, np.integer):
            info = np.iinfo(np_type)
            return ParamPlan(INT, scalar=np_type, low=int(info.min), high=int(info.max))
        if np_type is not None:
            largest = float(np.finfo(np_type).max)
            return ParamPlan(FLOAT, scalar=np_type, low=-largest, high=largest)
        return ParamPlan(FULL)

    def _check_all(self, args: tuple) -> list:
        """The full check: every kind of argument, every message."""
        params = self.decl.params
        if len(args) < len(params):
            missing = ", ".join(f"'{p.name}' ({p.ctype})" for p in params[len(args):])
            raise ArgumentError(f"{self.name}: missing argument {missing}; the kernel takes {self.signature}")
        if len(args) > len(params):
            raise ArgumentError(f"{self.name}: {len(args)} arguments given but the kernel takes {len(params)}: "
                                f"{self.signature}")
        checked = [self._check_one(p, a) for p, a in zip(params, args)]
        # Types first, for every argument, then placement: a dtype mistake is reported as such even on
        # a machine without a GPU, where placement can only say "needs a GPU".
        return [("ptr", self._place(*v)) if kind == "tensor" else (kind, v) for kind, v in checked]

    def _check_one(self, param: Param, value):
        where = f"{self.name}: argument '{param.name}' ({param.ctype})"
        resolved = self._resolve(param)
        if resolved is None:
            raise ArgumentError(f"{where}: labmagic cannot tell what type {param.base!r} is (NVRTC could not name it "
                                "from the end of the cell), so it cannot check this argument; declare the parameter "
                                "with a built-in type such as float* or int")
        base, pointer = resolved
        if pointer:
            return self._check_pointer(base, pointer, value, where)
        return self._check_scalar(base, value, where)

    def _resolve(self, param: Param) -> tuple[str, int] | None:
        """(type, levels of indirection) of ``param`` as NVRTC compiled it: typedefs and macros resolved."""
        if param.base in KNOWN_TYPES:
            return param.base, param.pointer
        types = self.module.result.types
        for written in _scopes(param.base, self.decl.namespace):
            if written in types:
                canonical = types[written]
                return canonical.rstrip("*").strip(), param.pointer + canonical.count("*")
        return None

    def _check_pointer(self, base: str, pointer: int, value, where: str):
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if not 0 <= int(value) < 2**64:
                raise ArgumentError(f"{where}: {value} is not a device address")
            return ("ptr", int(value))  # a raw device address: the caller knows what they do
        is_torch = _is_torch(value)
        if not is_torch and not any(hasattr(value, a) for a in ("__cuda_array_interface__", "__array_interface__")):
            raise ArgumentError(f"{where} needs a tensor or array, got {_describe(value)}")
        # A struct or a pointer to pointers has no dtype to check against.
        element = _ELEMENT_TYPES.get(base) if pointer == 1 else None
        dtype = _dtype_name(value)
        if element is not None and dtype not in element[0]:
            raise ArgumentError(f"{where} needs {' or '.join(element[0])} data, got {dtype}")
        contiguous = value.is_contiguous() if is_torch else _cupy_contiguous(value)
        if not contiguous:
            raise ArgumentError(
                f"{where} is not contiguous (strides {tuple(_strides(value))}); the kernel indexes memory linearly: "
                "pass .contiguous()"
            )
        return ("tensor", (value, element, where))

    def _no_gpu(self) -> NoGPUError:
        return NoGPUError(f"{self.name} needs a CUDA GPU to run; this machine has none "
                          f"(it was compiled for {self.module.result.arch})")

    def _place(self, value, element, where: str) -> int:
        """The device address of a checked tensor, once every argument's type has passed."""
        is_torch = _is_torch(value)
        on_gpu = (value.device.type == "cuda") if is_torch else hasattr(value, "__cuda_array_interface__")
        if not on_gpu:
            if not has_gpu():
                raise self._no_gpu()
            raise ArgumentError(f"{where} is {_describe(value)}; kernels read GPU memory: move it with .cuda()")
        pointer = value.data_ptr() if is_torch else value.__cuda_array_interface__["data"][0]
        if element is not None:
            width = element[1] * (value.element_size() if is_torch else value.dtype.itemsize)
            align = width if width in (2, 4, 8, 16) else 1
            if pointer % align:
                raise ArgumentError(f"{where} starts at an address not aligned to {align} bytes (a sliced view?): "
                                    "vector loads would fault")
        return pointer

    def _check_scalar(self, base: str, value, where: str):
        np_type = _SCALAR_TYPES.get(base)
        if np_type is None and base not in _BFLOAT16:
            raise ArgumentError(f"{where}: {base!r} is not an arithmetic type that labmagic can pass by value "
                                "(a struct?); pass it through a pointer")
        if _is_torch(value) or hasattr(value, "__cuda_array_interface__"):
            raise ArgumentError(f"{where} is a scalar but got {_describe(value)}")
        if np_type is np.bool_:
            # bool('false') is True and bool(None) is False: only a real truth value (or 0/1) is one.
            if isinstance(value, (bool, np.bool_)) or (_is_int(value) and int(value) in (0, 1)):
                return ("val", np.bool_(bool(value)))
            raise ArgumentError(f"{where} needs True or False, got {type(value).__name__} {value!r}")
        if np_type is not None and np.issubdtype(np_type, np.integer):
            if not _is_int(value):
                raise ArgumentError(f"{where} needs an int, got {type(value).__name__} {value!r}")
            info = np.iinfo(np_type)
            if not info.min <= int(value) <= info.max:
                raise ArgumentError(f"{where}: {value} does not fit in {base} [{info.min}, {info.max}]")
            return ("val", np_type(int(value)))
        if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, (bool, np.bool_)):
            raise ArgumentError(f"{where} needs a number, got {type(value).__name__} {value!r}")
        return ("val", _float_scalar(base, np_type, value, where))

    def _loaded(self, smem: int):
        """The CuPy function, loaded, allowed ``smem`` bytes of dynamic shared memory."""
        function = self._function
        if function is None:
            function = self._function = self.module.function(self.symbol)
            if self.cluster and math.prod(self.cluster) > 8:  # beyond the portable 8: the kernel must opt in
                _allow_large_clusters(function, self.name)
        if smem > self._smem_ok:
            if function.max_dynamic_shared_size_bytes < smem:
                function.max_dynamic_shared_size_bytes = smem
            self._smem_ok = max(self._smem_ok, smem)
        return function

    def max_active_clusters(self, block, smem: int = 0) -> int:
        """How many of this kernel's clusters (``__cluster_dims__``; without one, blocks) the current GPU can hold
        at once with ``block`` threads and ``smem`` bytes of dynamic shared memory: the grid of a persistent
        kernel. The driver answers (``cuOccupancyMaxActiveClusters``), since a cluster must fit in one GPC and so
        a count of SMs alone would over-promise: a persistent grid one cluster too large runs its last cluster
        after the others, doubling the time."""
        block3 = _normalize_dims(block, "block", self.name)
        smem = self._smem_bytes(smem)
        if not has_gpu():
            raise self._no_gpu()
        from cuda.bindings import driver as cu

        handle = _driver_handle(self._loaded(smem))
        cluster = self.cluster or (1, 1, 1)
        config = cu.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = cluster
        config.blockDimX, config.blockDimY, config.blockDimZ = block3
        config.sharedMemBytes = smem
        if self.cluster is None:  # the driver asks a kernel without __cluster_dims__ for the cluster's size
            attr = cu.CUlaunchAttribute()
            attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = 1, 1, 1
            config.attrs, config.numAttrs = [attr], 1
        err, count = cu.cuOccupancyMaxActiveClusters(handle, config)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise LaunchError(f"{self.name}: the driver could not size a grid of clusters {cluster} with "
                              f"block={block3} and smem={smem} ({err.name})")
        if count == 0:
            raise LaunchError(f"{self.name}: not one cluster of {math.prod(cluster)} blocks fits with block={block3} "
                              f"and smem={smem} B (registers, shared memory, or blocks per SM)")
        return int(count)

    def _smem_bytes(self, smem) -> int:
        """``smem`` as an int of bytes, or the error that says what it must be."""
        if not _is_int(smem) or smem < 0:
            raise ArgumentError(f"{self.name}: smem={smem!r} must be a number of bytes (an int >= 0)")
        return int(smem)

    # -- launch -------------------------------------------------------------------------------------

    def __call__(self, *args, grid, block, smem: int = 0):
        # The very grid and block objects of the last launch are still valid: an int or a tuple of ints cannot have
        # changed (a list could have, in place: it is never remembered).
        last = self._last_dims
        if grid is last[0] and block is last[1]:
            grid3, block3 = last[2], last[3]
        else:
            grid3, block3 = self._launch_dims(grid, block)
        if type(smem) is not int or smem < 0:
            smem = self._smem_bytes(smem)
        values = self._fast_check(args)
        direct = self._direct
        if direct and values is not None and smem <= self._smem_ok and faults.no_fault():
            # Warm: this kernel has launched directly before, so there is a GPU and the function is loaded; the
            # arguments passed the fast check. One reading of the current device serves both questions below.
            device_of, stream_of = _device_and_stream()
            device = device_of()
            if device == direct.device:
                try:
                    direct.launch(values, grid3, block3, smem, stream_of(device))
                except direct.error as exc:
                    raise self._launch_error(exc, grid3, block3, smem) from None
                faults.record(self.name, grid3, block3, smem)
                return
        self._launch_checked(args, values, grid3, block3, smem)

    def _launch_dims(self, grid, block) -> tuple[tuple, tuple]:
        """``grid`` and ``block`` as (x, y, z) each, checked; remembered with the objects given when both are ints
        or tuples (which cannot change in place), so the next launch with the same objects reads them back."""
        block3 = _dims(block) or _normalize_dims(block, "block", self.name)
        if block3[0] * block3[1] * block3[2] > 1024:
            raise ArgumentError(f"{self.name}: block={block} has {block3[0] * block3[1] * block3[2]} threads; "
                                "the limit is 1024")
        grid3 = _dims(grid) or _normalize_dims(grid, "grid", self.name)
        if self.cluster and any(g % c for g, c in zip(grid3, self.cluster)):
            raise ArgumentError(f"{self.name}: grid={grid} is not a whole number of clusters: the kernel's "
                                f"__cluster_dims__ is {self.cluster}, so each grid dimension must be a multiple "
                                "of the cluster's")
        if type(grid) in _IMMUTABLE_DIMS and type(block) in _IMMUTABLE_DIMS:
            self._last_dims = (grid, block, grid3, block3)
        return grid3, block3

    def _launch_checked(self, args, values, grid3, block3, smem) -> None:
        """Every launch that is not a warm direct one: the full check where the fast one passed on the call, the
        GPU and fault checks, the function loaded, the direct launcher made, or CuPy's launch."""
        fast = values is not None
        if not fast:
            values = self._checked_values(args)
        if not has_gpu():
            raise self._no_gpu()
        faults.check_context()
        function = self._loaded(smem)
        cupy = _cupy()
        try:
            direct = self._direct if fast else None
            if direct is None and fast:
                direct = self._direct = _direct_launch(function, values)
            device_of, stream_of = _device_and_stream()
            device = device_of()
            if direct and direct.device == device:  # straight into cuLaunchKernel
                direct(values, grid3, block3, smem, stream_of(device))
            else:
                # stream= rather than `with stream:`: the launch without entering and leaving CuPy's stream stack.
                function(grid3, block3, values, shared_mem=smem, stream=_cupy_stream(stream_of(device)))
        except cupy.cuda.driver.CUDADriverError as exc:
            raise self._launch_error(exc, grid3, block3, smem) from None
        faults.record(self.name, grid3, block3, smem)

    def _launch_error(self, exc, grid3, block3, smem) -> LabError:
        """What a launch the driver refused raises: the fault account for a sticky error, else the refusal."""
        if faults.is_sticky(exc):
            return faults.fault_error(exc)
        res = self.resources
        detail = f" ({res.registers} registers/thread, {res.smem_static} B static smem)" if res else ""
        return LaunchError(f"{self.name}<<<{grid3}, {block3}, {smem}>>> was refused by the driver: {exc}{detail}")


def _float_scalar(base: str, np_type, value, where: str):
    """``value`` as the floating type ``base`` (bfloat16 as its bits); a finite value that would become inf is
    refused rather than passed."""
    try:
        number = float(value)
    except OverflowError:  # an int beyond every float
        number = None
    if number is not None and base in _BFLOAT16:
        bits = bfloat16_bits(number)
        result, became_inf = np.uint16(bits), bits & 0x7FFF == 0x7F80
    elif number is not None:
        with np.errstate(over="ignore"):
            result = np_type(number)
        became_inf = math.isinf(result)
    if number is None or (became_inf and math.isfinite(number)):
        raise ArgumentError(f"{where}: {value} does not fit in {base}")
    return result


def _strides(value):
    return value.stride() if _is_torch(value) else value.strides


def _cupy_contiguous(value) -> bool:
    flags = getattr(value, "flags", None)
    return bool(flags["C_CONTIGUOUS"]) if flags is not None else True


@functools.lru_cache(maxsize=1)
def _cupy():
    try:
        import cupy
    except ImportError as exc:  # pragma: no cover - GPU machines install it with the gpu extra
        raise NoGPUError("launching needs CuPy: pip install 'labmagic[gpu-cu13]' (or gpu-cu12)") from exc
    return cupy


def _driver_handle(function):
    """The driver's ``CUfunction`` of a loaded CuPy function, for the driver calls CuPy does not wrap."""
    from cuda.bindings import driver as cu

    return cu.CUfunction(getattr(function, "kernel", function).ptr)


def _allow_large_clusters(function, name: str) -> None:
    """Let ``function`` launch clusters of more than 8 blocks (Hopper takes 16), as CUDA requires of each kernel
    that asks for them (``cudaFuncAttributeNonPortableClusterSizeAllowed``)."""
    from cuda.bindings import driver as cu

    (err,) = cu.cuFuncSetAttribute(
        _driver_handle(function), cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"{name}: this GPU refuses clusters of more than 8 blocks ({err.name}); Hopper and later "
                          "take 16")


def _direct_launch(function, values: tuple):
    """The kernel's direct launcher, or False when an argument has no slot layout (then CuPy launches it)."""
    try:
        return DirectLaunch(function, values, device=_device_and_stream()[0]())
    except TypeError:
        return False


@functools.cache
def _device_and_stream():
    """``(device_of, stream_of)``: ``device_of()`` is the current device, ``stream_of(device)`` the raw handle of
    torch's current stream on it (CuPy's current device and stream when torch is absent).

    ``torch.cuda.current_stream()`` builds a Stream object on every call; torch's own raw readers (what
    TorchInductor's generated code calls before each launch) return the numbers alone. They are private, so they
    are used only where they answer as the public calls do, and the public calls stand in for them elsewhere.
    Both libraries read the CUDA runtime's current device of the calling thread, so the direct launcher's device,
    read here too, compares with either."""
    try:
        import torch
    except ImportError:
        cupy = _cupy()
        return cupy.cuda.runtime.getDevice, lambda device: cupy.cuda.get_current_stream().ptr
    public = torch.cuda.current_stream().cuda_stream  # also initialises torch's CUDA state, once
    raw, device = getattr(torch._C, "_cuda_getCurrentRawStream", None), getattr(torch._C, "_cuda_getDevice", None)
    try:
        if raw is not None and device is not None and raw(device()) == public:
            return device, raw
    except (TypeError, RuntimeError):
        pass
    return torch.cuda.current_device, lambda index: torch.cuda.current_stream(index).cuda_stream


class _StreamHandle:
    """The CUDA stream protocol (``__cuda_stream__``) around a raw handle, for CuPy's from_external."""

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


@functools.lru_cache(maxsize=64)
def _cupy_stream(handle: int):
    cupy = _cupy()
    if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy >= 14
        return cupy.cuda.Stream.from_external(_StreamHandle(handle))
    return cupy.cuda.ExternalStream(handle)


@dataclasses.dataclass
class CudaModule:
    """The kernels of one compiled cell. ``module.vecadd`` or ``module["gemm<float, 64>"]``."""

    result: nvrtc.CompileResult
    kernels: dict[str, CudaKernel] = dataclasses.field(default_factory=dict)
    _functions: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def source(self) -> str:
        return self.result.source

    def __getattr__(self, name):
        kernels = self.__dict__.get("kernels", {})
        for expression, kernel in kernels.items():
            if python_name(expression) == name:
                return kernel
        known = ", ".join(map(python_name, kernels)) or "none"
        raise AttributeError(f"no kernel {name!r} in this module; it has {known}")

    def __getitem__(self, expression: str) -> CudaKernel:
        return self.kernels[expression]

    def function(self, symbol: str) -> CubinKernel:
        """The kernel ``symbol``, loaded from the compiled bytes in memory on first launch (once per process, CUBIN
        and device; :mod:`.cubin_load`), never from a file."""
        if symbol not in self._functions:
            self._functions[symbol] = CubinKernel(self.result.key, self.result.cubin, symbol)
        return self._functions[symbol]

    def _repr_html_(self) -> str:
        from ..display.module_report import module_html

        return module_html(self)

    def __repr__(self) -> str:
        from ..display.module_report import module_text

        return module_text(self)


def compile_module(
    source: str, arch: str | None = None, options=(), name_expressions=(), lineinfo: bool = True, first_line: int = 1,
    timeout_s: float | None = None, memory_gb: float | None = None,
) -> CudaModule:
    """Compile ``source`` and wrap each ``__global__`` entry point that NVRTC compiled (and each name expression)
    as a callable. ``timeout_s`` and ``memory_gb`` bound NVRTC (see :func:`labmagic.compiler.nvrtc.compile`). The
    compiler is the platform's (:func:`labmagic.compiler.backend.compiler`): NVRTC, or a one-line refusal on ROCm."""
    compile_source = backend.compiler()
    bound = binding.targets(parse_kernels(source), name_expressions)
    result = compile_source(source, arch=arch, options=tuple(options), name_expressions=tuple(name_expressions),
                            lineinfo=lineinfo, first_line=first_line, type_probes=type_probes(bound.values()),
                            timeout_s=timeout_s, memory_gb=memory_gb)
    module = CudaModule(result)
    for expression, symbol in result.lowered.items():
        if expression in bound:  # NVRTC knows it: a kernel the scanner found under #if 0 is not here
            module.kernels[expression] = CudaKernel(module, expression, symbol, bound[expression])
    binding.check_python_names(module.kernels)
    return module
