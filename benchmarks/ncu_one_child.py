"""Run from the repository root on a GPU: python benchmarks/ncu_one_child.py.

%ncu of several variants in one child (profile_variants) against one child per variant (profile_variant), chapter 01
at 2**26: the same kernels and DRAM bytes (within 2%) each way, and the wall time each way takes. The reports go to
results/ncu-multi-check/ (a scratch slug, not a GPU's results folder)."""
import time

V = ["cuda_naive", "cuda_float4", "cuda_grid_stride"]


def main() -> None:
    import labmagic

    if not labmagic.has_gpu():
        print("no GPU: Nsight Compute profiles need one")
        return

    from labmagic.child.ncu_run import profile_variant, profile_variants

    t = time.perf_counter()
    multi = profile_variants("01", V, "2**26", slug="ncu-multi-check")
    t_multi = time.perf_counter() - t
    t = time.perf_counter()
    single = [profile_variant("01", v, "2**26", slug="ncu-multi-check") for v in V]
    t_single = time.perf_counter() - t
    print(f"one child for {len(V)} variants: {t_multi:.1f} s; one child each: {t_single:.1f} s")
    for m, s in zip(multi, single):
        print(m.variant, [k.name for k in m.kernels], [k.name for k in s.kernels],
              f"dram {m.dram_bytes:.4g} vs {s.dram_bytes:.4g}",
              f"dur {m.duration_s * 1e6:.1f} vs {s.duration_s * 1e6:.1f} us",
              m.report.name)
        assert [k.name for k in m.kernels] == [k.name for k in s.kernels], m.variant
        assert abs(m.dram_bytes / s.dram_bytes - 1) < 0.02, m.variant
    print(repr(multi[1]))
    print("NCU_MULTI_OK")


if __name__ == "__main__":
    main()
