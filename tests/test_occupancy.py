"""Occupancy against CUDA's occupancy rules, on cases worked out by hand.

Each expected value is derived in the comment from the rules in ``cuda_occupancy.h``: registers
rounded per warp to 256, whole warps per sub-partition (65536 / 4 = 16384 registers), shared memory
plus 1 KB reserved per block rounded to 128 bytes, and the per-SM warp and block caps.
"""

from __future__ import annotations

import pytest

from labmagic.occupancy import limits_for, occupancy, sweep


def test_full_occupancy_at_32_registers():
    # sm_90, 256 threads = 8 warps. warps: 64 // 8 = 8 blocks. registers: 32 * 32 = 1024 per warp,
    # 16384 // 1024 = 16 warps per sub-partition -> 64 warps -> 8 blocks. 8 blocks * 8 warps = 64/64.
    occ = occupancy("sm_90", 256, 32, 0)
    assert (occ.blocks_per_sm, occ.active_warps, occ.percent) == (8, 64, 100.0)
    assert occ.limiter == "none"


def test_128_registers_quarter_occupancy_limited_by_registers():
    # 128 * 32 = 4096 registers per warp; 16384 // 4096 = 4 warps per sub-partition -> 16 warps per SM
    # -> 16 // 8 = 2 blocks of 256 threads -> 16/64 warps = 25%.
    occ = occupancy("sm_90", 256, 128, 0)
    assert (occ.blocks_per_sm, occ.active_warps) == (2, 16)
    assert occ.percent == 25.0
    assert occ.limiter == "registers"


def test_register_allocation_granularity():
    # 33 registers: 33 * 32 = 1056 rounds up to 1280 per warp; 16384 // 1280 = 12 warps per
    # sub-partition -> 48 warps -> 6 blocks of 8 warps = 48/64 = 75%. Without the 256 rounding it
    # would be 16384 // 1056 = 15 -> 60 warps -> 7 blocks = 87.5%, so this pins the granularity.
    occ = occupancy("sm_90", 256, 33, 0)
    assert occ.blocks_per_sm == 6
    assert occ.percent == 75.0
    assert occ.limiter == "registers"


def test_shared_memory_limits_with_reserved_kilobyte():
    # 48 KB + 1 KB reserved = 50176 bytes per block; 228 KB = 233472 // 50176 = 4 blocks (4.65).
    # 4 blocks of 128 threads = 16 warps = 25%.
    occ = occupancy("sm_90", 128, 16, 48 * 1024)
    assert occ.blocks_per_sm == 4
    assert occ.percent == 25.0
    assert occ.limiter == "shared memory"
    # Exactly 4 blocks of 56 KB fit in 228 KB only if the reserved 1 KB is ignored: 4 * 57 KB = 228 KB
    # fits, 5 would not; with 56.5 KB (57.5 KB allocated) only 3 fit (4 * 57.5 = 230 KB > 228 KB).
    assert occupancy("sm_90", 128, 16, 56 * 1024).blocks_per_sm == 4
    assert occupancy("sm_90", 128, 16, 56 * 1024 + 512).blocks_per_sm == 3


def test_small_blocks_hit_the_block_cap():
    # 32 threads = 1 warp per block; warps allow 64 blocks but sm_90 caps at 32 -> 32/64 = 50%.
    occ = occupancy("sm_90", 32, 16, 0)
    assert occ.blocks_per_sm == 32
    assert occ.percent == 50.0
    assert occ.limiter == "blocks"


def test_per_block_register_limit_blocks_launch():
    # 1024 threads at 64 registers: 2048 per warp * 32 warps = 65536 = the per-block limit: launches,
    # 16384 // 2048 = 8 warps per sub-partition = 32 per SM = 1 block = 50%.
    ok = occupancy("sm_90", 1024, 64, 0)
    assert (ok.blocks_per_sm, ok.percent, ok.limiter) == (1, 50.0, "registers")
    # 65 registers: 65 * 32 = 2080 -> 2304 per warp; 32 * 2304 = 73728 > 65536: cannot launch.
    bad = occupancy("sm_90", 1024, 65, 0)
    assert bad.blocks_per_sm == 0
    assert "registers" in bad.note


def test_ampere_ada_differ_in_warps_and_blocks():
    # sm_86: 48 warps, 16 blocks. 64 threads = 2 warps: warps allow 24, blocks cap 16 -> 32/48 warps.
    ga = occupancy("sm_86", 64, 16, 0)
    assert ga.blocks_per_sm == 16 and ga.active_warps == 32
    assert ga.percent == pytest.approx(200 / 3)
    assert ga.limiter == "blocks"
    # sm_89 caps at 24 blocks: 24 * 2 = 48/48 warps = 100%.
    assert occupancy("sm_89", 64, 16, 0).percent == 100.0
    # sm_80 (A100): 164 KB per SM; 100 KB blocks: 101 KB allocated -> 1 block; on sm_86 (99 KB max) none.
    assert occupancy("sm_80", 256, 32, 100 * 1024).blocks_per_sm == 1
    assert occupancy("sm_86", 256, 32, 100 * 1024).blocks_per_sm == 0


def test_smem_over_block_maximum_cannot_launch():
    occ = occupancy("sm_90", 128, 32, 228 * 1024)
    assert occ.blocks_per_sm == 0 and "shared memory" in occ.note
    assert "cannot launch" in occ.summary()


def test_ties_name_every_limiter():
    # sm_90, 256 threads (8 warps), 64 registers: 2048 per warp -> 8 warps per sub-partition -> 32 warps
    # -> 4 blocks. 50 KB shared: 51 KB allocated, 228 // 51 = 4 blocks. Both allow exactly 4 -> 32/64.
    occ = occupancy("sm_90", 256, 64, 50 * 1024)
    assert occ.blocks_per_sm == 4 and occ.percent == 50.0
    assert occ.limiters == ("registers", "shared memory")
    assert occ.limiter == "registers+shared memory"
    # 40 KB shared instead: 41 KB allocated -> 5 blocks, so registers (4) limit alone.
    assert occupancy("sm_90", 256, 64, 40 * 1024).limiter == "registers"


def test_sm90a_and_unknown_arch():
    assert limits_for("sm_90a").arch == "sm_90"
    with pytest.raises(KeyError, match="sm_75"):
        occupancy("sm_75", 128, 32)


def test_sweep_over_block_sizes():
    rows = sweep("sm_90", 128)
    assert [r.block_size for r in rows] == [64, 128, 256, 512, 1024]
    # 128 registers: 16 warps per SM whatever the block size, until a block needs more than 16 warps:
    # 512 threads = 16 warps -> 1 block; 1024 threads cannot launch (32 * 4096 > 65536).
    assert [r.active_warps for r in rows] == [16, 16, 16, 16, 0]
