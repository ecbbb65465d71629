"""labmagic.tensor_map: the checks that turn the driver's bare CUDA_ERROR_INVALID_VALUE into a rule, and (on a GPU)
a real TMA copy through a map it encoded."""

from __future__ import annotations

import pytest
import torch

import labmagic
from labmagic import tensor_map
from labmagic.errors import ArgumentError, NoGPUError
from labmagic.tensor_map import check_box, tensor_map_2d

needs_gpu = pytest.mark.skipif(not labmagic.has_gpu(), reason="encodes and uses a tensor map: needs a CUDA GPU")


@pytest.mark.parametrize("shape, size, box, swizzle, rule", [
    ((64, 64), 2, (64, 64), 48, "swizzles 0, 32, 64 or 128"),
    ((64, 64), 2, (0, 64), 128, "1 to 256 elements"),
    ((64, 64), 2, (300, 64), 128, "1 to 256 elements"),
    ((64, 17), 2, (64, 8), 0, "not a multiple of 16 bytes"),
    ((64, 64), 2, (64, 4), 0, "inner side (8 B) must be a multiple of 16"),
    ((64, 256), 2, (64, 128), 128, "at most 128 bytes, not 256"),
])
def test_check_box_names_the_rule_broken(shape, size, box, swizzle, rule):
    with pytest.raises(ArgumentError, match=rule.replace("(", r"\(").replace(")", r"\)")):
        check_box(shape, size, box, swizzle)


def test_check_box_accepts_the_chapter_boxes():
    for rows, cols, box in [(4096, 4096, (128, 64)), (31, 32, (256, 64)), (1, 8, (128, 64))]:
        check_box((rows, cols), 2, box, 128)


@pytest.mark.parametrize("make, message", [
    (lambda: [[1.0]], "needs a torch tensor, got list"),
    (lambda: torch.zeros(2, 8, 8, dtype=torch.bfloat16), "needs a 2-D tensor, got 3-D"),
    (lambda: torch.zeros(8, 8, dtype=torch.float64), "no TMA data type for float64"),
    (lambda: torch.zeros(16, 8, dtype=torch.bfloat16).t(), "rows of contiguous elements"),
])
def test_tensor_map_refuses_what_tma_cannot_describe(make, message):
    with pytest.raises(ArgumentError, match=message):
        tensor_map_2d(make(), box=(8, 8), swizzle=0)


@pytest.mark.skipif(labmagic.has_gpu(), reason="checks the message on a machine without a GPU")
def test_tensor_map_without_a_gpu_says_so():
    with pytest.raises(NoGPUError, match="needs a CUDA GPU"):
        tensor_map_2d(torch.zeros(64, 64, dtype=torch.bfloat16), box=(64, 64), swizzle=128)


TMA_COPY = r"""
typedef unsigned long long u64;
// Copy box (row0, col0) of a 2-D bf16 tensor through shared memory with TMA, unswizzled, into out (box-shaped).
extern "C" __global__ void tma_box(const void* map, short* out, int row0, int col0, int rows, int cols) {
    __shared__ __align__(128) short tile[64 * 64];
    __shared__ __align__(8) u64 bar;
    const unsigned b = (unsigned)__cvta_generic_to_shared(&bar), t = (unsigned)__cvta_generic_to_shared(tile);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(rows * cols * 2) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
                     :: "r"(t), "l"(map), "r"(b), "r"(col0), "r"(row0) : "memory");
    }
    unsigned done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(b) : "memory");
    for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) out[i] = tile[i];
}
"""


@needs_gpu
def test_a_tma_copy_through_the_map_reads_the_box_and_zero_fills_past_the_edge():
    kernel = labmagic.compile_cuda(TMA_COPY, arch="sm_90a").kernels["tma_box"]
    x = torch.randn(100, 72, device="cuda").to(torch.bfloat16)
    for row0, col0 in [(0, 0), (37, 16), (80, 40)]:  # the last box reaches past both edges
        out = torch.full((32, 32), float("nan"), dtype=torch.bfloat16, device="cuda")
        kernel(tensor_map_2d(x, box=(32, 32), swizzle=0), out.view(torch.int16), row0, col0, 32, 32, grid=1, block=128)
        torch.cuda.synchronize()
        expect = torch.zeros(32, 32, dtype=torch.bfloat16, device="cuda")
        part = x[row0:row0 + 32, col0:col0 + 32]
        expect[:part.shape[0], :part.shape[1]] = part
        assert torch.equal(out, expect), (row0, col0)


@needs_gpu
def test_maps_are_cached_by_what_they_encode():
    x = torch.zeros(256, 128, dtype=torch.bfloat16, device="cuda")
    assert tensor_map_2d(x, (128, 64)) is tensor_map_2d(x, (128, 64))
    assert tensor_map_2d(x, (128, 64)) is not tensor_map_2d(x, (64, 64))


