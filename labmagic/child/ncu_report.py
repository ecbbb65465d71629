"""Reading Nsight Compute's output: its CSV pages, in SI units, and its error messages.

``ncu --import R --csv --page raw --print-units base`` prints a header row of metric names, a row of
units and one row per profiled kernel launch; ``--page details`` prints one row per (kernel, section,
metric) with display names (``Duration``, ``Achieved Occupancy``). Both become
:class:`KernelProfile` objects whose properties pick, for each number the notebook shows, the first
metric ncu provided, so a report from an older ncu or a smaller section set degrades to ``-`` rather
than failing. Numbers carry thousands separators in some versions; ``n/a`` marks metrics the GPU does
not support.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re

PERMISSION_FIX = (
    "GPU performance counters are restricted to admin users on this machine (ERR_NVGPUCTRPERM). Fix: run as "
    "root, or allow all users once with `echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee "
    "/etc/modprobe.d/ncu-permissions.conf` and reboot (or reload the nvidia module); in a container, start it "
    "with `--cap-add=SYS_ADMIN`. See https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


def diagnose(log: str) -> str | None:
    """The one-line reason an ncu run failed, from its output, or None when nothing known matched."""
    if "ERR_NVGPUCTRPERM" in log:
        return PERMISSION_FIX
    if re.search(r"No kernels were profiled", log):
        return ("ncu profiled no kernel: the variant launched nothing between cudaProfilerStart and Stop "
                "(a CPU fallback, a cached result, or a variant that only returned a view?)")
    if "ERR_NVGPU" in log:
        m = re.search(r"==ERROR== (.*)", log)
        return m.group(1) if m else "ncu could not access the GPU"
    return None


# --- parsing ncu CSV -------------------------------------------------------------------------------

# ncu prints decimal multiples: 1 Kbyte = 1000 bytes.
_UNIT_SCALE = {
    "byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1,
    "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1,
    "byte/second": 1, "kbyte/second": 1e3, "mbyte/second": 1e6, "gbyte/second": 1e9, "tbyte/second": 1e12,
    "hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9,
    "cycle/nsecond": 1e9, "cycle/usecond": 1e6, "cycle/second": 1,
}


def to_number(text: str, unit: str = "") -> float | None:
    """``"2,345.60"`` in ``usecond`` -> 0.0023456 (SI base units: bytes, seconds); ``"n/a"`` -> None.

    ncu prints thousands separators in some versions and pages; percentages and counts keep their
    value. Values with other units pass unchanged.
    """
    text = (text or "").strip().replace(",", "")
    if not text or text.lower() in ("n/a", "nan", "-"):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value * _UNIT_SCALE.get(unit.strip().lower(), 1)


_ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
               "Block Size", "Grid Size", "Device", "CC")


@dataclasses.dataclass
class KernelProfile:
    """One profiled kernel launch: its identity and its metrics in SI base units."""

    id: int
    name: str
    block: str = ""
    grid: str = ""
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    raw: dict[str, str] = dataclasses.field(default_factory=dict)

    def get(self, *names: str) -> float | None:
        for n in names:
            if self.metrics.get(n) is not None:
                return self.metrics[n]
        return None

    # The summary the notebook shows, each from the first metric ncu provided.
    @property
    def duration_s(self):
        return self.get("gpu__time_duration.sum", "Duration")

    @property
    def sm_pct(self):
        return self.get("sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput")

    @property
    def memory_pct(self):
        return self.get("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory Throughput")

    @property
    def dram_pct(self):
        # Hopper's ncu 2025+ reports the SOL section's DRAM figure as gpu__dram_throughput.
        return self.get("dram__throughput.avg.pct_of_peak_sustained_elapsed",
                        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput")

    @property
    def dram_read(self):
        return self.get("dram__bytes_read.sum")

    @property
    def dram_write(self):
        return self.get("dram__bytes_write.sum")

    @property
    def l1_hit_pct(self):
        return self.get("l1tex__t_sector_hit_rate.pct", "L1/TEX Hit Rate")

    @property
    def l2_hit_pct(self):
        return self.get("lts__t_sector_hit_rate.pct", "L2 Hit Rate")

    @property
    def achieved_occupancy_pct(self):
        return self.get("sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy")

    @property
    def theoretical_occupancy_pct(self):
        return self.get("sm__maximum_warps_per_active_cycle_pct", "Theoretical Occupancy")

    @property
    def registers(self):
        return self.get("launch__registers_per_thread", "Registers Per Thread")

    @property
    def occupancy_limiter(self) -> str | None:
        """The resource allowing the fewest blocks per SM (``launch__occupancy_limit_*``), ties joined."""
        names = {"registers": ("launch__occupancy_limit_registers", "Block Limit Registers"),
                 "shared memory": ("launch__occupancy_limit_shared_mem", "Block Limit Shared Mem"),
                 "warps": ("launch__occupancy_limit_warps", "Block Limit Warps"),
                 "blocks": ("launch__occupancy_limit_blocks", "Block Limit SM")}
        limits = {k: self.get(*v) for k, v in names.items()}
        limits = {k: v for k, v in limits.items() if v is not None}
        if not limits:
            return None
        low = min(limits.values())
        return "+".join(k for k, v in limits.items() if v == low)

    @property
    def bank_conflicts(self):
        ld = self.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum")
        st = self.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")
        if ld is None and st is None:
            return self.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum")
        return (ld or 0) + (st or 0)

    def stalls(self, top: int = 3) -> list[tuple[str, float]]:
        """Top warp stall reasons: (reason, average warps stalled per issued instruction), largest first.

        From WarpStateStats' ``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio``;
        failing that, the PC-sampling counts ``smsp__pcsamp_warps_issue_stalled_<reason>``. ``selected``
        (the warp issued) is not a stall and is left out.
        """
        found: dict[str, float] = {}
        patterns = (re.compile(r"^smsp__average_warps?_issue_stalled_(\w+?)_per_issue_active\.ratio$"),
                    re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+?)\.ratio$"),
                    re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+?)$"))
        for pattern in patterns:
            for name, value in self.metrics.items():
                m = pattern.match(name)
                if m and value is not None and not m.group(1).endswith("not_issued"):
                    reason = m.group(1)
                    if reason not in ("selected",) and value > 0:
                        found.setdefault(reason, value)
            if found:
                break
        return sorted(found.items(), key=lambda kv: -kv[1])[:top]

    def instruction_mix(self) -> dict[str, float]:
        """Executed (warp-level) instructions that explain performance, and the global load width.

        ``global ld bytes/thread``: L1 bytes of global loads per executed load instruction over 32
        threads: 4 for ``LDG.E``, 16 for ``LDG.E.128`` (fully active warps).
        """
        out: dict[str, float] = {}
        for key, names in {
            "global ld": ("smsp__sass_inst_executed_op_global_ld.sum",),
            "global st": ("smsp__sass_inst_executed_op_global_st.sum",),
            "shared ld": ("smsp__sass_inst_executed_op_shared_ld.sum",),
            "shared st": ("smsp__sass_inst_executed_op_shared_st.sum",),
            "local ld/st": ("smsp__sass_inst_executed_op_local_ld.sum",),
            "FFMA (threads)": ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",),
            "HFMA (threads)": ("smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",),
        }.items():
            value = self.get(*names)
            if value:
                out[key] = value
        local_st = self.get("smsp__sass_inst_executed_op_local_st.sum")
        if local_st:
            out["local ld/st"] = out.get("local ld/st", 0) + local_st
        tensor = sum(v for k, v in self.metrics.items()
                     if v and re.match(r"^s(m|msp)__inst_executed_pipe_tensor\w*\.sum$", k))
        if tensor:
            out["tensor core"] = tensor
        ld_bytes = self.get("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum")
        ld_inst = self.get("smsp__sass_inst_executed_op_global_ld.sum")
        if ld_bytes and ld_inst:
            out["global ld bytes/thread"] = round(ld_bytes / ld_inst / 32, 1)
        return out


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV part of ncu's output (it may be preceded by ``==PROF==`` lines)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def parse_raw_csv(text: str) -> list[KernelProfile]:
    """``ncu --import R --csv --page raw``: a header row of metric names, a row of units, then one row
    per kernel launch."""
    rows = _csv_rows(text)
    if len(rows) < 2:
        return []
    header = rows[0]
    units = rows[1] if rows[1] and rows[1][0] == "" else [""] * len(header)
    body = rows[2:] if units is rows[1] else rows[1:]
    kernels = []
    for row in body:
        cells = dict(zip(header, row))
        metrics = {}
        for name, unit, value in zip(header, units, row):
            if name in _ID_COLUMNS:
                continue
            metrics[name] = to_number(value, unit)
        kernels.append(KernelProfile(
            id=int(to_number(cells.get("ID", "0")) or 0), name=cells.get("Kernel Name", "?"),
            block=cells.get("Block Size", ""), grid=cells.get("Grid Size", ""), metrics=metrics, raw=cells,
        ))
    return kernels


def parse_details_csv(text: str) -> list[KernelProfile]:
    """``ncu --csv --page details``: one row per (kernel, section, metric) with ``Metric Name``,
    ``Metric Unit`` and ``Metric Value``; metrics are keyed by their display name (``Duration``)."""
    rows = _csv_rows(text)
    if not rows:
        return []
    header = rows[0]
    kernels: dict[str, KernelProfile] = {}
    for row in rows[1:]:
        cells = dict(zip(header, row))
        kid = cells.get("ID", "0")
        k = kernels.get(kid)
        if k is None:
            k = kernels[kid] = KernelProfile(
                id=int(to_number(kid) or 0), name=cells.get("Kernel Name", "?"),
                block=cells.get("Block Size", ""), grid=cells.get("Grid Size", ""))
        name = cells.get("Metric Name", "")
        if name:
            k.metrics.setdefault(name, to_number(cells.get("Metric Value", ""), cells.get("Metric Unit", "")))
    return list(kernels.values())


def summary_rows(kernels) -> list[dict]:
    """One flat row per kernel (SI units) for the CSV saved next to the report."""
    rows = []
    for k in kernels:
        stalls = k.stalls()
        rows.append({
            "kernel": k.name, "grid": k.grid, "block": k.block, "duration_s": k.duration_s,
            "sm_pct": k.sm_pct, "memory_pct": k.memory_pct, "dram_pct": k.dram_pct,
            "dram_read_bytes": k.dram_read, "dram_write_bytes": k.dram_write,
            "l1_hit_pct": k.l1_hit_pct, "l2_hit_pct": k.l2_hit_pct,
            "achieved_occupancy_pct": k.achieved_occupancy_pct,
            "theoretical_occupancy_pct": k.theoretical_occupancy_pct, "occupancy_limiter": k.occupancy_limiter,
            "registers": k.registers, "bank_conflicts": k.bank_conflicts,
            "top_stalls": ";".join(f"{r}={v:.3g}" for r, v in stalls),
        })
    return rows
