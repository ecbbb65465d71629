"""Launches at the edges of what a block may ask for: shared memory past the 48 KiB default once static shared
memory is counted, and clusters past the portable 8 blocks (chapters 03-05 split a 1 MB row over 16)."""

from __future__ import annotations

import pytest
import torch

import labmagic
from labmagic.compiler.kernel import compile_module

needs_gpu = pytest.mark.skipif(not labmagic.has_gpu(), reason="launches kernels: needs a CUDA GPU")

SOURCE = r"""
// 1 KiB of static shared memory beside the dynamic bytes: each block writes both back.
__global__ void static_and_dynamic(float* out, int n) {
    __shared__ float fixed[256];
    extern __shared__ float dyn[];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) fixed[i] = i;
    for (int i = threadIdx.x; i < n; i += blockDim.x) dyn[i] = 2 * i;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = dyn[i] + fixed[i % 256];
}

// Each block records the size of the cluster it ran in and its rank there.
template <int CL> __global__ void __cluster_dims__(CL, 1, 1) cluster_shape(int* out) {
    unsigned size, rank;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) { out[2 * blockIdx.x] = size; out[2 * blockIdx.x + 1] = rank; }
}
"""


@pytest.fixture(scope="module")
def module():
    return compile_module(SOURCE, arch="sm_90" if not labmagic.has_gpu() else None,
                          name_expressions=["static_and_dynamic", "cluster_shape<8>", "cluster_shape<16>"])


def test_the_default_allowance_counts_static_shared_memory(module):
    kernel = module["static_and_dynamic"]
    assert kernel.resources.smem_static == 1024
    assert kernel._smem_ok == 48 * 1024 - 1024  # past this, the launch must ask for more first


@needs_gpu
def test_48_kib_of_dynamic_shared_memory_beside_static_launches(module):
    n = 48 * 1024 // 4  # 48 KiB dynamic + 1 KiB static: the driver refuses it unless the kernel opted in
    out = torch.full((n,), float("nan"), device="cuda")
    module["static_and_dynamic"](out, n, grid=1, block=256, smem=n * 4)
    idx = torch.arange(n, device="cuda", dtype=torch.float32)
    torch.testing.assert_close(out, 2 * idx + idx % 256, rtol=0, atol=0)


@needs_gpu
@pytest.mark.parametrize("cl", [8, 16])
def test_clusters_of_up_to_16_blocks_launch_with_the_size_asked(module, cl):
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread-block clusters need sm_90")
    out = torch.full((2 * 4 * cl,), -1, device="cuda", dtype=torch.int32)
    module[f"cluster_shape<{cl}>"](out, grid=4 * cl, block=32)
    got = out.view(-1, 2).cpu()
    assert got[:, 0].tolist() == [cl] * (4 * cl)
    assert got[:, 1].tolist() == list(range(cl)) * 4


@needs_gpu
@pytest.mark.parametrize("cl", [8, 16])
def test_max_active_clusters_is_what_the_gpcs_hold(module, cl):
    """A persistent grid's size: whole clusters, no more blocks than the SMs hold when each block fills an SM (a
    cluster lives in one GPC, so fewer may fit than the SMs would suggest), more with small blocks; and that grid
    launches."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread-block clusters need sm_90")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = module[f"cluster_shape<{cl}>"]
    one_an_sm = 200 * 1024  # dynamic shared memory that leaves room for one block an SM
    clusters = kernel.max_active_clusters(32, smem=one_an_sm)
    assert 1 <= clusters and clusters * cl <= sms
    assert kernel.max_active_clusters(32) >= clusters  # small blocks: several an SM
    out = torch.full((2 * clusters * cl,), -1, device="cuda", dtype=torch.int32)
    kernel(out, grid=clusters * cl, block=32, smem=one_an_sm)  # that grid launches, every block with its rank
    assert out.view(-1, 2)[:, 1].cpu().tolist() == list(range(cl)) * clusters


@needs_gpu
def test_max_active_clusters_of_a_kernel_without_clusters_counts_blocks(module):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert module["static_and_dynamic"].max_active_clusters(256, smem=100 * 1024) == 2 * sms


def test_max_active_clusters_refuses_bad_input_and_needs_a_gpu(module):
    kernel = module["cluster_shape<8>"]
    with pytest.raises(labmagic.ArgumentError, match="smem"):
        kernel.max_active_clusters(32, smem=-1)
    if not labmagic.has_gpu():
        with pytest.raises(labmagic.NoGPUError):
            kernel.max_active_clusters(32)