@needs_gpu
def test_a_tensor_seen_before_skips_the_checks_but_another_view_of_its_memory_does_not():
    # The fast path keys on address, dtype, shape, strides, device, box and swizzle: a view at the same address
    # with other strides or shape is checked (and refused, or given a map of its own), never handed x's map.
    x = torch.zeros(256, 128, dtype=torch.bfloat16, device="cuda")
    m = tensor_map_2d(x, (64, 64))
    assert tensor_map_2d(x, (64, 64)) is m
    with pytest.raises(ArgumentError, match="rows of contiguous elements"):
        tensor_map_2d(x.t(), (64, 64))
    narrow = tensor_map_2d(x[:, :64], (64, 64))
    assert narrow is not m and not torch.equal(narrow, m)  # the same address, another row length in the map
    with pytest.raises(ArgumentError, match="no TMA data type"):
        tensor_map_2d(x.view(torch.int16), (64, 64))


@needs_gpu
def test_the_cache_holds_the_maps_of_every_input_set_bench_rotates():
    # %bench rotates up to 256 input sets; a launcher makes two maps per set. All must stay cached.
    sets = [torch.zeros(64, 64, dtype=torch.bfloat16, device="cuda") for _ in range(256)]
    first = [(tensor_map_2d(x, (64, 64)), tensor_map_2d(x, (32, 64))) for x in sets]
    again = [(tensor_map_2d(x, (64, 64)), tensor_map_2d(x, (32, 64))) for x in sets]
    assert all(a is b and c is d for (a, c), (b, d) in zip(first, again))


@needs_gpu
def test_a_miss_during_graph_capture_is_captured_not_an_error():
    x = torch.randn(64, 64, device="cuda").to(torch.bfloat16)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        m = tensor_map_2d(x, (16, 16), swizzle=32)
    # The captured copy reads its pinned source at every replay: reuse of freed pinned memory must not reach it.
    for _ in range(64):
        torch.full((128,), 0xFF, dtype=torch.uint8).pin_memory()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(m, tensor_map_2d(x, (16, 16), swizzle=32))  # replayed: the same bytes as an eager map
    assert m is not tensor_map_2d(x, (16, 16), swizzle=32)  # and the captured one was not cached


@pytest.fixture
def counted_encodes(monkeypatch):
    """The cache around a counting stand-in for the driver's encode (no GPU here): which keys were encoded."""
    encoded = []

    def encode(*key):
        encoded.append(key)
        return object(), object()  # (map on the GPU, pinned source): only their identity matters here

    monkeypatch.setattr(tensor_map, "_encode", encode)
    monkeypatch.setattr(tensor_map, "_CACHE", type(tensor_map._CACHE)())
    monkeypatch.setattr(tensor_map, "_CAPTURED", [])
    return encoded


def test_a_map_cached_before_graph_capture_is_reused_in_the_graph_and_kept_alive(counted_encodes):
    key = (0x10000, "bfloat16", 64, 64, 128, (64, 64), 128, 0)
    eager = tensor_map._cached(key, capturing=False)
    assert tensor_map._cached(key, capturing=True) is eager  # no second encode, so no copy node in the graph
    assert counted_encodes == [key]
    assert any(entry[0] is eager for entry in tensor_map._CAPTURED)  # alive even if the cache drops it later


def test_a_miss_during_capture_is_encoded_for_the_graph_only(counted_encodes):
    key = (0x20000, "bfloat16", 64, 64, 128, (64, 64), 128, 0)
    captured = tensor_map._cached(key, capturing=True)
    assert key not in tensor_map._CACHE and tensor_map._CAPTURED[-1][0] is captured
    assert tensor_map._cached(key, capturing=False) is not captured  # eager: encoded again, now cached
    assert len(counted_encodes) == 2


def test_the_cache_drops_the_least_recently_used_map_past_its_limit(counted_encodes, monkeypatch):
    monkeypatch.setattr(tensor_map, "_CACHE_LIMIT", 3)
    keys = [(0x1000 * i, "bfloat16", 8, 8, 16, (8, 8), 0, 0) for i in range(1, 5)]
    for key in keys[:3]:
        tensor_map._cached(key, capturing=False)
    tensor_map._cached(keys[0], capturing=False)  # used again: now the newest
    tensor_map._cached(keys[3], capturing=False)  # one too many: keys[1], the least recently used, goes
    assert list(tensor_map._CACHE) == [keys[2], keys[0], keys[3]]
    assert len(counted_encodes) == 4


@needs_gpu
def test_a_hit_during_graph_capture_uses_the_cached_map():
    x = torch.randn(64, 64, device="cuda").to(torch.bfloat16)
    eager = tensor_map_2d(x, (16, 16), swizzle=32)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = tensor_map_2d(x, (16, 16), swizzle=32)
    assert captured is eager
