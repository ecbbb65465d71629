// lab/gemm.cuh: the order in which a GEMM's blocks walk C's tiles.
//
//   grouped_tile(tile, tiles_m, tiles_n, group, tm, tn)   tile number `tile` as (block-row tm, block-column tn),
//                                                         GROUP block-rows at a time: a group's panels of A stay
//                                                         in L2 while it sweeps N
//
// Chapter 06 explains it (rung 2, `mma_gemm`; its Hopper rungs walk their persistent grids in the same order).
#pragma once

__device__ __forceinline__ void grouped_tile(int tile, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
    const int per_group = group * tiles_n, first = (tile / per_group) * group;
    const int size = min(tiles_m - first, group);
    tm = first + (tile % per_group) % size;
    tn = (tile % per_group) / size;
}
