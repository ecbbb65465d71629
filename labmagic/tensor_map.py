"""TMA tensor maps for ``%%cuda_kernel`` launches: the 128-byte ``CUtensorMap`` made on the host by the driver's
``cuTensorMapEncodeTiled``, handed to the kernel as a pointer into GPU memory.

A Hopper kernel's ``cp.async.bulk.tensor`` reads a tensor map that says where a 2-D tensor lives, its shape and
row pitch, the box one copy moves, and how the box is swizzled into shared memory. CUDA C passes it as a
``const __grid_constant__ CUtensorMap`` parameter; labmagic's launch passes pointers and scalars only, so the map
travels in GPU memory instead (a ``uint8`` tensor of 128 bytes, 64-byte aligned), and the kernel takes
``const void* map``. TMA accepts a map in global memory; the launch boundary makes the host's copy visible.

Encoding a map costs a driver call and copying it to the GPU a transfer, so maps are cached by everything they
encode (address, shape, pitch, box, swizzle): a launcher calls :func:`tensor_map_2d` on every launch and pays a
dict lookup. A map names an address, not a tensor: the cache holds no tensor alive, and a new tensor at the same
address with the same shape is described by the same bytes. The cache is large (4096 maps, 2 MB of GPU memory):
``%bench`` rotates up to 256 input sets to keep the L2 cold, two or three maps each, and a cache smaller than
that misses on every call (chapter 06's first H200 run timed 94-117 us at 512^3 that way, for kernels of 13 us).
The copy to the GPU goes from pinned memory without blocking, so a map made inside CUDA graph capture is
captured as a copy instead of failing the capture; such a map holds its bytes only once the graph replays, so it is
not cached. A map already cached when a graph is captured is used as it is: the graph gets no copy node (which would
add a transfer to every replay, and ``%bench``'s graph timer would count it as the kernel's time: chapter 06's
``wgmma`` decode kernel measured 9.0 us of fixed cost per call that way against 3.0 us without,
``benchmarks/decode_overhead.py``), and the map is kept alive for the graph's sake even if the cache later drops it.
The cache is shared by every thread that launches, under a lock.
"""

from __future__ import annotations

import collections
import threading

from .errors import ArgumentError, NoGPUError

#: Swizzle widths in bytes (0: none) -> the driver's CUtensorMapSwizzle name.
SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
#: torch dtype name -> the driver's CUtensorMapDataType name.
DTYPES = {"bfloat16": "BFLOAT16", "float16": "FLOAT16", "float32": "FLOAT32", "int8": "UINT8", "uint8": "UINT8"}
_CACHE_LIMIT = 4096
#: (address, dtype, rows, cols, pitch, box, swizzle, device) -> (map on the GPU, its pinned source), oldest first.
_CACHE: collections.OrderedDict = collections.OrderedDict()
#: (address, torch dtype, shape, strides, device, box, swizzle) of a tensor that passed the checks -> its _CACHE key
_CHECKED: dict = {}
#: Maps a captured graph reads, with their pinned sources: a captured copy reads its source at every replay, and a
#: cached map must outlive its eviction from the cache while a graph still launches kernels that read it.
_CAPTURED: list = []
_LOCK = threading.Lock()


def check_box(shape: tuple[int, int], element_size: int, box: tuple[int, int], swizzle: int) -> None:
    """Refuse, with the rule it breaks, a map the driver would reject with a bare CUDA_ERROR_INVALID_VALUE."""
    rows, cols = shape
    box_rows, box_cols = box
    if swizzle not in SWIZZLES:
        raise ArgumentError(f"swizzle={swizzle}: TMA swizzles 0, 32, 64 or 128 bytes")
    if not (1 <= box_rows <= 256 and 1 <= box_cols <= 256):
        raise ArgumentError(f"box={box}: each side of a TMA box is 1 to 256 elements")
    if (cols * element_size) % 16:
        raise ArgumentError(f"a row of {cols} x {element_size} B is not a multiple of 16 bytes: TMA needs 16-byte "
                            "row pitches (pad the last dimension)")
    if (box_cols * element_size) % 16:
        raise ArgumentError(f"box={box}: the box's inner side ({box_cols * element_size} B) must be a multiple of "
                            "16 bytes")
    if swizzle and box_cols * element_size > swizzle:
        raise ArgumentError(f"box={box}: with a {swizzle}-byte swizzle the box's inner side may be at most "
                            f"{swizzle} bytes, not {box_cols * element_size}")
    if rows < 1 or cols < 1:
        raise ArgumentError(f"an empty tensor ({rows} x {cols}) has no tensor map")


