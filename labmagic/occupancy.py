"""Theoretical occupancy from registers, shared memory and block size, with the limiter named.

This re-implements the rules of CUDA's occupancy calculator (``cuda_occupancy.h``,
``cudaOccMaxActiveBlocksPerMultiprocessor``) for the GPUs the book targets, so the compile panel can
say "8 blocks of 256 threads fit per SM: 100%; at 128 registers only 2 fit: 25%, limited by
registers" without a GPU. An SM holds as many blocks as the *tightest* of four limits allows:

- **warps**: ``max_warps_per_sm // warps_per_block``;
- **blocks**: a fixed number of resident blocks per SM;
- **registers**: registers are allocated per warp in units of 256 (``ceil(regs * 32 / 256) * 256``),
  separately in each of the 4 SM sub-partitions, so a warp must fit whole in one sub-partition's
  16384 registers; and a block must also fit the 65536-register per-block limit, where the hardware
  check rounds the block's warps up to a multiple of 4 (the sub-partitions);
- **shared memory**: static + dynamic shared memory per block, plus 1 KB the system reserves per block
  (sm_80 and later), rounded up to 128 bytes, against the SM's shared memory (the largest carveout:
  the driver picks the carveout that lets the kernel's blocks fit, as the calculator assumes by default).

Occupancy is resident warps over the SM's maximum warps. It is an upper bound on what Nsight Compute
later reports as *achieved* occupancy; a gap between the two means tail effects or imbalance.
"""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one compute capability (CUDA C++ Programming Guide, "Compute Capabilities")."""

    arch: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int  # bytes, largest carveout
    max_smem_per_block: int  # bytes, opt-in maximum (dynamic shared memory above 48 KB needs the opt-in)
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    max_regs_per_thread: int = 255
    reg_alloc_unit: int = 256  # registers, allocated per warp
    sub_partitions: int = 4  # register file split; also the warp rounding of the per-block register check
    reserved_smem_per_block: int = 1024  # bytes the system keeps per block (sm_80+)
    smem_alloc_unit: int = 128  # bytes
    max_threads_per_block: int = 1024
    warp_size: int = 32


KB = 1024

ARCHS: dict[str, ArchLimits] = {
    # A100: 64 warps, 32 blocks, 164 KB shared memory per SM, 163 KB per block.
    "sm_80": ArchLimits("sm_80", 64, 32, 164 * KB, 163 * KB),
    # GA10x (RTX 30, A10, A40): 48 warps, 16 blocks, 100 KB per SM, 99 KB per block.
    "sm_86": ArchLimits("sm_86", 48, 16, 100 * KB, 99 * KB),
    # Ada (RTX 40, L4, L40): 48 warps, 24 blocks, 100 KB per SM, 99 KB per block.
    "sm_89": ArchLimits("sm_89", 48, 24, 100 * KB, 99 * KB),
    # Hopper (H100, H200): 64 warps, 32 blocks, 228 KB per SM, 227 KB per block.
    "sm_90": ArchLimits("sm_90", 64, 32, 228 * KB, 227 * KB),
}


def limits_for(arch: str) -> ArchLimits:
    """Limits for ``sm_XY`` (``sm_90a`` is ``sm_90``). Raises KeyError naming the known ones."""
    key = arch.rstrip("af") if arch[-1:] in ("a", "f") else arch
    if key not in ARCHS:
        raise KeyError(f"no occupancy rules for {arch}; known: {', '.join(ARCHS)}")
    return ARCHS[key]


@dataclasses.dataclass(frozen=True)
class Occupancy:
    arch: str
    block_size: int
    registers: int
    smem_per_block: int  # static + dynamic, without the reserved 1 KB
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    #: Blocks per SM each resource alone would allow.
    limits: dict[str, int]
    #: The resources whose limit equals ``blocks_per_sm`` (several when they tie); empty at 100%.
    limiters: tuple[str, ...]
    note: str = ""

    @property
    def fraction(self) -> float:
        return self.active_warps / self.max_warps if self.max_warps else 0.0

    @property
    def percent(self) -> float:
        return 100.0 * self.fraction

    @property
    def limiter(self) -> str:
        """What stops more warps from fitting: ``registers``, ``shared memory``, ``blocks``, ``warps``
        (several joined with ``+`` when they tie), or ``none`` at full occupancy."""
        return "+".join(self.limiters) if self.limiters else "none"

    def summary(self) -> str:
        if self.blocks_per_sm == 0:
            return f"{self.block_size} threads/block cannot launch on {self.arch}: {self.note}"
        why = f"limited by {self.limiter}" if self.limiters else "full"
        return (f"{self.percent:.0f}% on {self.arch} ({self.blocks_per_sm} blocks x {self.block_size} threads "
                f"= {self.active_warps}/{self.max_warps} warps per SM), {why}")


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(arch: str, block_size: int, registers: int, smem_per_block: int = 0) -> Occupancy:
    """Blocks and warps resident per SM for a kernel using ``registers`` per thread and
    ``smem_per_block`` bytes of shared memory (static + dynamic) at ``block_size`` threads per block.

    A configuration that cannot launch at all (too many threads, registers or shared memory per
    block) returns ``blocks_per_sm == 0`` with the reason in ``note``.
    """
    lim = limits_for(arch)
    if block_size <= 0:
        raise ValueError("block_size must be positive")
    warps_per_block = math.ceil(block_size / lim.warp_size)
    inf = 10**9
    note = ""

    by_warps = lim.max_warps_per_sm // warps_per_block
    by_blocks = lim.max_blocks_per_sm

    if registers <= 0:
        by_regs = inf
    elif registers > lim.max_regs_per_thread:
        by_regs, note = 0, f"{registers} registers per thread exceed the {lim.max_regs_per_thread} maximum"
    else:
        regs_per_warp = _round_up(registers * lim.warp_size, lim.reg_alloc_unit)
        # Each warp lives in one sub-partition; count whole warps per sub-partition.
        warps_per_sub = (lim.regs_per_sm // lim.sub_partitions) // regs_per_warp
        by_regs = (warps_per_sub * lim.sub_partitions) // warps_per_block
        # The launch check assumes allocation in all partitions at once: warps rounded up to 4.
        if _round_up(warps_per_block, lim.sub_partitions) * regs_per_warp > lim.regs_per_block:
            by_regs = 0
            note = (f"{block_size} threads x {registers} registers exceed the {lim.regs_per_block} registers a "
                    f"block may use (too many resources requested for launch)")

    smem_alloc = _round_up(smem_per_block + lim.reserved_smem_per_block, lim.smem_alloc_unit)
    if smem_per_block > lim.max_smem_per_block:
        by_smem = 0
        note = note or (f"{smem_per_block} bytes of shared memory exceed the {lim.max_smem_per_block} bytes a block "
                        f"may use on {lim.arch}")
    else:
        by_smem = lim.smem_per_sm // smem_alloc

    if block_size > lim.max_threads_per_block:
        by_warps = 0
        note = note or f"{block_size} threads exceed the {lim.max_threads_per_block} threads per block maximum"

    limits = {"warps": by_warps, "blocks": by_blocks, "registers": by_regs, "shared memory": by_smem}
    blocks = max(0, min(limits.values()))
    active = blocks * warps_per_block
    full = active >= lim.max_warps_per_sm
    limiters = () if full else tuple(name for name, value in limits.items() if value == blocks)
    return Occupancy(
        arch=lim.arch, block_size=block_size, registers=registers, smem_per_block=smem_per_block,
        blocks_per_sm=blocks, active_warps=active, max_warps=lim.max_warps_per_sm,
        limits={k: (v if v < inf else -1) for k, v in limits.items()}, limiters=limiters, note=note,
    )


#: Block sizes the panel sweeps when the kernel's block size is not known.
SWEEP_BLOCK_SIZES = (64, 128, 256, 512, 1024)


def sweep(arch: str, registers: int, smem_per_block: int = 0,
          block_sizes: tuple[int, ...] = SWEEP_BLOCK_SIZES) -> list[Occupancy]:
    """Occupancy at several block sizes: which launch configurations this kernel's resources allow."""
    return [occupancy(arch, b, registers, smem_per_block) for b in block_sizes]