def tensor_map_2d(tensor, box: tuple[int, int], swizzle: int = 128):
    """The tensor map of a contiguous 2-D CUDA tensor (rows x cols, cols contiguous) for boxes of
    ``box = (box_rows, box_cols)`` elements, swizzled by ``swizzle`` bytes, with out-of-bounds elements read as
    zeros. Returns a 128-byte ``uint8`` CUDA tensor to pass where the kernel takes ``const void* map``.

    A tensor described before (same address, dtype, shape, strides, device, box and swizzle) skips the checks: it
    passed them then, and its map is one dictionary lookup away (a launcher's eager call pays this per operand)."""
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise ArgumentError(f"tensor_map_2d needs a torch tensor, got {type(tensor).__name__}")
    box = tuple(box)
    seen = (tensor.data_ptr(), tensor.dtype, tensor.shape, tensor.stride(), tensor.device, box, swizzle)
    key = _CHECKED.get(seen)
    if key is None:
        key = _checked_key(tensor, box, swizzle)
        with _LOCK:
            if len(_CHECKED) >= _CACHE_LIMIT:
                _CHECKED.clear()
            _CHECKED[seen] = key
    return _cached(key, torch.cuda.is_current_stream_capturing())


def _checked_key(tensor, box: tuple[int, int], swizzle: int) -> tuple:
    """The cache key of a tensor's map once it passes every check TMA needs; the ArgumentError of the first it fails."""
    if tensor.dim() != 2:
        raise ArgumentError(f"tensor_map_2d needs a 2-D tensor, got {tensor.dim()}-D {tuple(tensor.shape)}")
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        raise ArgumentError(f"tensor_map_2d: no TMA data type for {dtype} (known: {', '.join(DTYPES)})")
    if tensor.stride(1) != 1 or tensor.stride(0) < tensor.shape[1]:
        raise ArgumentError(f"tensor_map_2d needs rows of contiguous elements, got strides {tensor.stride()}")
    if tensor.device.type != "cuda":
        from .runtime import has_gpu

        if not has_gpu():
            raise NoGPUError("a TMA tensor map needs a CUDA GPU; this machine has none")
        raise ArgumentError(f"tensor_map_2d: the tensor is on {tensor.device}; move it with .cuda()")
    if tensor.data_ptr() % 16:
        raise ArgumentError("tensor_map_2d: the tensor starts at an address not aligned to 16 bytes (a sliced view?)")
    rows, cols = tensor.shape
    check_box((rows, tensor.stride(0)), tensor.element_size(), box, swizzle)
    pitch = tensor.stride(0) * tensor.element_size()
    return (tensor.data_ptr(), dtype, rows, cols, pitch, box, swizzle, tensor.device.index or 0)


def _cached(key: tuple, capturing: bool):
    """The map on the GPU for ``key``: from the cache (least recently used out past ``_CACHE_LIMIT``), else
    encoded, and cached unless a graph is being captured."""
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None:
            _CACHE.move_to_end(key)
            if capturing:  # the graph reads this map at every replay: keep it alive past any eviction
                _CAPTURED.append(entry)
            return entry[0]
        entry = _encode(*key)
        if capturing:  # made now, its copy runs at replay: keep it out of the cache, and its pinned source alive
            _CAPTURED.append(entry)
            return entry[0]
        _CACHE[key] = entry
        if len(_CACHE) > _CACHE_LIMIT:
            _CACHE.popitem(last=False)
        return entry[0]


def _encode(address: int, dtype: str, rows: int, cols: int, pitch: int, box: tuple[int, int], swizzle: int,
            device: int):
    import numpy as np
    import torch
    from cuda.bindings import driver as cu

    err, tensor_map = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{DTYPES[dtype]}"),
        2, address, [cu.cuuint64_t(cols), cu.cuuint64_t(rows)], [cu.cuuint64_t(pitch)],
        [cu.cuuint32_t(box[1]), cu.cuuint32_t(box[0])], [cu.cuuint32_t(1), cu.cuuint32_t(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{SWIZZLES[swizzle]}"),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if err != cu.CUresult.CUDA_SUCCESS:
        raise ArgumentError(f"cuTensorMapEncodeTiled refused a {rows} x {cols} {dtype} map with box {box} and "
                            f"swizzle {swizzle}: {err.name}")
    words = np.array([int(w) for w in tensor_map.opaque], dtype=np.uint64)
    host = torch.from_numpy(words.view(np.uint8).copy()).pin_memory()
    # (map on the GPU, its pinned source): the source must outlive the asynchronous copy, so it lives in the cache
    return host.to(f"cuda:{device}", non_blocking=True), host
